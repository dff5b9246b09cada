"""`azr data audit`: how strong a task set's tests are, measured by the near-miss programs they let through (mutants
of each reference solution, and probes that must fail every task), and new cases that make weak tests stronger.
The face of the audit package; it sits over `azr.rewards` (everything runs in its sandbox) and imports no torch.
"""

from azr.audit.command import AuditRequest, run_audit
from azr.audit.hacking import HardenedVerdict, HardenedWatch, check_answers, hardened_cases, hardened_watch
from azr.audit.mutants import Mutant, candidates, mutants, sample_candidates
from azr.audit.output import audit_figures, read_audit, weak_tasks
from azr.audit.strength import TaskAudit, audit_tasks, kill_rate

__all__ = [
    "AuditRequest",
    "HardenedVerdict",
    "HardenedWatch",
    "Mutant",
    "TaskAudit",
    "audit_figures",
    "audit_tasks",
    "candidates",
    "check_answers",
    "hardened_cases",
    "hardened_watch",
    "kill_rate",
    "mutants",
    "read_audit",
    "run_audit",
    "sample_candidates",
    "weak_tasks",
]
