"""What `azr sandbox doctor` says a host or container must allow when no namespace backend works, read from a fake
/proc and root (the live self-test itself runs in test_backends and the CLI tests)."""

from __future__ import annotations

from pathlib import Path

from azr.sandbox import namespace_hints
from azr.sandbox.doctor import CONTAINER_HINT


def _root(tmp_path: Path, **switches: str) -> Path:
    for name, value in switches.items():
        path = tmp_path / "proc" / "sys" / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return tmp_path


def test_a_host_that_allows_user_namespaces_needs_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    root = _root(tmp_path, user__max_user_namespaces="63000", kernel__unprivileged_userns_clone="1")
    assert namespace_hints(root) == []


def test_each_kernel_switch_that_blocks_user_namespaces_is_named_with_its_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    root = _root(
        tmp_path,
        user__max_user_namespaces="0",
        kernel__unprivileged_userns_clone="0",
        kernel__apparmor_restrict_unprivileged_userns="1",
    )
    hints = namespace_hints(root)
    assert len(hints) == 3
    assert "user.max_user_namespaces=15000" in hints[0]
    assert "kernel.unprivileged_userns_clone=1" in hints[1]
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in hints[2]


def test_inside_a_container_the_runtime_settings_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / ".dockerenv").touch()
    assert namespace_hints(tmp_path) == [CONTAINER_HINT]
    for flag in ("seccomp=unconfined", "systempaths=unconfined", "apparmor=unconfined", "unmask=ALL", "procMount"):
        assert flag in CONTAINER_HINT
    (tmp_path / ".dockerenv").unlink()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert namespace_hints(tmp_path) == [CONTAINER_HINT]


def test_the_doctor_checks_namespaces_and_stopped_or_traced_programs_live(cli):
    code, out, _ = cli("sandbox", "doctor", "--backend", "bwrap")
    for guarantee in (
        "no new namespaces (user, network)",
        "wall-clock limit on a stopped program",
        "wall-clock limit on a traced program",
    ):
        assert any(line.startswith("PASS") and guarantee in line for line in out.splitlines()), out
    assert code == 0, out
