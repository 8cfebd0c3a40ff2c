"""Difficulty filtering: which of a benchmark's candidates are hard enough for a strong agent to be worth keeping
and still tell it apart from a small one.

A filter runs a strong and a small agent endpoint n times on each candidate's current task revision, as two
ordinary evaluation runs (evaluation.services.runs), and once both have finished gives each candidate a verdict from the
two means (each over the repeats that have a score). With the benchmark's thresholds, copied onto the filter when
it starts (strong_min 0.2, small_max 0.6, margin 0 by default), the verdict is the first of these that holds:

    incomplete          one of the agents has no score at all for the candidate (its rollouts failed for
                        infrastructure reasons, or await a judge): nothing is said about its difficulty
    too_hard            strong < strong_min
    too_easy            small > small_max
    not_discriminative  strong <= small + margin
    keep                otherwise: strong >= strong_min, small <= small_max and strong > small + margin

so a candidate that is both too hard and too easy (strong below its minimum, small above its maximum) is too hard,
and "not discriminative" is only said of a candidate that is neither too hard nor too easy.

Each run queues the job `review.difficulty_verdicts` when it finishes; only the call that finds both runs finished
computes the verdicts (`finish_difficulty_filter`, safe to call any number of times). The verdicts are stored as
DifficultyResult rows, and each candidate's difficulty_verdict, strong_mean and small_mean mirror its latest
result. Running the filter again for one candidate (after a fix) is a new filter over that candidate alone.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from accounts.roles import ADMIN, has_role
from benchmarks.models import Benchmark
from evaluation.models import EvalRun, EvalRunTask
from evaluation.services.runs import EvalRunError, cancel_eval_run, create_eval_run, run_here, start_eval_run

from .job_kinds import DIFFICULTY_JOB
from .models import BenchmarkCandidate, DifficultyFilter, DifficultyResult, DifficultyVerdict
from .services import NotAllowed, ReviewError

log = logging.getLogger(__name__)

# Means are compared at this precision: a mean that equals a threshold in exact arithmetic (0.2 from scores of
# 0.25, 0.15 ...) must not fall on the wrong side of it by floating-point noise.
PRECISION = 9
Verdict = DifficultyVerdict


class DifficultyError(ReviewError):
    """The filter cannot be started as asked; the message says why."""


def _require_admin(user, what: str) -> None:
    """`user` None: a trusted script (a management command)."""
    if user is not None and not has_role(user, ADMIN):
        raise NotAllowed(f"{what} needs the {ADMIN} role")


def verdict_for(
    strong: float | None, small: float | None, *, strong_min: float, small_max: float, margin: float = 0.0
) -> str:
    """The verdict of a candidate whose strong and small agents scored these means (None: no score), by the
    precedence in this module's docstring."""
    if strong is None or small is None:
        return Verdict.INCOMPLETE
    strong, small = round(strong, PRECISION), round(small, PRECISION)
    if strong < strong_min:
        return Verdict.TOO_HARD
    if small > small_max:
        return Verdict.TOO_EASY
    if strong <= round(small + margin, PRECISION):
        return Verdict.NOT_DISCRIMINATIVE
    return Verdict.KEEP


# --- thresholds ------------------------------------------------------------------------------------------------


def set_difficulty_thresholds(
    benchmark: Benchmark, *, strong_min: float, small_max: float, margin: float = 0.0, user
) -> Benchmark:
    """Change what the benchmark's next difficulty filters keep (a filter already started keeps its own)."""
    _require_admin(user, "setting a benchmark's difficulty thresholds")
    values = {"difficulty_strong_min": strong_min, "difficulty_small_max": small_max, "difficulty_margin": margin}
    for name, value in values.items():
        value = float(value)
        if not 0.0 <= value <= 1.0:  # NaN fails this too
            raise DifficultyError(f"{name.removeprefix('difficulty_')} must be in [0, 1], not {value:g}")
        values[name] = value
    Benchmark.objects.filter(pk=benchmark.pk).update(**values)
    for name, value in values.items():
        setattr(benchmark, name, value)
    return benchmark


# --- starting --------------------------------------------------------------------------------------------------


def default_candidates(benchmark: Benchmark):
    """What a filter covers unless told otherwise: the open and the accepted candidates (not the rejected)."""
    return benchmark.candidates.exclude(status=BenchmarkCandidate.Status.REJECTED)


