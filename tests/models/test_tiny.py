"""The tiny model's chat template and response template: tool use added without changing what the CPU demo sees."""

from __future__ import annotations

import random

import pytest

from azr.data import load_tasks
from azr.prompts import chat_messages, completion_text, parse_answer, reference_answer

# The plain ChatML template the tiny model had before tools (what the demo's numbers were measured with).
PLAIN_CHATML = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}"
)


@pytest.mark.parametrize("switch", [{}, {"enable_thinking": False}, {"enable_thinking": True}])
def test_conversations_without_tools_render_byte_for_byte_as_plain_chatml(tokenizer, switch):
    for task in load_tasks("train")[:40]:
        messages = [*chat_messages(task.prompt), {"role": "assistant", "content": task.solution}]
        for prompt in (True, False):
            kwargs = {"tokenize": False, "add_generation_prompt": prompt, **switch}
            new = tokenizer.apply_chat_template(messages, **kwargs)
            assert new == tokenizer.apply_chat_template(messages, chat_template=PLAIN_CHATML, **kwargs)


def test_trl_parsing_reads_plain_answers_as_plain_decoding_did(tokenizer):
    """With a response template, TRL decodes completions with `parse_response` instead of a plain decode; for answers
    whose only special token is the final end of turn, the graded text is the same (the demo's GRPO path)."""
    from trl.chat_template_utils import parse_response

    rng, special = random.Random(0), set(tokenizer.all_special_ids)
    ordinary = [i for i in range(len(tokenizer)) if i not in special]
    for task in load_tasks("train")[:40]:
        prompt = tokenizer.apply_chat_template(
            chat_messages(task.prompt),
            add_generation_prompt=True,
            enable_thinking=False,
            tokenize=True,
            return_dict=False,
        )
        answer = tokenizer(reference_answer(task.solution, task.entry_point), add_special_tokens=False)["input_ids"]
        for _ in range(4):  # near misses: a few tokens replaced, as a sampled answer goes wrong
            ids = list(answer)
            for _ in range(rng.randint(0, 5)):
                ids[rng.randrange(len(ids))] = rng.choice(ordinary)
            ids.append(tokenizer.eos_token_id)
            parsed = completion_text([parse_response(tokenizer, ids, prefix=prompt, tools=[])])
            plain = tokenizer.decode(ids, skip_special_tokens=True)
            a, b = parse_answer(parsed), parse_answer(plain)
            assert (a.code, a.format_ok) == (b.code, b.format_ok), (plain, parsed)


def test_the_tokenizer_learns_what_the_policy_reads_and_writes_not_the_tests(monkeypatch):
    """Strengthening a training task's tests must not re-seed the tiny model: its tokenizer is trained on the prompts
    and reference solutions only, so other tests leave the vocabulary as it was."""
    import dataclasses

    import azr.models.tiny as tiny

    shipped = tiny._train_tokenizer(2048).get_vocab()
    tasks = [
        dataclasses.replace(t, tests=[*t.tests, f"assert {t.entry_point}_strengthened() == 'qzx'"])
        for t in load_tasks("train")
    ]
    monkeypatch.setattr(tiny, "load_tasks", lambda split: tasks)
    assert tiny._train_tokenizer(2048).get_vocab() == shipped


def test_the_response_template_is_trls_reading_of_qwen_chatml(tokenizer):
    """The tiny model's response template is azr's own (models/ imports no trl), and it is the one TRL's tool loop
    expects of Qwen's ChatML with Hermes calls: the saved tokenizer carries it, entry for entry."""
    from trl.chat_template_utils import qwen3_template

    from azr.models.tiny import RESPONSE_TEMPLATE

    assert qwen3_template == RESPONSE_TEMPLATE
    assert tokenizer.response_template == qwen3_template
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    turn = f"<think>\nplan\n</think>\n\nLet me run it.\n{call}<|im_end|>"
    assert tokenizer.parse_response(turn, prefix="<|im_start|>assistant\n") == {
        "role": "assistant",
        "reasoning_content": "plan",
        "content": "Let me run it.",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
    }
