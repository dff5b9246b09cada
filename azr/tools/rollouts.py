"""The rollouts file `azr gen` writes and SFT reads: one JSON object per episode, its schema, resume bookkeeping,
the summary, and loading episodes back for training (each record checked, errors naming `file:line`). A record:
`schema` (`azr.rollout/1`), `id` (`TASK#SAMPLE`), `task_id`, `sample`, `seed`, `model` and `sampling` (settings a
resumed file must match), `env` (`tools` / `feedback`), `tools`, `messages`, `tool_events`, `finish_reason`, `error`,
`usage`, `grade`, `rewards`; a feedback episode also `prompt_ids` and `turns` (docs/tools.md, docs/feedback.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azr.errors import ConfigError, DataError
from azr.inputs import load_json
from azr.logs import prune_jsonl, read_jsonl_records

if TYPE_CHECKING:
    from azr.config import EnvironmentKind

SCHEMA = "azr.rollout/1"
KINDS = ("policy", "env")  # a feedback episode's turns


def needs_redo(record: dict[str, Any]) -> bool:
    """An episode the policy or the sandbox failed (not the model): a resumed run does it again."""
    return record.get("finish_reason") == "error" or (record.get("grade") or {}).get("status") == "error"


def resume_state(path: Path, settings: dict[str, Any], resume: bool) -> set[tuple[str, int]]:
    """The (task_id, sample) pairs already done in `path`. Refuses (ConfigError) to overwrite a file without
    `--resume`, or to continue one written with other settings; drops failed episodes so they are redone."""
    if not path.exists() or path.stat().st_size == 0:
        return set()
    if not resume:
        raise ConfigError(f"--out {path}: the file exists; pass --resume to continue it, or choose another file")
    records = read_jsonl_records(path)
    for record in records:
        if record.get("schema") != SCHEMA:
            raise ConfigError(f"--out {path}: not an azr gen rollouts file (schema {record.get('schema')!r})")
        for key in ("model", "sampling"):
            if record.get(key) != settings[key]:
                raise ConfigError(
                    f"--resume: {path} was written with other {key} settings ({record.get(key)!r}, now "
                    f"{settings[key]!r}); use another --out file"
                )
    if any(needs_redo(r) for r in records):
        prune_jsonl(path, lambda r: not needs_redo(r))
    return {(str(r.get("task_id")), int(r.get("sample", -1))) for r in records if not needs_redo(r)}


def summary(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Episodes, pass rate, tool calls by tool and status, and finish reasons over `records`."""
    records = list(records)
    graded = [r for r in records if (r.get("grade") or {}).get("status") not in (None, "error", "not_graded")]
    passed = sum(bool(r["grade"].get("passed")) for r in graded)
    calls: Counter[str] = Counter()
    for record in records:
        for event in record.get("tool_events") or []:
            calls[f"{event.get('name')}/{event.get('status')}"] += 1
    return {
        "episodes": len(records),
        "graded": len(graded),
        "passed": passed,
        "pass_rate": round(passed / len(graded), 4) if graded else 0.0,
        "turns": round(sum(int((r.get("usage") or {}).get("turns") or 0) for r in records) / len(records), 3)
        if records
        else 0.0,
        "tool_calls": dict(sorted(calls.items())),
        "finish_reasons": dict(sorted(Counter(str(r.get("finish_reason")) for r in records).items())),
    }


def load_rollouts(path: str | Path, which: str = "passed", env: str = "single") -> list[dict[str, Any]]:
    """Episodes for SFT: `messages` and `tools` of each record (`which`: 'passed' keeps those whose answer passed
    its tests; an episode the policy failed is never kept). `env` is the recipe's `rollouts.env`: an environment
    whose episodes train from their token ids (feedback) wants episodes of its own and keeps their `prompt_ids` and
    `turns` too. Errors name the file and line."""
    from azr.config import environment_named

    kind = environment_named(env)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"sft.rollouts: {path}: file not found")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record = _record(line, path, number, kind)
            if not record or record.get("finish_reason") == "error":
                continue
            if which == "passed" and not (record.get("grade") or {}).get("passed"):
                continue
            row = {"messages": record["messages"], "tools": record.get("tools") or []}
            if kind.token_episodes:
                row |= {"prompt_ids": record["prompt_ids"], "turns": record["turns"], "line": f"{path}:{number}"}
            rows.append(row)
    if not rows:
        raise DataError(f"sft.rollouts: {path}: no episodes to train on (sft.rollouts_filter={which})")
    return rows


def _record(line: str, path: Path, number: int, kind: EnvironmentKind) -> dict[str, Any]:
    try:
        record = load_json(line)
    except ValueError as exc:
        if not line.endswith("\n"):
            return {}  # a torn last line (the writer was killed): not an episode
        raise DataError(f"{path}:{number}: not valid JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise DataError(f"{path}:{number}: not an azr gen rollout (expected schema {SCHEMA!r})")
    if kind.token_episodes and not kind.is_named(record.get("env")):
        raise DataError(
            f"{path}:{number}: not a {kind.name} episode (env {record.get('env', 'tools')!r}); with rollouts.env "
            f"{kind.name!r} sft.rollouts trains `azr gen` episodes of the same recipe"
        )
    messages = record.get("messages")
    if not isinstance(messages, list):
        raise DataError(f"{path}:{number}: 'messages' must be a list of messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
            raise DataError(f"{path}:{number}: messages[{i}]: expected a message with a role")
    if record.get("finish_reason") == "error":
        return record  # the policy failed it: never trained, whatever it holds
    if not any(m.get("role") == "assistant" for m in messages):
        raise DataError(f"{path}:{number}: 'messages' must be a list with at least one assistant message")
    if kind.token_episodes:
        _check_turns(record, f"{path}:{number}")
    return record


def _check_turns(record: dict[str, Any], where: str) -> None:
    """A feedback episode's `prompt_ids` and `turns` agree with its messages: one policy turn per assistant message,
    token ids all present (a local model's) or none (an endpoint's), each a non-negative integer."""
    prompt, turns = record.get("prompt_ids"), record.get("turns")
    if not isinstance(prompt, list) or not _ids(prompt):
        raise DataError(f"{where}: 'prompt_ids' must be a list of token ids")
    if not isinstance(turns, list) or not turns:
        raise DataError(f"{where}: 'turns' must be a non-empty list of turns")
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("kind") not in KINDS:
            raise DataError(f"{where}: turns[{k}]: expected a turn with kind 'policy' or 'env'")
        ids = turn.get("ids")
        if not isinstance(ids, list) or not _ids(ids):
            raise DataError(f"{where}: turns[{k}].ids: expected a list of token ids")
        if turn["kind"] == "policy" and not isinstance(turn.get("text"), str):
            raise DataError(f"{where}: turns[{k}].text: expected the policy's text")
        if bool(prompt) and not ids and (turn["kind"] == "policy" or turn.get("shown")):
            raise DataError(f"{where}: turns[{k}].ids: empty, but the episode has prompt ids (a turn without its ids)")
        if not prompt and ids:
            raise DataError(f"{where}: turns[{k}].ids: token ids, but 'prompt_ids' is empty")
    if turns[0]["kind"] != "policy":
        raise DataError(f"{where}: turns[0]: an episode starts with the policy's turn")
    assistants = sum(m.get("role") == "assistant" for m in record["messages"])
    policy = sum(t["kind"] == "policy" for t in turns)
    if policy != assistants:
        raise DataError(f"{where}: 'turns' has {policy} policy turns but 'messages' {assistants} assistant messages")


def _ids(values: list[Any]) -> bool:
    return all(type(v) is int and v >= 0 for v in values)
