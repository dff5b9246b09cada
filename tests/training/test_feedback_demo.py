"""The feedback demo learns to use the feedback: `examples/tiny-feedback.yaml` as shipped, on the tiny model, CPU
only, through `azr train`. GRPO on feedback episodes raises the pass rate after the second turn (the program standing
after the feedback, on the hidden tests) well over the model before GRPO, on 512 episodes each, and the share of
turn-1 failures that turn 2 repairs rises too. A module of its own: a test worker runs it beside the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_files import read_generations, read_phases, train_demo

from azr.config import load_config

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "tiny-feedback.yaml"


@pytest.mark.slow(minutes=10.2)  # the whole demo on 2 cores: 10m08s nearly idle, 38 min under a load near 8
@pytest.mark.timeout(4800)  # over 2x the loaded time
def test_grpo_with_feedback_raises_the_pass_rate_after_the_feedback(cli, tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    summary = train_demo(cli, out, [f"model.name_or_path={tiny_model_dir}", "logging.console=plain"], RECIPE)
    cfg = load_config(out / "config.yaml")
    assert cfg.rollouts.env == "feedback" and cfg.feedback.max_turns == 2 and cfg.sft.near_misses
    before, after = summary["eval_before"], summary["eval_after"]
    assert before["completions"] == after["completions"] == 512
    print(
        f"turn 1: {before['pass_rate_turn1']:.3f} -> {after['pass_rate_turn1']:.3f}; "
        f"turn 2: {before['pass_rate_turn2']:.3f} -> {after['pass_rate_turn2']:.3f}; "
        f"repaired: {before['repaired_turn2']:.3f} -> {after['repaired_turn2']:.3f}"
    )
    assert after["pass_rate_turn2"] - before["pass_rate_turn2"] >= 0.10
    assert after["repaired_turn2"] > before["repaired_turn2"]  # the policy uses the feedback, not only turn 1
    # Every trained episode is the policy's own, and the generation log shows its turns and the feedback.
    generations = read_generations(out)
    assert {(g["source"], g["hinted"]) for g in generations} == {("data", False)}
    assert any(len(g["turns"]) == 2 and g["turns"][0]["feedback"] for g in generations)
    assert read_phases(out) == ["sft", "eval_before", "grpo", "eval_after"]
