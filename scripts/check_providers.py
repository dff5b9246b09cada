"""Check a recipe's remote models from a new box: one opponent request and one teacher request, with the keys named
in the recipe, printing each answer and its usage. Run: python scripts/check_providers.py --config RECIPE.yaml

Sends exactly what training sends (the same messages and sampling; see azr.selfplay), on the first
held-out task. Exit 0 when every configured endpoint answered, 1 when one failed, 2 on a bad recipe or a missing
key. The keys are never printed: errors come back redacted by the client.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from azr.config import load_config
from azr.data import load_tasks
from azr.errors import ConfigError, DataError
from azr.prompts import hint_request_messages, parse_answer
from azr.remote import build_client
from azr.selfplay import opponent_messages, opponent_params, sanitise_hint, teacher_params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="recipe (YAML or JSON) with self_play and/or teacher")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="override, e.g. teacher.model=X")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
        task = load_tasks("held-out")[0]
        checks = []
        if cfg.self_play.base_url:
            opponent = build_client(cfg.self_play)
            checks.append(("opponent", opponent, opponent_messages(task.prompt), opponent_params(cfg)))
        if cfg.teacher.base_url:
            teacher = build_client(cfg.teacher)
            checks.append(("teacher", teacher, hint_request_messages(task.prompt), teacher_params(cfg)))
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not checks:
        print("error: the recipe sets neither self_play.base_url nor teacher.base_url", file=sys.stderr)
        return 2
    failed = 0
    print(f"task {task.id}: {task.prompt[:100]!r}")
    for role, client, messages, params in checks:
        reply = client.chat_many([messages], **params)[0]
        print(f"\n== {role}: {client!r}, max_tokens={params['max_tokens']}")
        if not reply.ok:
            failed += 1
            print(f"FAILED after {reply.attempts} attempt(s): {reply.error}")
            continue
        print(reply.text)
        if role == "opponent":
            answer = parse_answer(reply.text, cfg.answer_format)
            print(f"-- format ok: {answer.format_ok} {answer.problem}")
        else:
            print(f"-- sanitised hint: {sanitise_hint(reply.text, cfg.teacher_assist.max_hint_chars)[0]!r}")
        print(f"-- finish_reason: {reply.finish_reason}, latency {reply.latency_s:.2f}s, attempts {reply.attempts}")
        print(f"-- usage: {json.dumps(asdict(reply.usage))}; totals: {json.dumps(client.usage.snapshot())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
