"""One benchmark's review in figures, as `manage.py review_report` prints it (docs/reference/json-contracts.md):

    {"candidates": N, "decided": N,
     "agreement": {"decision": {"kappa": K, "n": N}, "issue_verdicts": {"kappa": K, "n": N}},
     "diagnosis_precision": {"overall": P, "by_component": {component: P}},
     "planted": {"total": N, "caught_by_llm": N, "caught_by_reviewers": N,
                 "by_kind": {kind: {"total": N, "caught_by_llm": N, "caught_by_reviewers": N}}},
     "blocked": {"unsolvable": N, "contaminated": N, "lazy": N}}

- candidates: every candidate of the benchmark, planted copies included (they are in the queue like the others);
  decided: those accepted or rejected;
- agreement: Cohen's kappa over the overlapping candidates and the number of them (review.agreement);
- diagnosis_precision: the valid share of judged issues, overall and per component (review.precision; null where
  no issue was judged);
- planted: review.planting's tallies (an LLM catch names the affected component, a reviewer's is a reject or fix);
- blocked: of the open and accepted candidates, those whose current revision nothing proves solvable
  (review.solvability.proof_for), those whose current revision training data holds (benchmarks.contamination;
  null when that check cannot be made), and those whose checker pays a lazy agent more than the benchmark
  tolerates (the lazy reason of review.services.sanity_block).
"""

from benchmarks.contamination import ContaminationError, contamination_for
from tasks.models import SanityReport

from . import planting, precision, solvability
from .agreement import benchmark_agreement
from .models import BenchmarkCandidate

Status = BenchmarkCandidate.Status


def _kappa(figures: dict) -> dict:
    return {"kappa": figures.get("kappa"), "n": figures.get("n", 0)}


def blocked(benchmark) -> dict:
    """{"unsolvable", "contaminated", "lazy"}: counts over the open and accepted candidates (see the module)."""
    live = BenchmarkCandidate.objects.filter(
        benchmark=benchmark, status__in=[*BenchmarkCandidate.OPEN, Status.ACCEPTED]
    )
    unsolvable = lazy = 0
    revisions = []
    for candidate in live.select_related("task__current_revision"):
        revision = candidate.task.current_revision
        if revision is None:
            unsolvable += 1
            continue
        revisions.append(revision)
        report = SanityReport.latest_for(revision).first()
        if solvability.proof_for(revision, report=report) is None:
            unsolvable += 1
        # The lazy reason of services.sanity_block (solvability.accept_blocks): a lazy agent earns more than the
        # benchmark's tolerance with this checker.
        if report is not None and report.lazy_score > benchmark.lazy_tolerance:
            lazy += 1
    return {"unsolvable": unsolvable, "contaminated": contaminated(revisions), "lazy": lazy}


def contaminated(revisions: list) -> int | None:
    """How many of `revisions` some training data holds, the same or paraphrased (benchmarks.contamination, the
    check freezing runs); None when the check cannot be made (its embedding model cannot be used)."""
    try:
        findings = contamination_for(revisions)
    except ContaminationError:
        return None
    flagged = {(finding.task, finding.revision) for finding in findings}
    return sum((revision.task.external_id, revision.number) in flagged for revision in revisions)


def review_report(benchmark) -> dict:
    """The contract above, for `benchmark`."""
    candidates = BenchmarkCandidate.objects.filter(benchmark=benchmark)
    agreement = benchmark_agreement(benchmark)
    diagnosis = precision.benchmark_precision(benchmark)
    planted = planting.planted_report(benchmark)
    keys = ("total", "caught_by_llm", "caught_by_reviewers")
    return {
        "candidates": candidates.count(),
        "decided": candidates.filter(status__in=[Status.ACCEPTED, Status.REJECTED]).count(),
        "agreement": {
            "decision": _kappa(agreement["decision"]),
            "issue_verdicts": _kappa(agreement["issue_verdicts"]),
        },
        "diagnosis_precision": {
            "overall": diagnosis["overall"]["precision"],
            "by_component": {key: cell["precision"] for key, cell in diagnosis["by_component"].items()},
        },
        "planted": {
            **{key: planted[key] for key in keys},
            "by_kind": {kind: {key: row[key] for key in keys} for kind, row in planted["by_kind"].items()},
        },
        "blocked": blocked(benchmark),
    }
