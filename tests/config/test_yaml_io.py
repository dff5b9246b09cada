"""Recipe text: bounded in size, nesting and alias expansion before anything is built; duplicate keys in YAML and
JSON are errors; the C parser reads large files. Each hostile file ends in one line naming the file, exit 2, fast."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from azr.config import load_config
from azr.config.yaml_io import _loader
from azr.errors import ConfigError


def _aliases(levels: int = 9, width: int = 9) -> str:
    lines = ["model: {name_or_path: x}", "gen:", "  endpoint:", "    extra_body:"]
    lines.append(f"      l0: &a0 [{', '.join(['x'] * width)}]")
    lines += [f"      l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_nine_levels_of_nine_aliases_are_refused_with_the_limit_named(write, cli):
    path = write("aliases.yaml", _aliases())
    started = time.monotonic()
    code, out, err = cli("config", "show", "--config", path)
    assert code == 2 and not out and time.monotonic() - started < 10
    assert f"{path}:" in err and "once aliases are expanded" in err and "AZR_MAX_RECIPE_VALUES" in err
    assert len(err.strip().splitlines()) == 1


def test_a_few_aliases_still_work(write):
    cfg = load_config(write("ok.yaml", _aliases(levels=3, width=3)))
    assert cfg.gen.endpoint.extra_body["l2"] == [[["x"] * 3] * 3] * 3


@pytest.mark.parametrize(
    "text", ["model: {name_or_path: x}\ngrpo: &a\n  x: *a\n", "model: {name_or_path: x}\ngrpo: &a [1, *a]\n"]
)
def test_a_self_referential_alias_is_one_line_not_a_recursion_error(write, cli, text):
    code, _, err = cli("config", "show", "--config", write("self.yaml", text))
    assert code == 2 and "alias *a refers to itself" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_deep_nesting_is_refused_without_a_crash(tmp_path, suffix):
    """100,000 levels crash PyYAML's C composer (a segfault) and raise RecursionError in json: refused first, in
    a child process so that a crash shows as one."""
    deep = "[" * 100_000 + "]" * 100_000
    body = f'{{"gen": {{"endpoint": {{"extra_body": {{"x": {deep}}}}}}}}}'
    path = tmp_path / f"deep.{suffix}"
    path.write_text(body)
    done = subprocess.run(
        [sys.executable, "-m", "azr.cli", "config", "show", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "nested more than 64 levels deep" in done.stderr and "AZR_MAX_RECIPE_DEPTH" in done.stderr


def test_a_recipe_past_the_size_limit_is_refused_at_once(write, cli, monkeypatch):
    path = write("big.yaml", "seed: 1\n" + "# padding\n" * 200_000)
    code, _, err = cli("config", "show", "--config", path)
    assert code == 2 and "larger than the limit of 1,048,576 bytes" in err and "AZR_MAX_RECIPE_BYTES" in err
    monkeypatch.setenv("AZR_MAX_RECIPE_BYTES", "4000000")
    code, out, _ = cli("config", "show", "--config", path, "--set", "model.name_or_path=x")
    assert code == 0 and "seed: 1" in out


def test_dev_zero_as_a_recipe_is_read_only_up_to_the_limit(cli):
    started = time.monotonic()
    code, _, err = cli("config", "show", "--config", "/dev/zero")
    assert code == 2 and "/dev/zero: larger than the limit" in err and time.monotonic() - started < 10


def test_the_c_parser_is_used_where_installed_and_fails_a_large_file_on_its_first_line_fast(write, monkeypatch):
    if getattr(yaml, "CSafeLoader", None) is None:
        pytest.skip("PyYAML was built without libyaml here")
    assert issubclass(_loader(), yaml.CSafeLoader)
    monkeypatch.setenv("AZR_MAX_RECIPE_BYTES", str(60 << 20))
    path = write("bad.yaml", "seed: [1\n" + "x: 1\n" * (10 << 20))
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: invalid YAML"):
        load_config(path)
    assert time.monotonic() - started < 15


def test_a_json_recipe_with_a_duplicate_key_is_an_error(write, cli):
    code, _, err = cli("config", "show", "--config", write("dup.json", '{"seed": 1, "seed": 2}'))
    assert code == 2 and "duplicate key 'seed'" in err
