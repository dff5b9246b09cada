"""The `Rubric`: checked when built, the self-play blend, the weighted total, scoring completions on the real sandbox
(each program run once for every reward), the recipe's rubric built without a sandbox (names and params checked, no
grader), and the one place a run's rubric is built."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import azr
from azr.config import RewardSpec, load_config
from azr.data.tasks import load_tasks
from azr.errors import ConfigError
from azr.prompts import reference_answer
from azr.rewards import Rubric, SelfPlayReward, build_rubric, functions, recipe_rubric, trained_rubric


def code_reward(completions, **_):
    return [1.0 for _ in completions]


def format_reward(completions, **_):
    return [0.5 for _ in completions]


def test_a_rubric_is_checked_when_built():
    with pytest.raises(ValueError, match="2 reward functions but 1 weights"):
        Rubric((code_reward, format_reward), (1.0,))
    with pytest.raises(ValueError, match="weight of format_reward is nan"):
        Rubric((code_reward, format_reward), (1.0, math.nan))
    with pytest.raises(ValueError, match="weight of code_reward is 'high'"):
        Rubric((code_reward,), ("high",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"named twice: \['code_reward'\]"):
        Rubric((code_reward, code_reward), (1.0, 1.0))


def test_the_total_is_weighted_and_none_when_a_reward_is_not_graded():
    rubric = Rubric((code_reward, format_reward), (1.0, 0.2))
    assert rubric.names == ["code_reward", "format_reward"]
    assert rubric.total([1.0, 0.5]) == pytest.approx(1.1)
    assert rubric.total([None, 0.5]) is None  # a custom reward's None: an infrastructure failure, never a 0
    assert rubric.total([1.0, None]) is None and rubric.total([None, None]) is None


def test_an_optional_rewards_none_adds_nothing_and_any_other_none_leaves_the_row_ungraded():
    rubric = Rubric((code_reward, format_reward, SelfPlayReward(None)), (1.0, 0.2, 0.5))  # type: ignore[arg-type]
    assert rubric.required == [True, True, False]
    assert rubric.total([1.0, 0.5, None]) == pytest.approx(1.1)  # no opponent's verdict: the rest still counts
    assert rubric.total([1.0, 0.5, 1.0]) == pytest.approx(1.6)
    assert rubric.total([None, 0.5, 1.0]) is None
    assert rubric.total([None, None, None]) is None


def test_the_self_play_blend_scales_the_rest_and_adds_its_reward_once():
    rubric = Rubric((code_reward, format_reward), (1.0, 0.1)).blended(0.3)
    assert isinstance(rubric.funcs[2], SelfPlayReward) and rubric.weights == pytest.approx((0.7, 0.07, 0.3))
    again = rubric.blended(0.5)  # the self-play reward already there keeps its place
    assert len(again.funcs) == 3 and again.weights[2] == 0.5


def test_the_recipes_rubric_is_checked_without_a_sandbox():
    rubric = build_rubric([RewardSpec("tests", 1.0), RewardSpec("format", 0.1)], answer_format="relaxed")
    assert rubric.grader is None and rubric.weights == (1.0, 0.1) and rubric.answer_format == "relaxed"
    assert rubric.parse("```python\nx = 1\n```").code.strip() == "x = 1"
    with pytest.raises(ConfigError, match=r"rewards\[0\]\.name: unknown reward 'nope'"):
        build_rubric([RewardSpec("nope", 1.0)])


def test_a_rubric_is_graded_when_a_reward_runs_the_answers_programs():
    # what decides whether asynchronous GRPO grades ahead
    assert build_rubric([RewardSpec("format", 1.0), RewardSpec("tests", 1.0)]).graded
    assert not build_rubric([RewardSpec("format", 1.0)]).graded
    assert not Rubric((code_reward,), (1.0,)).graded


def test_grpo_trains_with_the_blended_rubric_when_self_play_is_on():
    cfg = load_config(
        None,
        [
            "model.name_or_path=tiny",
            "self_play.enabled=true",
            "self_play.weight=0.25",
            "self_play.base_url=http://127.0.0.1:9",
            "self_play.model=m",
        ],
    )
    rubric = build_rubric(cfg.rewards, answer_format=cfg.answer_format)
    assert trained_rubric(cfg, rubric).weights == pytest.approx((*(0.75 * w for w in rubric.weights), 0.25))
    off = load_config(None, ["model.name_or_path=tiny"])
    assert trained_rubric(off, rubric) is rubric


def test_feedback_shaping_adds_the_episode_reward_once_at_weight_one():
    base = ["model.name_or_path=tiny", "rollouts.env=feedback"]
    plain = load_config(None, base)
    assert trained_rubric(plain, build_rubric(plain.rewards)).names == ["tests_reward", "format_reward"]
    cfg = load_config(None, [*base, "feedback.turn_penalty=0.1", "feedback.improvement_bonus=0.5"])
    trained = trained_rubric(cfg, build_rubric(cfg.rewards))
    assert trained.names[-1] == "episode_reward" and trained.weights[-1] == 1.0
    episode = trained.funcs[-1]
    columns = {
        "feedback_turns": [1, 2, 3],
        "feedback_public_first": [0.0, 0.5, 1.0],
        "feedback_public_last": [0.0, 1.0, 0.5],
    }
    # one answer: nothing; a repair: -0.1 for the second answer, +0.5 x 0.5 for the rise; a fall earns no bonus
    assert episode(completions=[None] * 3, **columns) == pytest.approx([0.0, -0.1 + 0.25, -0.2])
    assert episode(completions=[None]) == [0.0]  # not a feedback row


def test_a_rubric_scores_each_completion_with_every_reward_its_total_and_the_graders_outcome(grader):
    task = load_tasks("held-out")[0]
    right = reference_answer(task.solution, task.entry_point)
    wrong = "```python\ndef pad_center(s, width, fill=' '):\n    return s\n```\nFinal answer: pad_center"
    completions = [right, wrong, "no code at all"]
    columns = {k: [v] * 3 for k, v in (task.grading_columns() | {"task_id": task.id}).items()}
    rubric = Rubric((functions.TestsReward(grader), functions.FormatReward(), code_reward), (1.0, 0.1, 2.0), grader)
    scored = rubric.score(completions, columns)
    assert [s.status for s in scored] == ["passed", "failed", "no_code"]
    assert scored[0].values == {"tests_reward": 1.0, "format_reward": 1.0, "code_reward": 1.0}
    assert scored[0].total == pytest.approx(3.1)
    assert 0.0 <= scored[1].values["tests_reward"] < 1.0 and scored[1].values["format_reward"] == 1.0
    assert scored[2].values == {"tests_reward": 0.0, "format_reward": 0.0, "code_reward": 1.0}
    assert scored[2].total == pytest.approx(2.0)
    with pytest.raises(ValueError, match="only checked"):
        Rubric((code_reward,), (1.0,)).score(completions, columns)


def test_a_runs_rubric_is_built_in_one_place():
    """Issue 39: GRPO, the evaluation and `azr gen` share one rubric. Reward functions and weights are put together
    only in azr/rewards/rubric.py (`recipe_rubric` over `build_rubric`) and Absolute Zero's own role rubric; no other
    module builds one, and the recipe's rubric is `build_rubric` of its rewards read with its answer format."""
    root = Path(azr.__file__).parent
    builders = {"build_rubric", "Rubric", "instantiate"}
    allowed = {"rewards/rubric.py": builders, "absolute_zero/rewards.py": {"Rubric"}}
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in builders and name not in allowed.get(rel, set()):
                    found.append(f"{rel}:{node.lineno} {name}")
    assert found == []
    cfg = load_config(None, ["model.name_or_path=tiny", "answer_format=relaxed", "rewards=[{name: tests}]"])
    rubric = recipe_rubric(cfg)
    assert rubric.names == ["tests_reward"] and rubric.answer_format == "relaxed" and rubric.grader is None
