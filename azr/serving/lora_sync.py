"""Adapter mode's generation backend (`LoraSync`): the policy's LoRA adapter hot-loaded into a vLLM server after
every optimizer step (`sync_weights`), and GRPO's completions sampled from it with their processed logprobs
(`generate`): the two calls TRL's GRPOTrainer makes on its generation backend. With `serve_versions`, every
version in use stays loaded and `complete` (a `azr.rollouts.TokenSampler`) samples the newest: asynchronous GRPO's
producer. Only the main process talks to the server; how a sync loads and unloads versions is in docs/vllm.md. A
server that dies mid-run is restarted with the versions it served and the request it died on is sent again
(`max_restarts` times in a run). Knows no config or trainer.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azr.errors import NotAvailableError
from azr.serving.vllm import VllmServer, VllmServerError

if TYPE_CHECKING:
    from accelerate import Accelerator
    from peft import PeftModel
    from transformers import PreTrainedTokenizerBase

    from azr.rollouts import Continuation, Sampling

log = logging.getLogger(__name__)

# Local requests must not go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LoraSync:
    """The adapter of `model` (a peft model) served by `server`, one new version per optimizer step.

    `sampling` holds the request's sampling fields (temperature, top_p, top_k, min_p, repetition_penalty,
    max_tokens, and any extra vLLM request fields); `step()` names the step a sync saves. `folder` is emptied first:
    it holds only the adapter being served (and, during a sync, the one before it). `tokenizer` (a copy is kept:
    producer threads decode with it while the trainer's own changes its padding) decodes what `complete` samples,
    and `eos` says which tokens end a turn.

    When the server dies (an engine error, the OOM killer, a SIGKILL), the request that finds it dead restarts it,
    loads every version it served again and sends the request again: a completion request is answered once, by the
    new server (a seeded one with the same completions), so no sample is lost or doubled. After `max_restarts`
    restarts the next death is a VllmServerError with the log's last lines. `restarted(count)` is told of each.
    """

    def __init__(
        self,
        server: VllmServer,
        folder: Path,
        *,
        model: PeftModel,
        accelerator: Accelerator | None,
        sampling: dict[str, Any],
        step: Callable[[], int],
        timeout_s: float = 900.0,
        max_restarts: int = 0,
        restarted: Callable[[int], None] | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        eos: frozenset[int] = frozenset(),
    ):
        self.server, self.folder, self.model, self.accelerator = server, Path(folder), model, accelerator
        self.tokenizer, self.eos = (copy.deepcopy(tokenizer) if tokenizer is not None else None), frozenset(eos)
        self.sampling, self.step, self.timeout_s = dict(sampling), step, timeout_s
        self.max_restarts, self.restarted, self.restarts = max_restarts, restarted, 0
        self._revival = threading.Lock()  # one restart at a time; requests wait for it before they are sent
        self.name: str | None = None  # the adapter being served
        self.syncs = 0
        self.sync_seconds = 0.0  # save + load + unload, summed over syncs
        self.save_seconds = 0.0  # of which writing the adapter
        self.main = accelerator is None or accelerator.is_main_process
        # Versioned serving (asynchronous GRPO): each sync adds `policy-v<step>` beside the versions in use.
        self.versioned = False
        self.versions: dict[int, str] = {}  # version -> name, every version loaded now
        self._in_use: Counter[int] = Counter()  # versions a request is being generated with
        self._lock = threading.Lock()
        self._train_sampling = dict(self.sampling)
        if self.main:
            shutil.rmtree(self.folder, ignore_errors=True)  # versions of an earlier run's server, gone with it
            self.folder.mkdir(parents=True)

    # --- TRL's contract ---------------------------------------------------------------------------------------

    def serve_versions(self) -> None:
        """Keep every version a request may still use (asynchronous GRPO): each sync loads `policy-v<step>` beside
        the versions in use, and a version is unloaded once it is neither the newest nor generating. Sampling for
        training uses the request fields as they are now, whatever an evaluation sets for its own calls."""
        self.versioned = True
        self._train_sampling = dict(self.sampling)

    def sync_weights(self) -> None:
        """Serve the adapter as it is now: save it to a new folder, load it, unload the previous version."""
        if not self.main:
            return
        if self.versioned:
            self._publish()
            return
        started = time.perf_counter()
        self.syncs += 1
        name = f"step-{self.step()}-v{self.syncs}"
        path = self.save(name)
        self.save_seconds += time.perf_counter() - started
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        previous, self.name = self.name, name
        if previous is not None:
            self._post("/v1/unload_lora_adapter", {"lora_name": previous})
        for old in self.folder.iterdir():
            if old != path:
                shutil.rmtree(old, ignore_errors=True)
        self.sync_seconds += time.perf_counter() - started
        log.debug("adapter %s served (%d syncs, %.2fs in all)", name, self.syncs, self.sync_seconds)

    def _publish(self) -> None:
        version = self.step()
        if version in self.versions:  # these weights are served already (a second sync within one step)
            return
        started = time.perf_counter()
        self.syncs += 1
        name = f"policy-v{version}"
        path = self.save(name)
        self.save_seconds += time.perf_counter() - started
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        with self._lock:
            self.versions[version] = self.name = name
        self._retire()
        self.sync_seconds += time.perf_counter() - started

    @property
    def latest_version(self) -> int:
        return max(self.versions) if self.versions else -1

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]:
        """A `TokenSampler` over the newest version served (asynchronous GRPO's producer): one continuation of each
        context, tagged with that version, at the training request's settings; runs of `sampling.n` identical
        contexts are one request for `n`, seeded with `sampling.seed` (vLLM seeds completion i with `seed + i`, so
        the draw does not depend on the server's shared random stream, which every other request and the batching
        of the moment advance; None: unseeded), at most `sampling.max_new_tokens` tokens each."""
        from azr.rollouts import continuation  # the rollout package, only where it samples

        n = max(sampling.n, 1)
        with self._lock:
            version = self.latest_version
            if version < 0:
                raise VllmServerError("adapter mode: a versioned sample before the first sync_weights()")
            self._in_use[version] += 1
        try:
            body = dict(self._train_sampling)
            body["max_tokens"] = min(sampling.max_new_tokens, body.get("max_tokens") or sampling.max_new_tokens)
            if sampling.seed is not None:
                body["seed"] = sampling.seed
            ids, logprobs, _ = self.request(
                [list(c) for c in contexts[::n]], n, name=self.versions[version], sampling=body
            )
        finally:
            with self._lock:
                self._in_use[version] -= 1
            self._retire()
        if len(ids) != len(contexts):
            raise VllmServerError(f"vLLM returned {len(ids)} completions for {len(contexts)} contexts")
        values = [[lp[0] for lp in seq] for seq in logprobs] if logprobs is not None else [None] * len(ids)
        return [
            continuation(self.tokenizer, list(seq), self.eos, lps, version=version)
            for seq, lps in zip(ids, values, strict=True)
        ]

    def _retire(self) -> None:
        """Unload every version that is neither the newest nor generating: no sample can be drawn from it again."""
        with self._lock:
            newest = self.latest_version
            old = [v for v in self.versions if v != newest and self._in_use[v] <= 0]
            names = [self.versions.pop(v) for v in old]
        for name in names:
            self._post("/v1/unload_lora_adapter", {"lora_name": name})
            shutil.rmtree(self.folder / name, ignore_errors=True)

    def generate(
        self, prompts: list[list[int]], images: Sequence[object] | None, num_generations: int, profiler: object = None
    ) -> tuple:
        """(prompt_ids, completion_ids, logprobs, logprob_token_ids) for this process's `prompts`, which hold each
        prompt `num_generations` times in a row (TRL's repeat sampler); logprobs are [[logprob], ...] per token."""
        if images is not None and any(i is not None for i in images):
            raise NotAvailableError("vllm.mode=adapter: prompts with images are not supported; use vllm.mode=server")
        from accelerate.utils import broadcast_object_list, gather_object

        distributed = self.accelerator is not None and self.accelerator.num_processes > 1
        every = gather_object(prompts) if distributed else prompts
        payload = None
        if self.main:
            with profiler or nullcontext():
                payload = self.request(every[::num_generations], num_generations)
        if distributed:
            box = [payload]
            broadcast_object_list(box, from_process=0)
            payload = box[0]
        completion_ids, logprobs, logprob_ids = payload
        start = (self.accelerator.process_index if distributed else 0) * len(prompts)
        window = slice(start, start + len(prompts))
        return list(prompts), completion_ids[window], logprobs[window], logprob_ids[window]

    def close(self) -> None:
        """Unload the adapter being served and remove its folder (a server that outlives this backend, as in a
        benchmark, may then take another backend's versions under the same names)."""
        names = set(self.versions.values()) | ({self.name} if self.name is not None else set())
        if self.main and self.server.exit_code() is None:
            for name in sorted(names):
                self._post("/v1/unload_lora_adapter", {"lora_name": name})
        self.name, self.versions = None, {}
        if self.main:
            shutil.rmtree(self.folder, ignore_errors=True)

    # --- the server -------------------------------------------------------------------------------------------

    def request(
        self, prompt_ids: list[list[int]], n: int, name: str | None = None, sampling: dict[str, Any] | None = None
    ) -> tuple[list, list, list]:
        """Sample `n` completions of each prompt from the served adapter (or the version `name`): their token ids,
        and per token the sampled token's processed logprob (and token id), in TRL's nesting, prompt-major."""
        name = name or self.name
        if name is None:
            raise VllmServerError("adapter mode: generate() before the first sync_weights()")
        body = {
            "model": name,
            "prompt": prompt_ids,
            "n": n,
            "logprobs": 0,  # the sampled token's own logprob only
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            **(self.sampling if sampling is None else sampling),
        }
        choices = json.loads(self._post("/v1/completions", body))["choices"]
        if len(choices) != n * len(prompt_ids):
            raise VllmServerError(f"vLLM returned {len(choices)} completions for {len(prompt_ids)} prompts x n={n}")
        logprobs, logprob_ids = read_logprobs([c["logprobs"] for c in choices])
        return [c["token_ids"] for c in choices], logprobs, logprob_ids

    def save(self, name: str) -> Path:
        """The adapter's weights and config in `folder/name`, written under a temporary name then renamed, so the
        server never sees a half-written folder."""
        final, partial = self.folder / name, self.folder / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        model = self.accelerator.unwrap_model(self.model) if self.accelerator is not None else self.model
        # No embedding layers: a plain LoRA adapts linear layers only, and the check would read the base's config.
        model.save_pretrained(str(partial), safe_serialization=True, save_embedding_layers=False)
        os.replace(partial, final)
        return final

    def _post(self, path: str, body: dict[str, Any]) -> bytes:
        """POST JSON to the server, restarting it if it died (`_revive`) and sending the request again where that
        means something (an unload is moot on a new server); any other failure is a VllmServerError with the server's
        last log lines."""
        with self._revival:  # not while a restart is under way
            incarnation = self.server.starts
        if self.server.exit_code() is None:
            try:
                return self._send(path, body)
            except VllmServerError:
                if self.server.starts == incarnation and self.server.healthy():
                    raise  # the server is well and refused, or did not answer in time
        self._revive(incarnation)
        return b"{}" if path == "/v1/unload_lora_adapter" else self._send(path, body)

    def _send(self, path: str, body: dict[str, Any]) -> bytes:
        request = urllib.request.Request(
            self.server.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            reason = _error_message(exc.read())
            failure = f"vLLM server refused {path} ({exc.code}): {reason}"
        except (OSError, TimeoutError) as exc:  # refused, reset, timed out
            failure = f"vLLM server did not answer {path}: {exc}"
        raise VllmServerError(failure + f"; log {self.server.log_path}, last lines:\n{self.server.log_tail()}")

    def _revive(self, incarnation: int) -> None:
        """Make sure a server newer than `incarnation` runs with every version this backend serves: restart it
        unless another request already has (or raise, with the log, once `max_restarts` are spent)."""
        with self._revival:
            if self.server.starts != incarnation and self.server.exit_code() is None:
                return  # restarted by another request since this one was sent
            if self.restarts >= self.max_restarts:
                self.server.check_alive()  # dead: says so with the log's last lines
                raise VllmServerError(
                    f"vLLM server (pid {self.server.pid}) is not healthy (its engine died?) and "
                    f"vllm.max_restarts={self.max_restarts} restarts are spent; log {self.server.log_path}, last "
                    f"lines:\n{self.server.log_tail()}"
                )
            self.restarts += 1
            code = self.server.exit_code()
            log.warning(
                "vLLM server (pid %s) died during the run (exit code %s); restarting it (%d of %d), log %s",
                self.server.pid,
                code,
                self.restarts,
                self.max_restarts,
                self.server.log_path,
            )
            self.server.restart()
            with self._lock:
                names = set(self.versions.values()) | ({self.name} if self.name is not None else set())
            for name in sorted(names):
                self._send("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(self.folder / name)})
            log.warning(
                "vLLM server restarted (pid %s) with %s", self.server.pid, ", ".join(sorted(names)) or "no adapter"
            )
        if self.restarted is not None:
            self.restarted(self.restarts)


def _error_message(raw: bytes) -> str:
    try:
        return json.loads(raw)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace")[:500]


def read_logprobs(replies: Sequence[dict[str, Any] | None]) -> tuple[list | None, list | None]:
    """The logprobs of a /v1/completions reply's choices (`choices[i]["logprobs"]`) in the nesting TRL's generation
    path takes: per completion, per token, the logprobs (NaN read as None) and their token ids, the sampled token and
    any alternatives vLLM sent, most likely first. Tokens come as "token_id:<id>" (`return_tokens_as_token_ids`).
    (None, None) when the server sent no logprobs."""
    if not replies or replies[0] is None:
        return None, None
    logprobs: list[list[list[float | None]]] = []
    token_ids: list[list[list[int]]] = []
    for reply in replies:
        if reply is None:
            raise VllmServerError("vLLM sent logprobs for some completions of a request and not for others")
        steps = zip(reply["tokens"], reply["token_logprobs"], reply["top_logprobs"], strict=True)
        ranked = [
            sorted({token: value, **(others or {})}.items(), key=lambda kv: -kv[1]) for token, value, others in steps
        ]
        logprobs.append([[None if math.isnan(value) else value for _, value in step] for step in ranked])
        token_ids.append([[int(token.removeprefix("token_id:")) for token, _ in step] for step in ranked])
    return logprobs, token_ids
