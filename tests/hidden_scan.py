"""The hidden-test scan the feedback tests share: texts only a task's hidden tests hold (their calls, where no
public test and not the prompt holds them too), which no observation shown to a policy may contain."""

from __future__ import annotations

from azr.rewards.plans import plan_test


def hidden_marks(task) -> list[str]:
    """Texts only a hidden test of `task` holds: its calls, where no public test holds them too."""
    public, hidden = task.split_tests()
    marks = [c.expr for test in hidden for c in plan_test(test).checks]
    return [m for m in marks if len(m) > 4 and not any(m in p.source for p in public) and m not in task.prompt]
