"""Asynchronous GRPO grades ahead: the pipeline's producer runs each played batch's programs in the real bwrap
sandbox as soon as the batch is played (`azr.training.episodes.ahead_grading` over the run's `CodeGrader`), so the
step that trains the batch finds the outcomes in the grader's cache and its `tests` reward runs no program; the
rewards are the ones grading in the step would give. The engine stands in for the vLLM sidecar at its one edge: it
answers each task with a fixed program's token ids."""

from __future__ import annotations

import threading

import pytest

from azr.data import Task
from azr.rewards import CodeGrader
from azr.rewards.functions import TestsReward as Tests
from azr.rollouts import Playbook
from azr.rollouts.pipeline import AsyncRollouts
from azr.sandbox import Limits, open_pool
from azr.training.episodes.rounds import ahead_grading, assistant

G = 2
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


class _Counting:
    """The pool, counting the programs run through it (and on which thread)."""

    def __init__(self, pool):
        self.pool, self.programs, self.threads = pool, 0, set()

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def map(self, programs, limits=None):
        self.programs += len(programs)
        self.threads.add(threading.current_thread().name)
        return self.pool.map(programs, limits)

    def imap(self, jobs):
        for result in self.pool.imap(jobs):
            self.programs += 1
            self.threads.add(threading.current_thread().name)
            yield result

    def run(self, *args, **kwargs):
        self.programs += 1
        return self.pool.run(*args, **kwargs)


class _Engine:
    """Answers task t0 with the right program and t1 with a wrong one (the prompt id says which task)."""

    def __init__(self, tokenizer):
        self.answers = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in (RIGHT, WRONG)]
        self.tokenizer = tokenizer

    def complete(self, contexts, sampling):
        from azr.rollouts.samplers import continuation

        answers = [list(self.answers[c[0]]) for c in contexts]
        return [continuation(self.tokenizer, ids, set(), [-0.5] * len(ids), version=0) for ids in answers]


@pytest.fixture(scope="module")
def counting():
    with open_pool("bwrap", workers=2) as pool:
        yield _Counting(pool)


def _rows():
    tasks = [Task(f"t{i}", "Write add(a, b).", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]) for i in range(2)]
    return [{"prompt": [{"role": "user", "content": t.prompt}], **t.grading_columns()} for t in tasks for _ in range(G)]


def test_the_producer_grades_each_batch_and_the_steps_reward_runs_no_program(tokenizer, counting):
    grader = CodeGrader(counting, Limits(wall_s=5.0), answer_format="relaxed")
    tests = Tests(grader)
    playbook = Playbook(tokenizer=tokenizer, grade=ahead_grading(grader, tokenizer))
    pipeline = AsyncRollouts(_Engine(tokenizer), lambda prompts: [[0], [1]], 1, G, playbook=playbook)
    try:
        rows = pipeline.swap(_rows(), 0)
        out = pipeline([r["prompt"] for r in rows], trainer=None)
        ahead = counting.programs
        assert ahead == 2 and counting.threads == {"azr-async-rollouts-0"}  # two programs, on the producer's thread
        # The step's reward call, on the completions TRL decodes from the ids and the rows it merged the columns into.
        texts = tokenizer.batch_decode(out["completion_ids"], skip_special_tokens=True)
        columns = {key: [row[key] for row in rows] for key in rows[0]}
        values = tests(prompts=[r["prompt"] for r in rows], completions=[assistant(t) for t in texts], **columns)
        assert counting.programs == ahead  # every outcome was waiting in the cache
        assert values == [1.0, 1.0, 0.5, 0.5]
        assert [d["status"] for d in grader.last_details] == ["passed", "passed", "failed", "failed"]
        assert pipeline.metrics()["async/grade_seconds"] > 0
    finally:
        pipeline.close()


def test_a_program_the_producer_is_running_is_waited_for_not_run_twice(counting):
    grader = CodeGrader(counting, Limits(wall_s=5.0), answer_format="relaxed")
    slow = "```python\nimport time\ntime.sleep(0.5)\ndef add(a, b):\n    return a + b\n```"
    columns = {key: [value] for key, value in Task("s", "p", ["assert add(1, 2) == 3"]).grading_columns().items()}
    before = counting.programs
    producer = threading.Thread(target=grader.grade_ahead, args=([assistant(slow)], columns))
    producer.start()
    try:
        threading.Event().wait(0.1)  # the producer's run has started
        (outcome,) = grader.outcomes([assistant(slow)], columns)
    finally:
        producer.join()
    assert outcome.status == "passed" and counting.programs == before + 1
