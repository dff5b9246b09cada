"""Training on tool use: SFT on `azr gen` episodes with assistant-only loss (the mask checked token by token), and
GRPO with tools, whose rows are episodes of the tool environment (`azr.training.episodes.ToolRollout`): each turn's ids
reach the next turn as sampled, tool results are masked out of the loss and out of a row too short for them, and two
steps train the tiny model with the generation log showing call and result."""

from __future__ import annotations

import json
import re

import pytest
from recipes import tiny_grpo_args
from scripted_policy import ReferencePolicy

import azr.envs.gen as gen_module
from azr.config import load_config
from azr.envs import events_of, run_gen, shown_messages
from azr.prompts import completion_text
from azr.rollouts import ScoredBatch
from azr.tools import load_rollouts
from azr.training.episodes.rounds import COMPLETION
from azr.training.episodes.tools import CALLS

torch = pytest.importorskip("torch")


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
    (assistant-only loss), then two GRPO steps with tools where the tool environment parses the policy's call, runs
    python_run, feeds the result back and masks it; the generation log shows call and result. A random 1 M model
    writes no calls, and teaching it one by SFT takes minutes, so a sequence bias in grpo.generation_kwargs makes it
    write the probe call. About a minute."""
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
    assert {k: result[k] for k in ("role", "name", "content")} == {
        "role": "tool",
        "name": "python_run",
        "content": "42",
    }
    assert result["tool_call_id"] == assistant["tool_calls"][0]["id"]  # the result answers that call
    grpo = [m for m in metrics if m.get("phase") == "grpo" and "tools/call_frequency" in m]
    assert len(grpo) == 2 and all(m["tools/call_frequency"] > 0 and "tools/failure_frequency" in m for m in grpo)


# ------------------------------------------------------------------------------ GRPO's tool episodes, turn by turn
PROBE_CALL = '<tool_call>\n{"name": "python_run", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'
PROBE_ANSWER = "```python\ndef f(x):\n    return x + 1\n```\nFinal answer: f"


class ScriptedTurns:
    """A `TokenSampler` that answers the k-th turn of every episode with `texts[k]`'s ids (closed by the end-of-turn
    token), records every context it was asked to continue and what it sampled, and says each turn's budget."""

    def __init__(self, tokenizer, texts: list[str]):
        self.tokenizer = tokenizer
        self.ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
        self.contexts, self.sampled, self.budgets = [], [], []

    def complete(self, contexts, sampling):
        from azr.rollouts import Continuation

        turn = len(self.contexts)
        self.contexts.append([list(c) for c in contexts])
        self.budgets.append(sampling.max_new_tokens)
        ids = [list(self.ids[turn]) for _ in contexts]
        self.sampled.append(ids)
        raw = self.tokenizer.decode(ids[0][:-1], skip_special_tokens=False)
        text = self.tokenizer.decode(ids[0], skip_special_tokens=True)
        return [Continuation(i, text, "stop", [-0.25] * len(i), raw) for i in ids]


@pytest.fixture(scope="module")
def tool_pool():
    from azr.sandbox import open_pool

    with open_pool("bwrap", workers=1) as pool:
        yield pool


@pytest.fixture(scope="module")
def tool_kit(tiny_model_dir, tool_pool):
    """The tiny tokenizer, its chat template as episode ids, and a python_run toolbox on the real sandbox."""
    from transformers import AutoTokenizer

    from azr.config import SandboxConfig, ToolsConfig
    from azr.rollouts import ChatTokens
    from azr.tools import Toolbox

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    toolbox = Toolbox(ToolsConfig(names=["python_run"]), SandboxConfig(timeout_s=5), pool=tool_pool)
    return tokenizer, ChatTokens(tokenizer), toolbox


def _tool_episodes(tool_kit, texts, max_completion=512, max_iterations=None, n=2):
    """`n` episodes of one task played as GRPO plays them (`ToolRollout`'s environment and limits) with `texts` as
    the policy's turns."""
    from azr.data import load_tasks
    from azr.envs import TaskPrompt
    from azr.rollouts import Sampling, play, start_groups
    from azr.training.episodes.tools import ToolRollout

    tokenizer, chat, toolbox = tool_kit
    task = load_tasks("train")[0]
    rollout = ToolRollout(toolbox, {task.id: task}, chat, max_completion, max_iterations)
    (episodes,) = start_groups(rollout.env, [TaskPrompt.of(task)], chat, n)
    sampler = ScriptedTurns(tokenizer, texts)
    play(rollout.env, episodes, sampler, chat, Sampling(n=1, max_new_tokens=max_completion), rollout.rollouts.limits)
    return episodes, sampler, rollout


