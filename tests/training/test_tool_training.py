"""Training on tool use: SFT on `azr gen` episodes with assistant-only loss (the mask checked token by token), and
GRPO with tools on the tiny model, where TRL runs the policy's calls and the generation log shows call and result."""

from __future__ import annotations

import json
import re

import pytest
from scripted_policy import ReferencePolicy

import azr.envs.gen as gen_module
from azr.config import load_config
from azr.envs import run_gen
from azr.tools import load_rollouts


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    """Scripted episodes (one python_run call on the reference solution, then the answer) through the real loop."""
    folder = tmp_path_factory.mktemp("rollouts")
    recipe = folder / "gen.yaml"
    recipe.write_text(
        "model: {name_or_path: unused}\nsandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain}\n"
        "tools: {names: [python_run]}\ngen: {max_tasks: 3}\n"
    )
    saved = gen_module.build_policy
    gen_module.build_policy = lambda cfg, kind, stack: ReferencePolicy()
    try:
        assert run_gen(load_config(recipe, []), folder / "rollouts.jsonl") == 0
    finally:
        gen_module.build_policy = saved
    return folder / "rollouts.jsonl"


def _expected_mask(tokenizer, text: str) -> list[int]:
    """1 for every token inside an assistant turn (after its header, through its <|im_end|>), 0 elsewhere: found in
    the rendered text itself, independently of the template's generation markers."""
    spans = []
    for header in re.finditer(re.escape("<|im_start|>assistant\n"), text):
        end = text.index("<|im_end|>", header.end()) + len("<|im_end|>")
        spans.append((header.end(), end))
    offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    return [int(any(a <= s and e <= b for a, b in spans)) for s, e in offsets]


@pytest.mark.slow  # trains the tiny model
def test_sft_on_rollouts_trains_on_assistant_tokens_only(rollouts, tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from azr.training import sft_args
    from azr.training.sft import rollout_dataset

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    dataset = rollout_dataset(load_rollouts(rollouts))
    assert len(dataset) == 3
    user = dataset[0]["messages"][1]
    assert set(user) == {"role", "content"}  # no tool_calls / reasoning_content filled with nulls
    fields = [f"model.name_or_path={tiny_model_dir}", f"output_dir={tmp_path}", "sft.enabled=true"]
    recipe = load_config(None, [*fields, f"sft.rollouts={rollouts}"])
    recipe.sft.args = {"max_steps": 1, "report_to": []}
    args = sft_args(recipe, cpu=True)  # sft.rollouts: the loss on the assistant turns
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    for row, source in zip(trainer.train_dataset, dataset, strict=True):
        text = tokenizer.apply_chat_template(source["messages"], tools=source["tools"], tokenize=False)
        ids, labels = row["input_ids"], row["labels"]
        mask = [int(label != -100) for label in labels]  # what the loss sees: -100 is left out
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]  # the whole episode, nothing cut
        assert all(label in (-100, token) for label, token in zip(labels, ids, strict=True))
        assert mask == _expected_mask(tokenizer, text)  # token by token
        tokens = tokenizer.convert_ids_to_tokens(ids)
        ends = [i for i, t in enumerate(tokens) if t == "<|im_end|>"]
        roles = re.findall(r"<\|im_start\|>(\w+)", text)
        assert [mask[i] for i in ends] == [int(r == "assistant") for r in roles]  # each assistant turn's end token
        trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        assert "<tool_response>" not in trained and source["messages"][0]["content"][:40] not in trained
        assert trained.count("<tool_call>") == 1 and trained.count("<|im_end|>") == 2
        tool_output = source["messages"][3]["content"]
        assert tool_output and tool_output not in trained
    trainer.train()  # and a step runs on these rows


def _forced_call_bias(tokenizer, text: str, context: int = 10) -> list:
    """`sequence_bias` (a transformers generation setting, passed through `grpo.generation_kwargs`) that makes a model
    write `text` after the non-thinking generation prompt: each next token strongly favoured after the tokens that
    precede it there."""
    prefill = tokenizer("<think>\n\n</think>\n\n", add_special_tokens=False)["input_ids"]
    target = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    sequence = prefill + target
    start = len(prefill)
    return [[sequence[max(0, i - context) : i + 1], 50.0] for i in range(start, len(sequence))]


@pytest.mark.slow
def test_sft_on_rollouts_then_two_grpo_steps_with_tools(tiny_model_dir, tmp_path, monkeypatch):
    """The whole path on the CPU: scripted episodes that call python_run, a short SFT warm start on them
    (assistant-only loss), then two GRPO steps with tools where TRL parses the policy's call, runs python_run, feeds
    the result back and masks it; the generation log shows call and result. A random 1 M model writes no calls, and
    teaching it one by SFT takes minutes, so a sequence bias in grpo.generation_kwargs makes it write the probe call.
    About a minute: the only test that runs TRL's tool loop."""
    from transformers import AutoTokenizer

    from azr.logs import read_jsonl_records
    from azr.training import run_train

    probe = "print(6 * 7)"
    monkeypatch.setattr(gen_module, "build_policy", lambda cfg, kind, stack: ReferencePolicy(probe=probe))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    call = "<tool_call>\n" + json.dumps({"name": "python_run", "arguments": {"code": probe}}) + "\n</tool_call>"
    generation = {"sequence_bias": _forced_call_bias(tokenizer, call)}
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"model: {{name_or_path: '{tiny_model_dir}', adapter: {{kind: none}}, gradient_checkpointing: false}}\n"
        "data: {train: train, eval: null, max_tasks: 2, shuffle: false}\n"
        "sandbox: {workers: 1, backend: bwrap}\nlogging: {console: plain, pass_rate_tasks: 0}\n"
        "tools: {enabled: true, names: [python_run]}\ngen: {max_tasks: 2}\n"
        "sft: {enabled: true, rollouts: rollouts.jsonl, args: {max_steps: 2, per_device_train_batch_size: 2}}\n"
        "grpo: {max_steps: 2, per_device_train_batch_size: 2, num_generations: 2, max_completion_length: 128, "
        f"learning_rate: 1.0e-5, generation_kwargs: {json.dumps(generation)}}}\noutput_dir: out\n"
    )
    assert run_gen(load_config(recipe, []), tmp_path / "rollouts.jsonl") == 0
    assert run_train(load_config(recipe, [])) == 0
    metrics = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    state = json.loads((tmp_path / "out" / "state.json").read_text())
    assert state["phases"]["sft"]["examples"] == 2  # the warm start trained on the two episodes
    records = [r for f in sorted((tmp_path / "out" / "generations").glob("*.jsonl")) for r in read_jsonl_records(f)]
    assert {r["step"] for r in records} == {1, 2} and all("messages" in r for r in records)
    assistant, result = records[0]["messages"][0], records[0]["messages"][1]
    assert assistant["tool_calls"][0]["function"] == {"name": "python_run", "arguments": {"code": probe}}
    assert result == {"role": "tool", "name": "python_run", "content": "42"}
    grpo = [m for m in metrics if m.get("phase") == "grpo" and "tools/call_frequency" in m]
    assert len(grpo) == 2 and all(m["tools/call_frequency"] > 0 for m in grpo)