def _prepare(benchmark, *, strong, small, n, candidates, harness, user) -> tuple[DifficultyFilter, list]:
    """The filter row (running, thresholds copied) and the candidates' current revisions, checked."""
    _require_admin(user, "running the difficulty filter")
    if strong.pk == small.pk:
        raise DifficultyError("the strong and the small agent must be different model endpoints")
    if candidates is None:
        chosen = default_candidates(benchmark)
    else:
        chosen = BenchmarkCandidate.objects.filter(pk__in=[c.pk for c in candidates])
    chosen = list(chosen.select_related("task__current_revision").order_by("task__external_id"))
    if not chosen:
        raise DifficultyError(f"{benchmark.name} has no candidates to filter")
    strangers = [c.task.external_id for c in chosen if c.benchmark_id != benchmark.pk]
    if strangers:
        raise DifficultyError(f"not candidates of {benchmark.name}: {', '.join(strangers)}")
    revisions = [c.task.current_revision for c in chosen]
    creator = user if user is not None and user.is_authenticated else None
    flt = DifficultyFilter.objects.create(
        benchmark=benchmark,
        strong_endpoint=strong,
        small_endpoint=small,
        n=n,
        harness=harness or "",
        strong_min=benchmark.difficulty_strong_min,
        small_max=benchmark.difficulty_small_max,
        margin=benchmark.difficulty_margin,
        created_by=creator,
    )
    flt.candidates.set(chosen)
    return flt, revisions


def _run_settings(flt: DifficultyFilter, revisions, endpoint, side: str, *, here: bool) -> dict:
    settings_ = {
        "endpoint": endpoint,
        "revisions": revisions,
        "harness": flt.harness or None,
        "repeats": flt.n,
        "name": f"difficulty #{flt.pk} of {flt.benchmark.name}: {side} ({endpoint.name})",
        "fresh": True,
    }
    if here:
        # Run by this process, which finishes the filter itself: no job to queue when the run ends.
        return settings_ | {"inline": True}
    return settings_ | {"on_finish": DIFFICULTY_JOB, "on_finish_params": {"filter_id": flt.pk}}


def _attach(flt: DifficultyFilter, strong_run: EvalRun, small_run: EvalRun) -> DifficultyFilter:
    flt.strong_run, flt.small_run = strong_run, small_run
    flt.harness = strong_run.harness
    flt.save(update_fields=["strong_run", "small_run", "harness"])
    return flt


def start_difficulty_filter(
    benchmark: Benchmark, *, strong, small, n: int = 4, candidates=None, harness=None, user
) -> DifficultyFilter:
    """Start a filter over `candidates` (default: the benchmark's open and accepted ones): two evaluation runs,
    strong and small, of n rollouts per candidate, queued on the workers. `user` None: a trusted script.
    Raises DifficultyError (or NotAllowed) when it cannot start, JobEngineError when the engine refuses the jobs."""
    try:
        with transaction.atomic():
            flt, revisions = _prepare(
                benchmark, strong=strong, small=small, n=n, candidates=candidates, harness=harness, user=user
            )
            strong_run, _ = start_eval_run(user=user, **_run_settings(flt, revisions, strong, "strong", here=False))
            small_run, _ = start_eval_run(user=user, **_run_settings(flt, revisions, small, "small", here=False))
            _attach(flt, strong_run, small_run)
    except EvalRunError as exc:
        raise DifficultyError(str(exc)) from None
    log.info(
        "difficulty filter %s started: %s candidates, runs %s and %s",
        flt.pk,
        len(revisions),
        strong_run.pk,
        small_run.pk,
    )
    return flt


def run_difficulty_filter_here(
    benchmark: Benchmark, *, strong, small, n: int = 4, candidates=None, harness=None, user=None, on_rollout=None
) -> DifficultyFilter:
    """The same filter, its rollouts run one after another in this process (`difficulty_filter --here`), then
    finished. A failure on the way marks the filter failed with the reason (and raises)."""
    try:
        with transaction.atomic():
            flt, revisions = _prepare(
                benchmark, strong=strong, small=small, n=n, candidates=candidates, harness=harness, user=user
            )
            strong_run, _ = create_eval_run(user=user, **_run_settings(flt, revisions, strong, "strong", here=True))
            small_run, _ = create_eval_run(user=user, **_run_settings(flt, revisions, small, "small", here=True))
            _attach(flt, strong_run, small_run)
    except EvalRunError as exc:
        raise DifficultyError(str(exc)) from None
    try:
        for run in (strong_run, small_run):
            run_here(run, on_rollout=on_rollout)
    except BaseException as exc:  # KeyboardInterrupt too: the filter must not look running forever
        _fail(flt, f"stopped while its runs ran here: {type(exc).__name__}: {exc}")
        raise
    return finish_difficulty_filter(flt)


