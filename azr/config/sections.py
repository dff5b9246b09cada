"""The recipe's sections: one dataclass per section, each field with its default, bounds and `help` string.

A field's `help` is its only documentation: `azr config fields`, `--help` and docs/config.md's table are generated
from it. Reading files, overrides and cross-field checks are `azr.config.load`'s; generic coercion is
`azr.config.schema`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from azr.config.absolute_zero import AbsoluteZeroConfig
from azr.config.feedback import FeedbackConfig, RolloutsConfig
from azr.config.heldout import HeldOutConfig
from azr.config.model import ModelConfig
from azr.config.sampling import CurriculumConfig, SamplingConfig
from azr.config.schema import field
from azr.config.selfplay import SelfPlayConfig, TeacherAssistConfig, TeacherConfig
from azr.config.tools import GenConfig, ToolsConfig
from azr.config.vllm import VllmConfig
from azr.errors import ConfigError

DataFormat = Literal[
    "mbpp",
    "mbpp+",
    "humaneval",
    "humaneval+",
    "apps",
    "livecodebench",
    "code_contests",
    "primeintellect",
    "kodcode",
    "bigcodebench",
]


@dataclass
class DataConfig:
    train: str = field(
        "train",
        "Training tasks: a shipped split ('train', 'held-out', 'basics') or a path to a .jsonl, .json or "
        ".parquet file (relative to the config file).",
    )
    eval: str | None = field("held-out", "Evaluation tasks, same forms as 'train'; null for none.")
    column_map: dict[str, str] = field(
        factory=dict,
        help="Task field -> column in the training file, e.g. {prompt: text, solution: code, tests: test_list} "
        "for MBPP-style data; unmapped columns are ignored.",
    )
    eval_column_map: dict[str, str] = field(factory=dict, help="Like column_map, for the evaluation file.")
    format: DataFormat | None = field(
        None,
        "The training file's own row shape, read without a column map: mbpp (MBPP and sanitized MBPP), mbpp+ and "
        "humaneval+ (EvalPlus), humaneval, apps (APPS/TACO), livecodebench, code_contests, primeintellect, kodcode "
        "or bigcodebench (docs/data.md); null for azr's own fields or column_map.",
    )
    eval_format: DataFormat | None = field(None, "Like format, for the evaluation file.")
    compare: Literal["lines", "tokens"] = field(
        "lines",
        "How stdin/stdout outputs are compared where a task does not say: 'lines' ignores trailing whitespace of "
        "each line and of the whole, as judges do; 'tokens' compares whitespace-separated tokens.",
    )
    float_tol: float | None = field(
        None,
        "Numeric tokens of stdin/stdout outputs may differ by this much (absolutely or relatively; implies "
        "'tokens') where a task does not say; null for exact tokens.",
        ge=0,
    )
    max_tasks: int | None = field(
        None, "Use at most this many training tasks (after shuffling); null for all.", gt=0, le=10_000_000
    )
    shuffle: bool = field(True, "Shuffle the training tasks with the run's seed.")
    public_tests: int | None = field(
        None,
        "How many of each task's leading tests are public (shown as execution feedback; the rest are hidden and "
        "score), for the training and evaluation tasks alike, over what the data set's format or the task's own "
        "public_tests says; null keeps those (a task that says nothing: 1).",
        ge=0,
        le=1_000_000,
    )
    max_solution_tokens: int | None = field(
        None,
        "Keep only training tasks whose reference answer fits in this many policy tokens (before max_tasks); "
        "null keeps all. For small models with short completion budgets.",
        gt=0,
        le=1 << 20,
    )
    audit: str | None = field(
        None,
        "An audit.jsonl written by `azr data audit TRAIN --out DIR` (relative to the config file): its figures go "
        "into summary.json and the report, and data.min_kill_rate reads it; null for none.",
    )
    min_kill_rate: float | None = field(
        None,
        "Drop training tasks whose tests are too weak: a kill rate under this in data.audit, or a probe that passed "
        "(tasks without a record or a kill rate are kept); null keeps all. Needs data.audit.",
        ge=0,
        le=1,
    )
    hardened: str | None = field(
        None,
        "A task file written by `azr data audit TRAIN --harden FILE` (azr's own format, relative to the config file): "
        "in GRPO, an answer that passes every test of a weak task (see data.hardened_kill_rate) is also graded on the "
        "cases the file adds to that task, never changing its reward; one that fails any is a `reward_hacking` alarm "
        "record. Needs data.audit; null for none.",
    )
    hardened_kill_rate: float = field(
        1.0,
        "Tasks whose kill rate in data.audit is under this (or with a probe passed) count as weak for data.hardened. "
        "1.0: every task with a surviving mutant, which is every task `--harden` can add cases to.",
        gt=0,
        le=1,
    )
    hardened_max_checks: int = field(
        32,
        "At most this many distinct answers are graded on data.hardened's cases per scored batch (the rest are "
        "skipped and counted in `hardened/skipped`): the check runs in the trainer's sandbox pool during the step, "
        "so this bounds what it adds to a step, about one test program per answer.",
        gt=0,
        le=4096,
    )


@dataclass
class RemoteSandboxConfig:
    urls: list[str] = field(
        factory=list,
        help="Sandbox servers (http://host:port) that grade when sandbox.provider is 'remote'; requests go to the "
        "healthy ones in turn and fail over to the next.",
    )
    api: Literal["azr", "sandboxfusion"] = field(
        "azr",
        "What the servers speak: 'azr' (azr sandbox serve: azr's own limits, statuses and report channel) or "
        "'sandboxfusion' (SandboxFusion's POST /run_code; the report travels on stdout between nonce tags).",
    )
    token_env: str | None = field(
        None,
        "Name of the environment variable holding the servers' token, sent as 'Authorization: Bearer'; null for "
        "none. The token itself never goes in a recipe.",
    )
    concurrency: int = field(
        16, "Programs in flight at once, over all servers (each one program with all its tests).", gt=0, le=4096
    )
    batch_size: int = field(
        8,
        "Programs per request to azr sandbox serve (api 'azr': POST /run_batch, one HTTP round trip for many, each "
        "program run and timed on its own); requests in flight are concurrency // batch_size, at least one. 1: one "
        "program a request. SandboxFusion's /run_code, and an azr server without /run_batch, take one a request.",
        gt=0,
        le=256,
    )
    timeout_s: float = field(
        30.0,
        "Time a request may take beyond its program's own wall-clock limit before it is retried elsewhere.",
        gt=0,
        le=3600,
    )
    queue_timeout_s: float = field(
        300.0,
        "Time a request may wait in a server's queue for a free worker, on top of timeout_s: a program's own time "
        "starts when it runs, so one that overruns is a timeout however long it queued; past this the request is "
        "dropped (azr sandbox serve never runs an abandoned one) and retried elsewhere.",
        gt=0,
        le=86400,
    )
    retries: int = field(
        3,
        "Further attempts per program after a timeout, a 5xx or a lost connection, each on another server.",
        ge=0,
        le=100,
    )
    backoff_s: float = field(0.5, "Wait before the first retry; doubled after each further one.", ge=0, le=60)
    down_after: int = field(
        3,
        "Consecutive failures after which a server is marked down and left alone until its next probe.",
        gt=0,
        le=1000,
    )
    probe_interval_s: float = field(
        15.0, "Seconds a server marked down waits before one request probes it again.", gt=0, le=3600
    )

    def __post_init__(self):
        for i, url in enumerate(self.urls):
            scheme, sep, rest = str(url).partition("://")
            if scheme not in ("http", "https") or not sep or not rest.strip("/"):
                raise ConfigError(f"sandbox.remote.urls[{i}]: expected http://host:port, got {url!r}")
        if self.token_env is not None and not self.token_env.replace("_", "").isalnum():
            raise ConfigError(
                f"sandbox.remote.token_env: expected an environment variable's name, got {self.token_env!r}"
            )


@dataclass
class SandboxConfig:
    provider: Literal["local", "remote"] = field(
        "local",
        "Where programs run: 'local' (this machine's sandbox pool) or 'remote' (the servers in sandbox.remote).",
    )
    remote: RemoteSandboxConfig = field(
        factory=RemoteSandboxConfig, help="Sandbox servers, used when sandbox.provider is 'remote'."
    )
    backend: Literal["auto", "bwrap", "nsjail", "process"] = field(
        "auto",
        "Isolation for model code: 'auto' picks the strongest that works (bwrap, then nsjail); 'process' has "
        "no namespaces and is used only when chosen or when nothing else works.",
    )
    workers: int | None = field(
        None,
        "Sandbox worker processes on this machine, shared by its training ranks; null for one per CPU core.",
        gt=0,
        le=1024,
    )
    timeout_s: float = field(
        5.0, "Default wall-clock limit for one program with its tests (a task may set its own).", gt=0, le=3600
    )
    memory_mb: int = field(
        512, "Default address-space limit for one program, in MiB (a task may set its own).", gt=0, le=1 << 20
    )
    max_task_timeout_s: float = field(
        60.0,
        "Ceiling on a task's own timeout_s: a task file asking for more is refused (raise it here).",
        gt=0,
        le=3600,
    )
    max_task_memory_mb: int = field(
        4096,
        "Ceiling on a task's own memory_mb: a task file asking for more is refused (raise it here).",
        gt=0,
        le=1 << 20,
    )
    max_output_kb: int = field(64, "Cap on captured stdout and stderr, each, in KiB.", gt=0, le=1 << 20)
    processes: int = field(32, "Most processes and threads one program may run at once.", gt=0, le=4096)
    open_files: int = field(64, "Most file descriptors one program may hold open.", gt=0, le=65_536)
    file_size_mb: int = field(16, "Largest file one program may write, in MiB.", gt=0, le=1 << 20)
    tmp_size_mb: int = field(256, "Size of each worker's private /tmp (bwrap, nsjail), in MiB.", gt=0, le=1 << 20)
    packages: list[str] = field(
        factory=list,
        help="Installed packages programs may import (e.g. [numpy]), with the packages they require: bound "
        "read-only into the sandbox, and nothing else of this environment. Empty: the standard library alone.",
    )
    max_infra_failure_rate: float = field(
        0.05,
        "Stop the run when more than this fraction of a step's executions fail for infrastructure reasons.",
        ge=0,
        le=1,
    )

    def __post_init__(self):
        if self.provider == "remote" and not self.remote.urls:
            raise ConfigError("sandbox.remote.urls: sandbox.provider 'remote' needs at least one server URL")


@dataclass
class RewardSpec:
    name: str = field(
        "", "Reward function: a registered name (e.g. 'tests', 'format') or a dotted path 'pkg.mod:func'."
    )
    weight: float = field(1.0, "Weight of this reward in the weighted sum.")
    params: dict[str, Any] = field(factory=dict, help="Keyword arguments for a parametrised reward.")


def _default_rewards() -> list[RewardSpec]:
    return [RewardSpec("tests", 1.0), RewardSpec("format", 0.1)]


@dataclass
class ThinkingConfig:
    policy: bool = field(False, "Let the policy think: passes enable_thinking to its chat template.")
    policy_budget_tokens: int = field(
        0, "Tokens added to the completion length for the policy's thinking.", ge=0, le=1 << 20
    )
    opponent: bool = field(False, "Ask the opponent to reason before answering (where its API supports it).")
    opponent_budget_tokens: int = field(0, "Tokens added to the opponent's max_tokens for reasoning.", ge=0, le=1 << 20)
    teacher: bool = field(False, "Ask the teacher to reason before answering (where its API supports it).")
    teacher_budget_tokens: int = field(0, "Tokens added to the teacher's max_tokens for reasoning.", ge=0, le=1 << 20)


@dataclass
class SftConfig:
    enabled: bool = field(
        False,
        "Warm start: supervised fine-tuning on the training tasks' reference answers before GRPO (the same "
        "adapter, or all weights, then continues under GRPO).",
    )
    args: dict[str, Any] = field(
        factory=dict, help="Any trl.SFTConfig field (num_train_epochs, learning_rate, ...), passed through."
    )
    near_misses: int = field(
        0,
        "Per task, this many variants of the reference answer with one operator, keyword or constant changed, each "
        "checked to fail the tests, are learned beside it: a policy that knows the answer's shape but not which way "
        "a few decisions go, for GRPO to sharpen (the tiny demo's weak base model). 0 for real models.",
        ge=0,
        le=10_000,
    )
    rollouts: str | None = field(
        None,
        "Train on episodes from this `azr gen` file instead of the reference answers: multi-turn rows with loss on "
        "the assistant turns only (prompts, tool results and feedback are never trained). With rollouts.env "
        "'feedback', feedback episodes, trained from the token ids they were sampled on.",
    )
    rollouts_filter: Literal["passed", "all"] = field(
        "passed", "Which episodes of sft.rollouts are trained on: those whose answer passed its tests, or all."
    )
    full_weights: bool = field(
        False,
        "Train all weights in the warm start although model.adapter names an adapter; GRPO then trains a fresh "
        "model.adapter on the warm-started weights, which become its base (vllm.mode adapter serves them as the "
        "base model, its server started after the warm start). For a base model too weak for an adapter alone to "
        "warm-start (the tiny random-init demo), or to keep RL's updates in an adapter on a fine-tuned base. Needs "
        "an unquantized model (model.quantization none) loaded by the hf backend.",
    )


@dataclass
class LoggingConfig:
    level: Literal["debug", "info", "warning", "error"] = field("info", "Console log level.")
    generations: bool = field(True, "Write prompts, completions and per-test outcomes to generations/*.jsonl.")
    generations_max_mb: float = field(64.0, "Rotate a generations file once it reaches this size.", gt=0, le=1 << 20)
    console: Literal["rich", "plain"] = field("rich", "Progress bar and summary table ('rich') or plain log lines.")
    pass_rate_tasks: int = field(
        64,
        "Training tasks sampled before and after GRPO to measure the train pass rate; 0 skips it.",
        ge=0,
        le=10_000_000,
    )
    pass_rate_samples: int = field(4, "Completions per task for that measurement.", gt=0, le=1024)


@dataclass
class AzrConfig:
    output_dir: str = field(
        "runs/azr",
        "Where the run writes config, logs, checkpoints and the final adapter; relative to the recipe when set "
        "there, else to the current directory. New, empty, or an azr run (its .azr-run marker): a folder of other "
        "files, / and kernel file systems are refused.",
    )
    seed: int = field(
        42, "Seed for data shuffling, sampling and TRL (grpo.seed is set from it); numpy's range.", ge=0, le=2**32 - 1
    )
    mode: Literal["grpo", "absolute_zero"] = field(
        "grpo",
        "What GRPO trains on: 'grpo' solves the coding tasks of data.train against their tests; 'absolute_zero' "
        "proposes and solves its own code-reasoning tasks (section absolute_zero), data.train only seeding them.",
    )
    model: ModelConfig = field(factory=ModelConfig, help="Policy model.")
    grpo: dict[str, Any] = field(factory=dict, help="Any trl.GRPOConfig field, passed through untouched.")
    sft: SftConfig = field(factory=SftConfig, help="Optional supervised warm start before GRPO.")
    data: DataConfig = field(factory=DataConfig, help="Task datasets.")
    sandbox: SandboxConfig = field(factory=SandboxConfig, help="Execution of model code.")
    rewards: list[RewardSpec] = field(
        factory=_default_rewards,
        help=(
            "Reward functions and their weights: the one weigher. GRPO's advantages and logged reward, the pass rate, "
            "held-out evaluation and azr gen all sum rewards[i].weight x value (grpo.reward_weights is refused)."
        ),
    )
    reward_control: Literal["none", "shuffle"] = field(
        "none",
        "The control arm of a learning claim: 'shuffle' trains GRPO on the rewards permuted within each batch (each "
        "completion paid another one's reward: the same mean and spread, no link to what it wrote); the logged pass "
        "rate and every evaluation stay real. 'none' trains on the rewards.",
    )
    answer_format: Literal["strict", "relaxed"] = field(
        "strict",
        "How answers are read: 'strict' runs code only from exactly one python block followed by a 'Final answer:' "
        "line; 'relaxed' runs the last fenced block that defines a function or class (else the last block).",
    )
    self_play: SelfPlayConfig = field(factory=SelfPlayConfig, help="Remote opponent on the same tasks.")
    teacher: TeacherConfig = field(factory=TeacherConfig, help="Stronger remote model that gives hints.")
    teacher_assist: TeacherAssistConfig = field(factory=TeacherAssistConfig, help="When and how the teacher helps.")
    sampling: SamplingConfig = field(factory=SamplingConfig, help="Which generated groups train: dynamic sampling.")
    curriculum: CurriculumConfig = field(
        factory=CurriculumConfig, help="Which tasks enter a batch: per-task statistics, frontier replay."
    )
    rollouts: RolloutsConfig = field(factory=RolloutsConfig, help="The environment GRPO's episodes run in.")
    feedback: FeedbackConfig = field(
        factory=FeedbackConfig, help="Execution feedback: rollouts.env 'feedback' and `azr eval --turns`."
    )
    thinking: ThinkingConfig = field(factory=ThinkingConfig, help="Reasoning switches and budgets.")
    vllm: VllmConfig = field(factory=VllmConfig, help="Generation through vLLM (GRPO, `azr eval --vllm`).")
    tools: ToolsConfig = field(factory=ToolsConfig, help="Tools the model may call (azr gen; GRPO with tools).")
    gen: GenConfig = field(
        factory=GenConfig, help="Episodes for SFT (azr gen): tool-using, or execution feedback (rollouts.env)."
    )
    logging: LoggingConfig = field(factory=LoggingConfig, help="Logs and console output.")
    eval: HeldOutConfig = field(factory=HeldOutConfig, help="Held-out evaluation during GRPO.")
    absolute_zero: AbsoluteZeroConfig = field(
        factory=AbsoluteZeroConfig, help="The propose/solve mode (mode: absolute_zero)."
    )

    def template_kwargs(self) -> dict[str, Any]:
        """The chat template's arguments for the policy's prompts: grpo.chat_template_kwargs with the thinking
        switch; the same in training, the pass-rate measure, evaluation and azr gen."""
        return {**self.grpo.get("chat_template_kwargs", {}), "enable_thinking": self.thinking.policy}
