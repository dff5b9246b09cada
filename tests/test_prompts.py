"""The answer format: strict (one python block, then a `Final answer:` line) and relaxed (the last fenced block that
defines a function or class, else the last), the reasoning in <think>…</think> set aside, and the completion shapes
TRL passes."""

from __future__ import annotations

import pytest

from azr.prompts import ANSWER_PREFIX, SYSTEM_PROMPT, completion_text, parse_answer, strip_thinking

CODE = "def add(a, b):\n    return a + b\n"
BLOCK = f"```python\n{CODE}```"
THINK = "<think>\nI could write ```python\nprint('draft')\n``` but no.\n</think>\n"
GOOD = f"Here is my solution.\n{BLOCK}\nFinal answer: add\n"


def test_the_system_prompt_asks_for_the_format_it_parses():
    assert "```python" in SYSTEM_PROMPT and ANSWER_PREFIX in SYSTEM_PROMPT


@pytest.mark.parametrize(
    "text",
    [
        GOOD,
        BLOCK + "\nFinal answer: add",
        THINK + GOOD,
        "<think>short</think>" + GOOD,
        f"```python\n{CODE}```\nsome words\n  Final answer: add(a, b)\n",
        f"```py\n{CODE}```\nFinal answer: add\n",
        f"```Python3\n{CODE}```\nFinal answer: add\n",
    ],
    ids=["plain", "no trailing newline", "after thinking", "after short thinking", "later line", "py", "Python3"],
)
def test_strict_accepts_one_python_block_then_the_answer_line(text):
    answer = parse_answer(text)
    assert (answer.code, answer.format_ok, answer.problem) == (CODE, True, "")
    assert parse_answer(text, "relaxed") == answer


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"{BLOCK}\n", "no 'Final answer:' line"),
        (f"{BLOCK}\nThe final answer is add\n", "no 'Final answer:' line"),
        (f"Final answer: add\n{BLOCK}\n", "no 'Final answer:' line"),
        (f"{BLOCK}\n{BLOCK}\nFinal answer: add\n", "found 2"),
        (f"{BLOCK}\nFinal answer: add\n```python\nx = 1\n```\n", "found 2"),
        (f"```javascript\n{CODE}```\nFinal answer: add\n", "tagged 'javascript'"),
        (f"```\n{CODE}```\nFinal answer: add\n", "tagged ''"),
        (f"<think>\nlet me think {BLOCK}\nFinal answer: add\n", "unterminated <think>"),
        (f"<think>\n{BLOCK}\n</think>\nFinal answer: add\n", "found 0"),
        ("Final answer: add\n", "found 0"),
        ("", "found 0"),
        (f"```python\n{CODE}\nFinal answer: add\n", "found 0"),
    ],
    ids=[
        "no answer line",
        "answer without prefix",
        "answer line only before the block",
        "two blocks",
        "a block after the answer",
        "javascript tag",
        "no tag",
        "unterminated think",
        "code only inside think",
        "no code",
        "empty",
        "unterminated block",
    ],
)
def test_strict_rejects(text, problem):
    answer = parse_answer(text, "strict")
    assert answer.code is None and not answer.format_ok
    assert problem in answer.problem


@pytest.mark.parametrize(
    "text",
    [
        f"{BLOCK}\n",
        f"```\n{CODE}```",
        f"```js\n{CODE}```\n",
        f"```python\nfirst = 1\n```\nthen\n```\n{CODE}```\nno answer line",
        f"{THINK}```text\n{CODE}```",
        f"Final answer: add\n{BLOCK}",
    ],
    ids=["python block", "untagged", "other tag", "last of two", "after thinking", "answer line before"],
)
def test_relaxed_takes_the_last_fenced_block_without_an_answer_line(text):
    answer = parse_answer(text, "relaxed")
    assert answer.code == CODE
    assert not answer.format_ok and answer.problem  # the strict format did not hold, and it says why


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (f"{BLOCK}\nUse it like this:\n```python\nprint(add(1, 2))  # 3\n```\n", CODE),
        (f"{BLOCK}\nTests:\n```python\nassert add(1, 2) == 3\n```", CODE),
        ("```python\ndef add(a, b):\n    return a - b\n```\nFixed:\n" + BLOCK, CODE),
        ("```python\ndef add(a, b) return\n```\n```python\nprint(1)\n```", "print(1)\n"),
        ("```python\nn = int(input())\n```\nor\n```python\nprint(int(input()) * 2)\n```", "print(int(input()) * 2)\n"),
    ],
    ids=["then example calls", "then asserts", "a later fix", "no block defines (one does not parse)", "scripts"],
)
def test_relaxed_takes_the_last_block_that_defines_a_function_or_class(text, code):
    assert parse_answer(text, "relaxed").code == code


@pytest.mark.parametrize("text", [f"<think>{BLOCK}\n</think>\nFinal answer: add", f"<think>\n{BLOCK}", "no code"])
def test_relaxed_still_needs_a_block_outside_the_reasoning(text):
    assert parse_answer(text, "relaxed").code is None


def test_strip_thinking():
    assert strip_thinking("a<think>x</think>b<think>\ny\n</think>c") == "abc"
    assert strip_thinking("no reasoning") == "no reasoning"
    assert strip_thinking("stray </think> close") == "stray  close"
    assert strip_thinking("done <think> and never closed") is None
    assert strip_thinking("<think>a</think> then <think> open") is None


@pytest.mark.parametrize(
    ("completion", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ([{"role": "assistant", "content": "hello"}], "hello"),
        ([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}], "a\nb"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "ans"}], "ans"),
        ([{"role": "assistant", "content": None}], ""),
        ([{"role": "assistant"}], ""),
        (["not a message", 3, None, {"role": "assistant", "content": "ok"}], "ok"),
        (
            [
                {"role": "assistant", "content": "```python\nprobe()\n```", "tool_calls": [{"type": "function"}]},
                {"role": "tool", "name": "python_run", "content": "```python\nforged()\n```"},
                {"role": "assistant", "content": "final"},
            ],
            "final",
        ),
        ([], ""),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
                }
            ],
            "ab",
        ),
        ({"role": "assistant", "content": "one message"}, "one message"),
        ({"content": None}, ""),
        (None, ""),
        (42, ""),
    ],
    ids=repr,
)
def test_completion_text(completion, text):
    assert completion_text(completion) == text


def test_a_conversational_completion_parses_like_a_string():
    assert parse_answer(completion_text([{"role": "assistant", "content": THINK + GOOD}])).code == CODE
