"""The evaluation report: `report.json` built from the sample records, the console table, and `--compare` of two
reports with a paired bootstrap over their shared problems.

The report keeps per-problem counts (samples graded n, correct c), so any pass@k with k <= n can be recomputed and
two runs compared problem by problem; a report without them is completed from the `samples.jsonl` beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azr.data import Problem
from azr.errors import DataError
from azr.evaluation.passk import Difference, mean_pass_at_k, paired_bootstrap, pass_at_k
from azr.evaluation.samples import RETRIED, SAMPLES_FILE
from azr.inputs import load_json
from azr.logs import read_jsonl_records


def build_report(
    settings: dict[str, Any],
    ks: Sequence[int],
    problems: Sequence[Problem],
    records: Sequence[dict[str, Any]],
    timings: dict[str, float],
    resumed: int,
) -> dict[str, Any]:
    """pass@k (mean over problems), per tag, counts by status and timings, with the per-problem counts."""
    from azr import __version__

    per_problem = problem_counts(records, [p.id for p in problems])
    for p in problems:
        per_problem[p.id]["tags"] = p.task.tags
    counts = {pid: (v["n"], v["c"]) for pid, v in per_problem.items()}
    means = {k: mean_pass_at_k(counts, k) for k in ks}
    by_tag = {}
    for tag in sorted({t for p in problems for t in p.task.tags}):
        tagged = {p.id: counts[p.id] for p in problems if tag in p.task.tags}
        by_tag[tag] = {"problems": len(tagged), **{f"pass@{k}": mean_pass_at_k(tagged, k).value for k in ks}}
    statuses = Counter(r["status"] for r in records)
    graded = sum(v for s, v in statuses.items() if s not in RETRIED)
    generated = timings.get("generation_s", 0.0)
    source = "samples" if "samples" in settings else "endpoint" if "endpoint" in settings else "model"
    return {
        "azr_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": settings["dataset"],
        "problems": len(problems),
        "source": source,
        "settings": settings,
        "ks": list(ks),
        "pass_at_k": {f"pass@{k}": m.value for k, m in means.items()},
        "problems_counted": {f"pass@{k}": m.problems for k, m in means.items()},
        "tests_passed": _mean_fraction(per_problem),
        "by_tag": by_tag,
        "counts": {
            "samples": len(records),
            "graded": graded,
            "passed": statuses.get("passed", 0),
            "not_graded": len(records) - graded,
            "request_failed": statuses.get("request_failed", 0),
            "sandbox_error": statuses.get("error", 0),
            "by_status": dict(sorted(statuses.items())),
            "resumed": resumed,
        },
        "timings": {
            **{k: round(v, 3) for k, v in timings.items()},
            "samples_per_s_generated": round(len(records) / generated, 2) if generated else None,
        },
        "per_problem": per_problem,
        "samples_file": SAMPLES_FILE,
    }


def _mean_fraction(per_problem: dict[str, dict[str, Any]]) -> float | None:
    """The mean over problems (each the mean over its graded samples) of the fraction of tests passed."""
    fractions = [v["tests"] / v["n"] for v in per_problem.values() if v["n"]]
    return round(sum(fractions) / len(fractions), 6) if fractions else None


def problem_counts(records: Sequence[dict[str, Any]], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{problem: {n: graded samples, c: correct ones, tests: the sum over graded samples of the fraction of tests
    each passed, samples: all records}}; ungraded samples are not in n."""
    out: dict[str, dict[str, Any]] = {pid: {"n": 0, "c": 0, "tests": 0.0, "samples": 0} for pid in ids}
    for r in records:
        entry = out.setdefault(r["task_id"], {"n": 0, "c": 0, "tests": 0.0, "samples": 0})
        entry["samples"] += 1
        if r.get("status") not in RETRIED:
            entry["n"] += 1
            entry["c"] += bool(r.get("passed"))
            entry["tests"] += test_fraction(r)
    return out


def test_fraction(record: dict[str, Any]) -> float:
    """The fraction of its tests a graded sample passed (1.0 or 0.0 for a task graded as one check)."""
    total = record.get("tests_total") or 0
    if isinstance(total, int) and total > 0 and isinstance(record.get("tests_passed"), int):
        return min(record["tests_passed"], total) / total
    return float(bool(record.get("passed")))


