"""A scripted policy for tests that need tool-using episodes without a model that can write them: for each task it
makes one python_run call (the reference solution on the first test's input, or a fixed `probe`), then answers with
the reference solution in the strict format (or a fixed `answer`). It speaks as a non-thinking chat model under the
tiny model's template would: an empty reasoning block before each turn. The real loop, toolbox, sandbox, grading
and rollouts file do the rest."""

from __future__ import annotations

import json

from azr.data import load_tasks
from azr.prompts import last_user_message, reference_answer
from azr.rollouts import Reply


class ReferencePolicy:
    kind, name, control_tokens = "scripted", "reference", ()

    def __init__(self, split: str = "train", probe: str | None = None, answer: str | None = None):
        self.tasks = {t.prompt: t for t in load_tasks(split)}
        self.probe, self.answer = probe, answer

    async def reply(self, messages, tools, max_new_tokens, seed):
        task = self.tasks[last_user_message(messages)]
        if not any(m["role"] == "tool" for m in messages):
            code = (
                self.probe
                or f"{task.solution}\n\nprint({task.tests[0].source.removeprefix('assert ').split(' == ')[0]})"
            )
            call = json.dumps({"name": "python_run", "arguments": {"code": code}})
            text = ("" if self.probe else "Let me run it first.\n") + f"<tool_call>\n{call}\n</tool_call>"
        else:
            text = self.answer or reference_answer(task.solution, task.entry_point)
        # An empty reasoning block, as the API of a non-thinking model reports it; the environment reads the calls.
        return Reply({"role": "assistant", "content": text, "reasoning_content": ""}, "stop", 50, 40)