def test_a_tool_turns_ids_reach_the_next_turn_as_sampled_and_the_tool_output_is_masked(tool_kit):
    tokenizer = tool_kit[0]
    episodes, sampler, rollout = _tool_episodes(tool_kit, [PROBE_CALL, PROBE_ANSWER])
    assert len(sampler.contexts) == 2  # the call turn for both episodes, then the answer turn for both
    prompt, first = episodes[0].prompt_ids, sampler.sampled[0][0]
    assert "python_run" in tokenizer.decode(prompt)  # the tool schemas are rendered into the prompt
    for episode, context in zip(episodes, sampler.contexts[1], strict=True):
        # turn 2's context: the prompt, turn 1's ids exactly as sampled, then the tool result's ids
        assert context[: len(prompt)] == prompt and context[len(prompt) : len(prompt) + len(first)] == first
        result = context[len(prompt) + len(first) :]
        assert tokenizer.decode(result).startswith("\n<|im_start|>user\n<tool_response>\n42")
        second = sampler.sampled[1][0]
        assert episode.completion_ids == first + result + second
        assert episode.env_mask == [1] * len(first) + [0] * len(result) + [1] * len(second)
        assert episode.logprobs == [-0.25] * len(first) + [0.0] * len(result) + [-0.25] * len(second)
        assert episode.finish_reason == "answer"
    columns = rollout.columns(episodes)
    call, tool, answer = columns[COMPLETION][0]  # what the rewards score and the generation log keeps
    assert call["tool_calls"][0]["function"] == {"name": "python_run", "arguments": {"code": "print(6 * 7)"}}
    assert (tool["role"], tool["name"], tool["content"]) == ("tool", "python_run", "42")
    assert completion_text(columns[COMPLETION][0]) == answer["content"] == PROBE_ANSWER
    assert columns[CALLS] == [[1, 0], [1, 0]]
    rows = [{CALLS: c} for c in columns[CALLS]]
    rollout.observe(ScoredBatch(1, rows, [None] * 2, [None] * 2, torch.zeros(2, 1), ["tests"], []))
    assert rollout.metrics() == {"tools/call_frequency": 1.0, "tools/failure_frequency": 0.0}
    assert rollout.metrics() == {}  # since the last log


def test_a_tool_result_past_the_rows_length_is_not_shown_and_ends_the_episode(tool_kit):
    tokenizer = tool_kit[0]
    call_ids = len(tokenizer(PROBE_CALL, add_special_tokens=False)["input_ids"]) + 1
    episodes, sampler, _ = _tool_episodes(tool_kit, [PROBE_CALL, PROBE_ANSWER], max_completion=call_ids + 5)
    assert len(sampler.contexts) == 1  # the result's ids would not fit: no second turn
    for episode in episodes:
        assert episode.finish_reason == "max_tokens" and episode.env_tokens == 0 and set(episode.env_mask) == {1}
        assert len(episode.completion_ids) == call_ids
        assert [m["role"] for m in shown_messages(episode)] == ["assistant"]  # the unshown result is left out
    # a row long enough for the result leaves the next turn only what is left of it
    episodes, sampler, _ = _tool_episodes(tool_kit, [PROBE_CALL, PROBE_ANSWER], max_completion=call_ids + 40)
    shown = len(episodes[0].completion_ids) - call_ids - len(sampler.sampled[1][0])
    assert sampler.budgets == [call_ids + 40, call_ids + 40 - call_ids - shown]


