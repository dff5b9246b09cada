"""Evaluation: `run_eval` (pass@k of a model, adapter, endpoint or given samples), the train-set measurement,
samplers, the samples file, pass@k and reports. The face of the evaluation package.
"""

from azr.evaluation.measure import Sampling, generate_completions, score_completions
from azr.evaluation.report import compare_reports, print_comparison
from azr.evaluation.run import EvalConfig, eval_config_from_flags, run_eval

__all__ = [
    "EvalConfig",
    "Sampling",
    "compare_reports",
    "eval_config_from_flags",
    "generate_completions",
    "print_comparison",
    "run_eval",
    "score_completions",
]
