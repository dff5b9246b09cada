"""Evaluation: `run_eval` (pass@k of a model, adapter, endpoint or given samples), the train-set measurement,
samplers, the samples file, pass@k and reports, and the held-out evaluation during a run. The face of the evaluation
package.
"""

from azr.evaluation.heldout import HeldOutEvaluator, attach_heldout, build_heldout, logged_steps
from azr.evaluation.measure import Sampling, generate_completions, score_completions
from azr.evaluation.report import compare_reports, print_comparison
from azr.evaluation.run import EvalConfig, eval_config_from_flags, run_eval

__all__ = [
    "EvalConfig",
    "HeldOutEvaluator",
    "Sampling",
    "attach_heldout",
    "build_heldout",
    "compare_reports",
    "eval_config_from_flags",
    "generate_completions",
    "logged_steps",
    "print_comparison",
    "run_eval",
    "score_completions",
]
