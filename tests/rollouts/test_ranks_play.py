"""Multi-turn episodes on several processes: each rank plays its share, and where one rank's episodes end before
another's, every rank still makes the same sampler calls with as many contexts each. A trainer's generation gathers
every rank's contexts (TRL's vLLM server mode: each rank takes the slice at its index), so a rank that stopped
asking would hang the others, and uneven counts would hand a rank the continuations of another's contexts.

Real parts: torchrun's two processes and gloo group, azr's `Ranks`, the tiny model's tokenizer and chat template;
the sampler answers each context with a digest of it (it is the generation backend's collective, not a model)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow(minutes=1)


def test_ranks_with_uneven_turns_make_the_same_calls_and_each_episode_gets_its_own_continuations(
    tiny_model_dir, tmp_path
):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    script = Path(__file__).with_name("ranks_play.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    argv = [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(tiny_model_dir), str(tmp_path), "3"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    try:
        said, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both ranks: a rank left waiting in a collective
        proc.communicate()
        pytest.fail("the ranks hung: one waited in the sampler's gather for a call the other never made")
    assert proc.returncode == 0, said[-4000:]
    first, second = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert first["turns"] == [1] * 4 and second["turns"] == [3] * 4  # rank 0 done after one turn, rank 1 after three
    assert first["calls"] == second["calls"] == [4, 4, 4]  # rank 0 kept asking (its prompt) while rank 1 played on
    for answer in first["answers"] + second["answers"]:
        assert answer["got"] == answer["wanted"], answer  # every turn continued its own episode's context