def test_no_secret_reaches_a_training_row_through_python_run(tool_kit, tool_pool, monkeypatch):
    """The sandbox has no key in its environment, and a key the recipe names that the program spells out anyway is
    redacted before the result is tokenized into the row."""
    from azr.config import SandboxConfig, ToolsConfig
    from azr.tools import Toolbox

    key = "sk-grpo-0123456789abcdef-SECRET"
    monkeypatch.setenv("AZR_TEST_KEY", key)
    tokenizer, chat, _ = tool_kit
    secret = Toolbox(ToolsConfig(names=["python_run"]), SandboxConfig(timeout_s=5), pool=tool_pool, secrets=[key])
    code = f"import os; print(sorted(os.environ)); print('{key[:12]}' + '{key[12:]}')"
    call = '<tool_call>\n{"name": "python_run", "arguments": {"code": ' + json.dumps(code) + "}}\n</tool_call>"
    episodes, _, _ = _tool_episodes((tokenizer, chat, secret), [call, PROBE_ANSWER], n=1)
    (episode,) = episodes
    shown = tokenizer.decode([i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m])
    assert "<redacted>" in shown and key not in shown and "AZR_TEST_KEY" not in shown
    assert key not in json.dumps(shown_messages(episode))


def test_max_tool_calling_iterations_bounds_the_rounds_of_calls(tool_kit):
    episodes, sampler, _ = _tool_episodes(tool_kit, [PROBE_CALL] * 4, max_iterations=1)
    assert len(sampler.contexts) == 2  # one round of calls answered, then the last allowed turn
    assert all(e.finish_reason == "max_turns" and len(e.policy_turns) == 2 for e in episodes)


def test_a_grpo_round_with_tools_trains_the_policys_tokens_only(tool_kit, tiny_model_dir, tmp_path):
    """TRL's round (as `AZRGRPOTrainer`) through `ToolRollout`: the tiny model is made to write the probe call
    (a sequence bias), python_run runs it in the sandbox, and the batch TRL trains holds every episode's ids as
    played, the tool results at mask 0, rewards on what the episode's rows say."""
    from transformers import AutoModelForCausalLM

    from azr.data import load_tasks
    from azr.training.episodes.tools import ToolRollout
    from azr.training.grpo import grpo_dataset, grpo_rows
    from azr.training.trl.trainer import AZRGRPOTrainer

    tokenizer, chat, toolbox = tool_kit
    tasks = load_tasks("train")[:2]
    seen = []

    def reward(completions, **kw):
        seen.extend(completions)
        return [float(len(completion_text(c)) % 3) for c in completions]

    generation = {"sequence_bias": _forced_call_bias(tokenizer, PROBE_CALL)}
    trainer = AZRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        reward_funcs=[reward],
        args=tiny_grpo_args(
            tmp_path,
            max_completion_length=96,
            generation_kwargs=generation,
            chat_template_kwargs={"enable_thinking": False},  # the prefill the bias continues
        ),
        train_dataset=grpo_dataset(tasks),
        processing_class=tokenizer,
    )
    rollout = ToolRollout(toolbox, {t.id: t for t in tasks}, chat, 96, max_iterations=1)
    trainer.rollout_func = rollout
    torch.manual_seed(0)
    # each prompt twice, TRL's layout, each row its own dict as the dataloader gives them (TRL writes the rollout's
    # columns into them)
    output, _ = trainer._score_round([dict(row) for row in grpo_rows(tasks) for _ in range(2)])
    episodes = rollout.last
    assert len(episodes) == 4 and all(events_of(e) for e in episodes)  # every episode called python_run
    mask, ids = output["tool_mask"], output["completion_ids"]
    for row, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        assert n <= 96 and ids[row, :n].tolist() == episode.completion_ids
        assert mask[row, :n].tolist() == episode.env_mask and 0 in episode.env_mask
        first = episode.turns[0]
        assert episode.completion_ids[: len(first.ids)] == first.ids  # turn 1's ids as sampled
        result = tokenizer.decode([i for i, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m])
        assert "<tool_response>\n42\n</tool_response>" in result
    assert seen == [shown_messages(e) for e in episodes]  # the rewards read the calls, results and answers shown


def test_a_chat_template_that_cannot_carry_tools_is_refused_before_training(tool_kit):
    from transformers import AutoTokenizer

    from azr.rollouts import ChatTokens
    from azr.training.episodes.tools import ToolRollout

    tokenizer, _, toolbox = tool_kit
    plain = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    plain.chat_template = (  # ChatML that ignores `tools`
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(ValueError, match="does not render the tools it is offered"):
        ToolRollout(toolbox, {}, ChatTokens(plain), 64)
    ToolRollout(toolbox, {}, ChatTokens(tokenizer), 64)  # the tiny model's template carries them
