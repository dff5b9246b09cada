"""Near misses for the SFT warm start: single-edit variants of a reference solution, kept only when they fail."""

from __future__ import annotations

import difflib
import random

import pytest

from azr.audit import candidates, sample_candidates
from azr.data import Task, load_tasks
from azr.training.sft import find_near_misses, sft_dataset

SOLUTION = """def clamp_sum(xs, limit):
    total = 0
    for x in xs:
        if x > 0 and total + x <= limit:
            total += x
    return min(total, limit)
"""


def _changed_lines(a: str, b: str) -> list[str]:
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")]


def test_every_candidate_compiles_and_differs_from_the_source_on_one_line():
    found = candidates(SOLUTION)
    assert len(found) == len(set(found)) and SOLUTION not in found
    for variant in found:
        compile(variant, "<variant>", "exec")
        assert len(_changed_lines(SOLUTION, variant)) == 2  # one line out, one line in
    variants = set(found)
    for edit in [
        ("x > 0", "x >= 0"),
        ("total + x <= limit", "total + x < limit"),
        ("total + x", "total - x"),
        ("and", "or"),
        ("total += x", "total -= x"),
        ("min(", "max("),
        ("total = 0", "total = 1"),
    ]:
        assert SOLUTION.replace(*edit, 1) in variants, edit


def test_method_names_are_swapped_only_after_a_dot():
    source = "def f(s):\n    upper = s.upper()\n    return upper\n"
    found = candidates(source)
    assert found == ["def f(s):\n    upper = s.lower()\n    return upper\n"]


@pytest.mark.parametrize("odd", ["\f", "\u2028", "\x1c", "\x85"])
def test_edits_land_on_their_token_whatever_breaks_the_lines(odd):
    # Characters that str.splitlines treats as line breaks but Python's tokenizer does not, inside a string.
    source = f'def f(a, b):\n    s = "x{odd}y"\n    if a < b:\n        return a + 1\n    return b\n'
    found = candidates(source)
    assert source.replace("a < b", "a <= b") in found and source.replace("a + 1", "a - 1") in found
    for variant in found:
        assert len(_changed_lines(source, variant)) <= 4 and variant.count(odd) == source.count(odd)


def test_variants_that_only_warn_at_compile_time_raise_no_warning(recwarn):
    candidates("def f():\n    return (1, 2)(0) if True else 0\n")
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


def test_code_that_does_not_tokenize_has_no_candidates():
    assert candidates('def f(:\n    return "') == []


def test_sampling_is_fixed_by_the_seed():
    a = sample_candidates(SOLUTION, random.Random(3), 4)
    assert a == sample_candidates(SOLUTION, random.Random(3), 4)
    assert len(a) == 4 and set(a) <= set(candidates(SOLUTION))


def test_near_misses_fail_their_tests_in_the_sandbox_and_the_seed_fixes_them(grader):
    from azr.rewards.grading import grade_many

    tasks = [t for t in load_tasks("train") if t.solution][:4]
    found = find_near_misses(tasks, grader, per_task=2, seed=0)
    assert found == find_near_misses(tasks, grader, per_task=2, seed=0)
    assert set(found) <= {t.id for t in tasks} and all(1 <= len(v) <= 2 for v in found.values())
    pairs = [(t, code) for t in tasks for code in found.get(t.id, [])]
    assert len(pairs) >= 6
    assert all(g.status == "failed" for g in grade_many(pairs, grader.pool, grader.limits))


def test_a_variant_that_still_passes_is_not_a_near_miss(grader):
    # `x >= 0` and `x > 0` agree on every test below, and so do `<=`/`<` for the limit: such variants are dropped.
    task = Task("t", "", ["assert clamp_sum([1, 2, 3], 10) == 6", "assert clamp_sum([2, 2], 3) == 2"], SOLUTION)
    found = find_near_misses([task], grader, per_task=50, seed=0)["t"]
    assert found and SOLUTION.replace("x > 0", "x >= 0") not in found
    assert SOLUTION.replace("total + x <= limit", "total + x < limit") not in found


def test_sft_rows_hold_the_reference_answer_then_its_near_misses(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    task = Task("t", "Sum the positives.", ["assert clamp_sum([1], 1) == 1"], SOLUTION, entry_point="clamp_sum")
    wrong = SOLUTION.replace("min(", "max(")
    rows = sft_dataset([task], tokenizer, {}, {"t": [wrong]}).to_list()
    assert [r["prompt"] for r in rows] == [rows[0]["prompt"]] * 2
    assert SOLUTION.strip() in rows[0]["completion"] and wrong.strip() in rows[1]["completion"]
    assert all(r["completion"].endswith("Final answer: clamp_sum" + tokenizer.eos_token) for r in rows)
    assert len(sft_dataset([task], tokenizer, {}).to_list()) == 1


def test_near_misses_are_found_once_and_read_back_on_resume(tmp_path):
    from azr.training.sft import near_misses_once

    path = tmp_path / "sft" / "near_misses.json"
    found = {"t": [SOLUTION.replace("min(", "max(")]}
    assert near_misses_once(path, lambda: found) == found

    def must_not_run():
        raise AssertionError("the saved near misses must be reused")

    assert near_misses_once(path, must_not_run) == found
