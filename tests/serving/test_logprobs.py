"""Adapter mode reads the logprobs of vLLM's /v1/completions replies itself (serving/ imports no trl), and reads them
exactly as TRL's server-mode client does: the same nesting, order, ids and NaN handling on the replies vLLM sends."""

from __future__ import annotations

import math
import random

import pytest

from azr.serving import VllmServerError
from azr.serving.lora_sync import read_logprobs


def reply(rng: random.Random, tokens: int, alternatives: int) -> dict:
    """One choice's `logprobs` as vLLM writes it with `return_tokens_as_token_ids`: the sampled token first among
    `top_logprobs` (vLLM's order), then up to `alternatives` others."""
    ids = [rng.randrange(2048) for _ in range(tokens)]
    values = [-rng.expovariate(1.0) for _ in ids]
    top = []
    for token, value in zip(ids, values, strict=True):
        others = {f"token_id:{rng.randrange(2048)}": -rng.expovariate(0.5) for _ in range(alternatives)}
        top.append({f"token_id:{token}": value, **others})
    return {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": values, "top_logprobs": top}


@pytest.mark.parametrize("alternatives", [0, 3])  # azr asks for 0 (`"logprobs": 0`); TRL's server mode for more
def test_replies_read_as_trls_client_reads_them(alternatives):
    from trl.generation.vllm_client import parse_logprobs

    rng = random.Random(alternatives)
    replies = [reply(rng, rng.randint(0, 12), alternatives) for _ in range(8)]
    assert read_logprobs(replies) == parse_logprobs(replies)
    if alternatives == 0:  # what adapter mode reads: the sampled token alone, its id and logprob
        logprobs, ids = read_logprobs(replies)
        assert ids[0] == [[int(t.removeprefix("token_id:"))] for t in replies[0]["tokens"]]
        assert logprobs[0] == [[v] for v in replies[0]["token_logprobs"]]


def test_nan_is_none_and_no_logprobs_is_none():
    from trl.generation.vllm_client import parse_logprobs

    nan = {"tokens": ["token_id:5"], "token_logprobs": [math.nan], "top_logprobs": [{"token_id:5": math.nan}]}
    assert read_logprobs([nan]) == parse_logprobs([nan]) == ([[[None]]], [[[5]]])
    assert read_logprobs([None, None]) == parse_logprobs([None, None]) == (None, None)
    with pytest.raises(VllmServerError, match="some completions"):
        read_logprobs([nan, None])
