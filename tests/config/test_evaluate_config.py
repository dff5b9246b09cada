"""`azr eval`'s settings section: every flag is a field with its help, the schema checks the values, `--help` and
docs/evaluation.md's table are generated from the fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from azr.cli import azr
from azr.config import EvalCommandConfig, eval_command_config, eval_flag_help
from azr.config.schema import fields_markdown, iter_fields
from azr.errors import ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation.md"


def test_every_eval_flag_is_a_field_with_help():
    command = azr.commands["eval"]
    flags = {p.name for p in command.params} - {"config_path", "overrides", "compare", "help"}
    fields = {name for name, *_ in iter_fields(EvalCommandConfig, "")}
    assert flags == fields
    assert all(help_text for *_, help_text in iter_fields(EvalCommandConfig, ""))


def test_the_help_shows_the_fields_help_and_default(cli):
    code, out, _ = cli("eval", "--help")
    assert code == 0
    assert "Sampling temperature; 0 is greedy. [default:" in " ".join(out.split())
    assert eval_flag_help("temperature").endswith("[default: 0.8]")
    assert "[default" not in eval_flag_help("seed")


def test_flags_build_the_section_with_its_defaults_and_bounds():
    cfg = eval_command_config({"dataset": "held-out", "model_path": Path("m"), "temperature": None})
    assert (cfg.dataset, cfg.model_path, cfg.temperature, cfg.max_new_tokens) == ("held-out", "m", 0.8, 1024)
    with pytest.raises(ConfigError, match=r"^eval\.top_p: must be <= 1, got 2"):
        eval_command_config({"top_p": 2.0})
    with pytest.raises(ConfigError, match=r"^eval\.tempreature: unknown key \(did you mean 'temperature'\?\)"):
        eval_command_config({"tempreature": 0.5})


def test_docs_eval_table_is_generated_from_the_help_strings():
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- eval-table:start -->\n(.*?)\n<!-- eval-table:end -->", text, re.S)
    assert block, "docs/evaluation.md lacks the eval table markers"
    assert block.group(1).strip() == fields_markdown(EvalCommandConfig).strip()