# --- finishing -------------------------------------------------------------------------------------------------


def _fail(flt: DifficultyFilter, reason: str) -> DifficultyFilter:
    DifficultyFilter.objects.filter(pk=flt.pk, status=DifficultyFilter.Status.RUNNING).update(
        status=DifficultyFilter.Status.FAILED, error=reason, finished_at=timezone.now()
    )
    flt.refresh_from_db()
    log.warning("difficulty filter %s failed: %s", flt.pk, reason)
    return flt


def finish_difficulty_filter(flt: DifficultyFilter) -> DifficultyFilter:
    """Give every candidate of the filter its verdict once both runs have finished; before that, and after it was
    done once, nothing happens. A cancelled (or deleted) run fails the filter, and cancels the other run: a
    cancelled run's figures are partial by someone's choice."""
    flt = DifficultyFilter.objects.select_related("strong_run", "small_run").get(pk=flt.pk)
    if flt.status != DifficultyFilter.Status.RUNNING:
        return flt
    if flt.strong_run is None or flt.small_run is None:
        return _fail(flt, "one of its evaluation runs was deleted")
    cancelled = [f"#{r.pk}" for r in flt.runs if r.status == EvalRun.Status.CANCELLED]
    if cancelled:
        # Without one side there is no verdict to give: the other side's rollouts would run for nothing.
        for run in flt.runs:
            if not run.is_finished:
                cancel_eval_run(run, user=None)
        return _fail(flt, f"evaluation run {' and '.join(cancelled)} was cancelled")
    if not (flt.strong_run.is_finished and flt.small_run.is_finished):
        return flt
    with transaction.atomic():
        # The claim: of two calls that both found the runs finished, one gives the verdicts, the other nothing.
        claimed = DifficultyFilter.objects.filter(pk=flt.pk, status=DifficultyFilter.Status.RUNNING).update(
            status=DifficultyFilter.Status.FINISHED, finished_at=timezone.now()
        )
        if not claimed:
            flt.refresh_from_db()
            return flt
        results = _results(flt)
        DifficultyResult.objects.bulk_create(results)
        BenchmarkCandidate.refresh_difficulty(
            BenchmarkCandidate.objects.filter(pk__in=[r.candidate_id for r in results])
        )
    flt.refresh_from_db()
    log.info("difficulty filter %s finished: %s", flt.pk, verdict_counts(flt))
    return flt


def _results(flt: DifficultyFilter) -> list[DifficultyResult]:
    """One result per candidate from the two runs' task rows (a run holds one revision per task)."""
    rows = {
        (row.run_id, row.task_id): row
        for row in EvalRunTask.objects.filter(run_id__in=[flt.strong_run_id, flt.small_run_id]).only(
            "run_id", "task_id", "revision_id", "n", "mean"
        )
    }
    results = []
    for candidate in flt.candidates.select_related("task").order_by("task__external_id"):
        strong = rows.get((flt.strong_run_id, candidate.task_id))
        small = rows.get((flt.small_run_id, candidate.task_id))
        # Both rows pin the revision the filter started with (the task may have been revised since).
        revision_id = (strong or small).revision_id if (strong or small) else candidate.task.current_revision_id
        strong_mean = strong.mean if strong is not None and strong.n else None
        small_mean = small.mean if small is not None and small.n else None
        results.append(
            DifficultyResult(
                filter=flt,
                candidate=candidate,
                revision_id=revision_id,
                strong_mean=strong_mean,
                small_mean=small_mean,
                strong_n=strong.n if strong is not None else 0,
                small_n=small.n if small is not None else 0,
                verdict=verdict_for(
                    strong_mean, small_mean, strong_min=flt.strong_min, small_max=flt.small_max, margin=flt.margin
                ),
            )
        )
    return results


# --- reading ---------------------------------------------------------------------------------------------------


def verdict_counts(flt: DifficultyFilter) -> dict[str, int]:
    """{verdict: candidates}, every verdict present (0 when none)."""
    counts = dict.fromkeys(Verdict.values, 0)
    for verdict in flt.results.values_list("verdict", flat=True):
        counts[verdict] += 1
    return counts


def filter_json(flt: DifficultyFilter) -> dict:
    """The `difficulty_filter --json` shape: {task id: {"strong", "small", "verdict"}} (empty until finished)."""
    results = flt.results.select_related("candidate__task").order_by("candidate__task__external_id")
    return {
        r.candidate.task.external_id: {"strong": r.strong_mean, "small": r.small_mean, "verdict": r.verdict}
        for r in results
    }
