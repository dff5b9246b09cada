"""The self-play round of each training batch, through the trainer's hooks: the opponent gets the batch's tasks
before the policy generates (`start`), its verdicts become the `opponent_passed` column (`finish`), and the scored
batch is counted and its failed problems go to the teacher (`observe`). Owns this wiring, the run's self-play files
and the `selfplay/*`, `teacher/*` metrics; knows nothing of TRL, completions or rewards (docs/self-play.md).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from azr.config import AzrConfig
from azr.inputs import load_json
from azr.logs import atomic_write_json
from azr.remote import ChatClient
from azr.rewards import CodeGrader
from azr.selfplay.opponent import OpponentHandle, SelfPlayManager, opponent_column
from azr.selfplay.replay import FrontierReplay, HintSource
from azr.selfplay.scoreboard import FRONTIER_OUTCOMES, Scoreboard, ScoredRows
from azr.selfplay.teacher import TeacherAssistant

log = logging.getLogger(__name__)
STATE_FILE = "selfplay_state.json"  # beside each checkpoint's trainer_state.json
_USAGE = ("requests", "failures", "retries", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd")


class Arena:
    """One run's opponent, scoreboard, teacher and replay sources. `rows` are the training dataset's rows (replay
    draws from them); `checkpoint`, the checkpoint folder a resumed run continues from, restores what `save` wrote
    there."""

    def __init__(
        self,
        cfg: AzrConfig,
        grader: CodeGrader,
        rows: list[dict[str, Any]],
        *,
        opponent: ChatClient | None = None,
        teacher: ChatClient | None = None,
        checkpoint: str | None = None,
    ):
        self.out = Path(cfg.output_dir)
        self.every, self.max_wait_s = cfg.self_play.scoreboard_every, cfg.self_play.max_wait_s
        self.board = Scoreboard()
        self.manager = SelfPlayManager(cfg, grader, opponent, log_path=self.out / "selfplay.jsonl")
        self.teacher = None
        if cfg.teacher_assist.enabled:
            self.teacher = TeacherAssistant(cfg, grader, teacher, log_path=self.out / "teacher.jsonl")
            self.teacher_wait_s = cfg.teacher.timeout_s
        self.hints = HintSource(self.teacher.queue.take, cfg.teacher_assist.hint_share) if self.teacher else None
        self.replay = None
        if cfg.curriculum.replay:
            self.replay = FrontierReplay(
                {str(r["task_id"]): r for r in rows}, self._unsolved, cfg.curriculum.replay_rate
            )
        self._handle: OpponentHandle | None = None
        self.wait_s = 0.0  # time `finish` waited for the opponent: what its calls did not overlap
        if checkpoint is not None:
            self._resume(Path(checkpoint))

    @property
    def sources(self) -> list[Any]:
        """Hinted retries, then frontier replay: sources of whole prompt groups for the group sampler, in priority
        order."""
        return [s for s in (self.hints, self.replay) if s is not None]

    def _unsolved(self) -> list[str]:
        return self.board.frontier.task_ids(unsolved_only=True)  # read at each call: a resume replaces the board

    def start(self, rows: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
        """Send the batch's tasks to the opponent; returns at once, the requests run while the policy generates."""
        self._handle = self.manager.submit(rows, step)
        return rows

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Wait for the opponent and set `opponent_passed` on every row (None: unavailable, or a hinted retry)."""
        started = time.monotonic()
        results = self.manager.collect(self._handle, self.max_wait_s) if self._handle is not None else {}
        self.wait_s += time.monotonic() - started
        self._handle = None
        for row, passed in zip(rows, opponent_column(rows, results), strict=True):
            row["opponent_passed"] = passed

    def observe(self, batch: ScoredRows) -> None:
        """Trainer observer of each `ScoredBatch`: count it, hand failed problems to the teacher, write every N."""
        results = self.board(batch)
        if self.teacher is not None:
            self.teacher.submit([r for r in results if r.outcome in FRONTIER_OUTCOMES], batch.step)
        if batch.step % self.every == 0:
            self.write()

    def metrics(self) -> dict[str, float]:
        """Cumulative usage and outcomes for the trainer's logs; numbers only (no value is left out as None)."""
        usage = self.manager.client.usage.snapshot()
        out: dict[str, Any] = {f"selfplay/{k}": usage[k] for k in (*_USAGE, "max_in_flight")}
        out |= {f"selfplay/{k}": v for k, v in self.manager.totals.items() if k != "batches"}
        out["selfplay/wait_s"] = round(self.wait_s, 3)
        out["selfplay/win_rate"] = self.board.win_rate()["rate"]
        out["selfplay/frontier_tasks"] = len(self.board.frontier)
        out["selfplay/hinted_groups"] = self.hints.given if self.hints else 0
        out["selfplay/replayed_groups"] = self.replay.given if self.replay else 0
        if self.teacher is not None:
            usage = self.teacher.client.usage.snapshot()
            out |= {f"teacher/{k}": usage[k] for k in _USAGE}
            out |= {f"teacher/{k}": self.teacher.stats[k] for k in ("hints_queued", "empty_hints", "errors")}
        return {k: v for k, v in out.items() if isinstance(v, (int, float))}

    def write(self) -> None:
        """scoreboard.json and frontier.json, each atomically."""
        self.board.write(self.out / "scoreboard.json")
        self.board.frontier.write(self.out / "frontier.json")

    def save(self, folder: Path) -> Path:
        """Everything a resume from this checkpoint needs to continue exactly: scoreboard, frontier, waiting hints,
        replay counts, totals, usage and the teacher's random state (`selfplay_state.json`, written atomically).
        The hints asked for on this step's failures are waited for first (up to the teacher's timeout_s), so that
        they are saved too."""
        if self.teacher is not None and not self.teacher.wait(self.teacher_wait_s):
            log.warning("self-play: teacher requests still running at the step %d checkpoint", self.board.last_step)
        state: dict[str, Any] = {
            "board": self.board.to_json(),
            "frontier": self.board.frontier.to_json(),
            "sources": self._sources_state(),
            "opponent": {"totals": self.manager.totals, "usage": self.manager.client.usage.snapshot()},
            "wait_s": self.wait_s,
        }
        if self.teacher is not None:
            state["teacher"] = self.teacher.state()
        return atomic_write_json(folder / STATE_FILE, state)

    def _resume(self, checkpoint: Path) -> None:
        path = checkpoint / STATE_FILE
        try:
            state = load_json(path.read_text())
        except (OSError, ValueError) as exc:
            # Killed between the trainer's save and this file: the newest scoreboard written, batches scored after
            # the checkpoint are then counted again when they are re-run.
            log.warning("self-play: no readable %s (%s); continuing scoreboard.json as written", path, exc)
            self.board = _load_board(self.out)
            return
        self.board = Scoreboard.from_json(state["board"], state["frontier"])
        sources = state.get("sources") or {}
        if self.hints is not None:
            self.hints.given = int(sources.get("hinted_groups", 0))
        if self.replay is not None:
            self.replay.given = int(sources.get("replayed_groups", 0))
            self.replay.replayed.update(sources.get("replayed") or {})
        self.manager.totals.update(state["opponent"]["totals"])
        self.manager.client.usage.carry(state["opponent"]["usage"])
        self.wait_s = float(state.get("wait_s", 0.0))
        if self.teacher is not None and "teacher" in state:
            self.teacher.restore(state["teacher"])
        log.info("self-play: resumed from %s (scoreboard at step %d)", path, self.board.last_step)

    def _sources_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self.hints is not None:
            state["hinted_groups"] = self.hints.given
        if self.replay is not None:
            state |= {"replayed_groups": self.replay.given, "replayed": dict(self.replay.replayed)}
        return state

    def close(self) -> None:
        """Stop the background work and write the files one last time; call in a `finally`."""
        try:
            if self.teacher is not None:
                self.teacher.close()
            self.manager.close()
        finally:
            self.write()


def _load_board(out: Path) -> Scoreboard:
    """The newest scoreboard written, for a resume whose checkpoint has no self-play state: every batch scored so far,
    kept (a batch re-scored after the checkpoint is a new match)."""
    board, frontier = out / "scoreboard.json", out / "frontier.json"
    if not board.exists():
        return Scoreboard()
    try:
        front = load_json(frontier.read_text()) if frontier.exists() else None
        return Scoreboard.from_json(load_json(board.read_text()), front)
    except (OSError, ValueError) as exc:
        log.warning("self-play: cannot read %s (%s); starting a new scoreboard", board, exc)
        return Scoreboard()