def print_report(report: dict[str, Any], out: Path, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"{report['dataset']}: {report['problems']} problems ({report['source']})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("problems", justify="right")
    for name, value in report["pass_at_k"].items():
        table.add_row(name, _show(value), str(report["problems_counted"][name]))
    if report.get("tests_passed") is not None:
        table.add_row("tests passed (mean fraction)", _show(report["tests_passed"]), str(report["problems"]))
    tags = report["by_tag"]
    if 1 < len(tags) <= 20:  # one tag per dataset (humaneval) says nothing the first rows do not
        for tag, row in tags.items():
            first = next(iter(report["pass_at_k"]))
            table.add_row(escape(f"  {first} [{tag}]"), _show(row[first]), str(row["problems"]))
    console.print(table)
    if "turns" in report:
        console.print(turns_table(report["turns"]))
    counts = report["counts"]
    statuses = ", ".join(f"{s} {n}" for s, n in counts["by_status"].items())
    console.print(f"samples: {counts['samples']} ({statuses}); resumed {counts['resumed']}")
    if counts["not_graded"]:
        console.print(
            f"[yellow]{counts['request_failed']} failed requests and {counts['sandbox_error']} sandbox errors are "
            "not in the rates; run again with the same --output-dir to retry them[/yellow]"
        )
    t = report["timings"]
    console.print(f"time: {t['total_s']:.1f} s (generation {t['generation_s']:.1f} s, grading {t['grading_s']:.1f} s)")
    console.print(f"written: {out / 'report.json'}, {out / SAMPLES_FILE}")


def turns_table(turns: dict[str, Any]):
    """Per turn of execution feedback: pass@1 on the hidden tests, samples still going, share of turn-1 failures
    repaired by then."""
    from rich.table import Table

    skipped = turns.get("skipped_without_hidden_tests", 0)
    title = f"execution feedback: pass@1 on the hidden tests after each turn ({turns['samples']} samples"
    table = Table(title=title + (f"; {skipped} tasks without hidden tests skipped)" if skipped else ")"))
    for name in ("turn", "pass@1", "attempted", "turn-1 failures repaired"):
        table.add_column(name, justify="right")
    for row in turns["by_turn"]:
        repaired = "" if row["repaired"] is None else f"{row['repaired']:.4f} of {turns['turn_1_failures']}"
        table.add_row(str(row["turn"]), _show(row["pass@1"]), str(row["samples_attempted"]), repaired)
    return table


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def load_counts(path: Path) -> tuple[dict[str, Any], dict[str, tuple[int, int, float | None]]]:
    """A report and its per-problem (n, c, sum of test fractions or None in a report older than that count), from
    the report or else from the samples.jsonl beside it."""
    try:
        report = load_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: report not found") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable JSON report: {exc}") from None
    if not isinstance(report, dict) or "pass_at_k" not in report:
        raise DataError(f"{path}: not an azr eval report (no 'pass_at_k')")
    per = report.get("per_problem")
    if per is None:
        samples = Path(path).parent / SAMPLES_FILE
        if not samples.is_file():
            raise DataError(f"{path}: has no per-problem results and there is no {SAMPLES_FILE} beside it")
        per = problem_counts(read_jsonl_records(samples), [])
    return report, {pid: (int(v["n"]), int(v["c"]), _number(v.get("tests"))) for pid, v in per.items()}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compare_reports(a: Path, b: Path, resamples: int = 10_000, seed: int = 0) -> list[tuple[str, Difference]]:
    """Per pass@k (k in either report): B - A over the problems both graded with at least k samples, and a 95%
    paired-bootstrap interval; then the same for the mean fraction of tests passed (`tests passed`) where both
    reports count it."""
    report_a, counts_a = load_counts(a)
    report_b, counts_b = load_counts(b)
    shared = sorted(set(counts_a) & set(counts_b))
    if not shared:
        raise DataError(f"{a} and {b}: no problems in common")
    ks = sorted({*report_a.get("ks", []), *report_b.get("ks", [])})
    rows = []
    for k in ks:
        ids = [pid for pid in shared if counts_a[pid][0] >= k and counts_b[pid][0] >= k]
        if ids:
            scores_a = [pass_at_k(*counts_a[pid][:2], k) for pid in ids]
            scores_b = [pass_at_k(*counts_b[pid][:2], k) for pid in ids]
            rows.append((f"pass@{k}", paired_bootstrap(scores_a, scores_b, resamples, seed=seed)))
    ids = [pid for pid in shared if all(c[pid][0] and c[pid][2] is not None for c in (counts_a, counts_b))]
    if ids:
        fractions_a = [counts_a[pid][2] / counts_a[pid][0] for pid in ids]  # type: ignore[operator]
        fractions_b = [counts_b[pid][2] / counts_b[pid][0] for pid in ids]  # type: ignore[operator]
        rows.append(("tests passed", paired_bootstrap(fractions_a, fractions_b, resamples, seed=seed)))
    return rows


def print_comparison(a: Path, b: Path, rows: list[tuple[str, Difference]], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"A = {a}\nB = {b}")
    for name in ("metric", "A", "B", "B - A", "95% CI", "problems"):
        table.add_column(name, justify="left" if name == "metric" else "right")
    for name, d in rows:
        interval = f"[{d.low:+.4f}, {d.high:+.4f}]"
        table.add_row(name, f"{d.a:.4f}", f"{d.b:.4f}", f"{d.delta:+.4f}", interval, str(d.problems))
    console.print(table)
    if not rows:
        console.print("no pass@k with enough samples on both sides to compare")
