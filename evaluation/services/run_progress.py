"""An evaluation run as its rollouts change: every state change of one of its rollouts calls `rollout_changed`, which
1. gives the rollout its outcome class (Outcome; every rollout has one, run or not);
2. recomputes the run's row for that task revision from its few rollouts, and moves the run's counters by the
   difference (one small update; `recompute_run` redoes everything exactly);
3. queues the next attempt of a rollout the infrastructure failed, with backoff, while the run's attempt budget
   lasts (never a 0: an infra failure has no score);
4. tops the run's jobs up (`top_up`) when the rollout finished;
5. finishes the run when none of its rollouts is left to run: complete when every repeat has a score, else
   incomplete (the figures name the tasks that lack one), and stores its figures.
Only so many of a run's rollouts have a job on the engine at once (jobs.fanout.limit of the sandbox queue); `top_up`
hands the next ones over as those finish, first repeat of every task first.

The rollout services (evaluation.services.rollouts) call `rollout_changed` directly. This module builds on what a
rollout attempt leaves (evaluation.services.results: an infra retry clears it with `requeue`) and on the run's figures
(evaluation.reports), never on the rollout services, so the import goes one way.
"""

from __future__ import annotations

import logging
import time
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import jobs
from jobs import fanout, registry
from jobs.models import JobRun

from ..figures import run_figures
from ..harnesses import ExitReason
from ..job_kinds import ROLLOUT_JOB
from ..models import SCORED_OUTCOMES, EvalRun, EvalRunTask, Outcome, Rollout
from ..reports import store_summary, task_rows
from .results import requeue
from .scans import scan_finished_run

log = logging.getLogger(__name__)

AGENT_LIMITS = {ExitReason.TIMEOUT, ExitReason.MAX_TURNS, ExitReason.TOKEN_LIMIT}
# A run's fields that grow with its tasks (its stored figures hold every task's; its config every revision id: a few
# MB at 20,000 tasks): left out where a rollout's change reads the run, which it does several times per rollout.
LARGE_FIELDS = ("summary", "config")
# What _fill reads of each rollout of a task row.
ROLLOUT_FIGURES = (
    "repeat_index",
    "status",
    "outcome",
    "score",
    "input_tokens",
    "output_tokens",
    "cost",
    "agent_seconds",
)

# --- outcome classes -----------------------------------------------------------------------------------------


def outcome_of(status: str, exit_reason: str) -> str:
    """The outcome class of a rollout in this state ("" while it runs, or when it was cancelled)."""
    if status == Rollout.Status.SCORED:
        if exit_reason == ExitReason.COMPLETED:
            return Outcome.SCORED
        return Outcome.AGENT_LIMIT if exit_reason in AGENT_LIMITS else Outcome.AGENT_ERROR
    if status == Rollout.Status.INCOMPLETE:
        return Outcome.JUDGE_INCOMPLETE
    if status == Rollout.Status.FAILED:
        return Outcome.INFRA
    return ""


# --- on the engine -------------------------------------------------------------------------------------------


def _enqueue(rollout: Rollout, *, user, delay: float = 0.0) -> JobRun:
    params = {"rollout_id": rollout.pk}
    if delay > 0:
        params["not_before"] = time.time() + delay
    job_run = jobs.enqueue(ROLLOUT_JOB, created_by=user, total=1, **params)
    Rollout.objects.filter(pk=rollout.pk).update(job_run=job_run)
    return job_run


def top_up(run_id: int) -> int:
    """Give the run's next queued rollouts a job while fewer than jobs.fanout.limit("sandbox") of them have one
    queued or running; the first repeat of every task goes before the second of any. Returns how many were queued.
    The run's row is locked meanwhile, so two rollouts finishing together do not both fill the same room."""
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().defer(*LARGE_FIELDS).filter(pk=run_id).first()
        if run is None or run.inline or run.status != EvalRun.Status.RUNNING:
            return 0
        rollouts = Rollout.objects.filter(eval_run_id=run_id)
        on_engine = rollouts.filter(
            status__in=(Rollout.Status.QUEUED, Rollout.Status.RUNNING), job_run__status__in=JobRun.ACTIVE
        ).count()
        room = fanout.limit(registry.get(ROLLOUT_JOB).queue) - on_engine
        if room <= 0:
            return 0
        # Queued without a job, or whose job ended without running it (an engine that refused it, a lost worker).
        waiting = rollouts.filter(
            Q(job_run__isnull=True) | Q(job_run__status__in=JobRun.FINISHED), status=Rollout.Status.QUEUED
        )
        batch = list(waiting.order_by("attempt", "repeat_index", "revision_id").only("pk")[:room])
        for rollout in batch:
            _enqueue(rollout, user=run.created_by)
    return len(batch)


def top_up_runs() -> dict:
    """top_up every running run (the periodic evaluation.top_up_runs: what a killed worker left waiting, and room
    that workers joining made). Returns {run id: rollouts queued} for those that got some."""
    queued = {}
    for run_id in EvalRun.objects.filter(status=EvalRun.Status.RUNNING, inline=False).values_list("pk", flat=True):
        try:
            count = top_up(run_id)
        except Exception:  # one run's engine refusing jobs does not stop the others
            log.exception("topping up evaluation run %s failed", run_id)
            continue
        if count:
            queued[run_id] = count
    return queued


# --- as rollouts finish --------------------------------------------------------------------------------------


def rollout_changed(rollout_id: int) -> None:
    """A rollout's state changed (it finished, was retried, rejudged or regraded): keep its outcome, its run's
    figures and its run's life up to date. Never raises: a failure here is logged and `recompute_run` repairs it."""
    try:
        _rollout_changed(rollout_id)
    except Exception:
        log.exception("keeping evaluation figures up to date after rollout %s failed", rollout_id)


def _rollout_changed(rollout_id: int) -> None:
    row = (
        Rollout.objects.filter(pk=rollout_id)
        .values("status", "exit_reason", "outcome", "eval_run_id", "revision_id", "attempt")
        .first()
    )
    if row is None:
        return
    outcome = outcome_of(row["status"], row["exit_reason"])
    if outcome != row["outcome"]:
        Rollout.objects.filter(pk=rollout_id).update(outcome=outcome)
    if row["eval_run_id"] is None:
        return
    refresh_task_row(row["eval_run_id"], row["revision_id"])
    if outcome == Outcome.INFRA and _retry_infra(rollout_id, row["eval_run_id"]):
        return  # its next attempt took its job's place on the engine
    if row["status"] in Rollout.FINISHED:
        top_up(row["eval_run_id"])
    maybe_finish(row["eval_run_id"])


def refresh_task_row(run_id: int, revision_id: int) -> None:
    """Recompute the run's row for one revision from its rollouts and move the run's counters by the change."""
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().defer(*LARGE_FIELDS).get(pk=run_id)
        task_row = EvalRunTask.objects.select_for_update().filter(run_id=run_id, revision_id=revision_id).first()
        if task_row is None:
            return
        rollouts = list(Rollout.objects.filter(eval_run_id=run_id, revision_id=revision_id).values(*ROLLOUT_FIGURES))
        before = _counted(task_row)
        _fill(task_row, rollouts, run)
        task_row.save()
        after = _counted(task_row)
        run.rollouts_finished += after["finished"] - before["finished"]
        run.input_tokens += after["input_tokens"] - before["input_tokens"]
        run.output_tokens += after["output_tokens"] - before["output_tokens"]
        run.cost = Decimal(run.cost) + after["cost"] - before["cost"]
        run.agent_seconds += after["agent_seconds"] - before["agent_seconds"]
        counts = {**Outcome.counts_zero(), **run.outcome_counts}
        for key in Outcome.values:
            counts[key] += after["outcomes"].get(key, 0) - before["outcomes"].get(key, 0)
        run.outcome_counts = counts
        run.save(
            update_fields=[
                "rollouts_finished",
                "input_tokens",
                "output_tokens",
                "cost",
                "agent_seconds",
                "outcome_counts",
            ]
        )


def _counted(task_row: EvalRunTask) -> dict:
    return {
        "finished": task_row.finished,
        "input_tokens": task_row.input_tokens,
        "output_tokens": task_row.output_tokens,
        "cost": Decimal(task_row.cost),
        "agent_seconds": task_row.agent_seconds,
        "outcomes": dict(task_row.outcome_counts or {}),
    }


def _fill(task_row: EvalRunTask, rollouts: list[dict], run: EvalRun) -> None:
    scores: list = [None] * run.repeats
    outcomes = Outcome.counts_zero()
    finished = 0
    totals = {"input_tokens": 0, "output_tokens": 0, "cost": Decimal(0), "agent_seconds": 0.0}
    for r in rollouts:
        if r["status"] in Rollout.FINISHED:
            finished += 1
        if r["outcome"]:
            outcomes[r["outcome"]] += 1
        if r["outcome"] in SCORED_OUTCOMES and r["score"] is not None and r["repeat_index"] < run.repeats:
            scores[r["repeat_index"]] = r["score"]
        if r["status"] in Rollout.FINISHED:
            totals["input_tokens"] += r["input_tokens"] or 0
            totals["output_tokens"] += r["output_tokens"] or 0
            totals["cost"] += Decimal(r["cost"] or 0)
            totals["agent_seconds"] += r["agent_seconds"] or 0.0
    scored = [s for s in scores if s is not None]
    task_row.scores = scores
    task_row.n = len(scored)
    task_row.mean = sum(scored) / len(scored) if scored else None
    task_row.std = _std(scored)
    task_row.min = min(scored) if scored else None
    task_row.max = max(scored) if scored else None
    task_row.passes = sum(1 for s in scored if s >= run.pass_threshold)
    task_row.outcome_counts = outcomes
    task_row.finished = finished
    task_row.input_tokens = totals["input_tokens"]
    task_row.output_tokens = totals["output_tokens"]
    task_row.cost = totals["cost"]
    task_row.agent_seconds = round(totals["agent_seconds"], 3)


def _std(values: list[float]) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return 0.0
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def retry_delay(attempt: int) -> float:
    """Seconds before the next attempt after `attempt` infra-failed ones: exponential, capped."""
    base = settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS
    return min(base * 2 ** max(attempt - 1, 0), settings.CLAWGYM_EVAL_RETRY_BACKOFF_MAX_SECONDS)


def _retry_infra(rollout_id: int, run_id: int) -> bool:
    """Queue the next attempt of a rollout the infrastructure failed, if the run's attempt budget allows."""
    run = EvalRun.objects.defer(*LARGE_FIELDS).get(pk=run_id)
    rollout = Rollout.objects.get(pk=rollout_id)
    if run.status == EvalRun.Status.CANCELLED or rollout.attempt >= run.max_attempts * (1 + len(run.resumes)):
        return False
    exit_reason = rollout.exit_reason  # cleared by requeue
    with transaction.atomic():
        # No one asks for this attempt: the run retries by itself (recorded as no one's, as a script's).
        if not requeue(rollout):
            return False  # another process retried it first
        rollout_changed(rollout.pk)
        if not run.inline:
            _enqueue(rollout, user=None, delay=retry_delay(rollout.attempt))
    log.info(
        "evaluation run %s: rollout %s failed (%s), attempt %s queued",
        run_id,
        rollout_id,
        exit_reason,
        rollout.attempt + 1,
    )
    return True


def maybe_finish(run_id: int) -> None:
    """Finish the run once none of its rollouts is queued or running."""
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().defer(*LARGE_FIELDS).get(pk=run_id)
        if run.status == EvalRun.Status.QUEUED:
            return
        if run.rollouts.exclude(status__in=Rollout.FINISHED).exists():
            return
        unclassed = Q(outcome="") & ~Q(status=Rollout.Status.CANCELLED)  # cancelled is the one finish without a class
        if run.rollouts_finished != run.rollouts.count() or run.rollouts.filter(unclassed).exists():
            # Every rollout has finished, but one that just did is not classed or not in its task's row yet: figures
            # read now would lack its score and call the run incomplete. Its own rollout_changed comes next and
            # finishes the run.
            return
        # A finished run changes too when one of its rollouts is regraded or judged again: its figures and
        # whether it is complete are recomputed, but it does not finish twice.
        finishing = not run.is_finished
        summary = run_figures(task_rows(run), repeats=run.repeats, pass_threshold=run.pass_threshold)
        if run.status != EvalRun.Status.CANCELLED:
            run.status = EvalRun.Status.INCOMPLETE if summary["missing"] else EvalRun.Status.COMPLETE
        run.finished_at = run.finished_at if not finishing else timezone.now()
        run.summary = summary
        run.overall_mean = summary["overall"]["mean"]
        run.save(update_fields=["status", "finished_at", "summary", "overall_mean"])
        if finishing and run.on_finish:
            jobs.enqueue(run.on_finish, **run.on_finish_params)
    if finishing:
        log.info("evaluation run %s finished: %s", run_id, run.status)
        scan_finished_run(run_id)  # what its agents did wrong, read from their transcripts (services.scans)


# --- exactly, from every rollout -----------------------------------------------------------------------------

TASK_ROW_FIGURES = (  # what _fill writes on a task row
    "scores",
    "n",
    "mean",
    "std",
    "min",
    "max",
    "passes",
    "outcome_counts",
    "finished",
    "input_tokens",
    "output_tokens",
    "cost",
    "agent_seconds",
)


def recompute_run(run: EvalRun) -> EvalRun:
    """Redo every figure of the run exactly from its rollouts (outcomes, task rows, counters, summary), in one pass
    over its rollouts: a few queries, then an update per task row whose figures changed."""
    wrong: dict[str, list[int]] = {}  # outcome -> the rollouts that should have it
    for rollout in run.rollouts.values("pk", "status", "exit_reason", "outcome"):
        outcome = outcome_of(rollout["status"], rollout["exit_reason"])
        if outcome != rollout["outcome"]:
            wrong.setdefault(outcome, []).append(rollout["pk"])
    for outcome, ids in wrong.items():
        for start in range(0, len(ids), 500):
            Rollout.objects.filter(pk__in=ids[start : start + 500]).update(outcome=outcome)
    with transaction.atomic():
        run = EvalRun.objects.select_for_update().defer(*LARGE_FIELDS).get(pk=run.pk)
        by_revision: dict[int, list[dict]] = {}
        for row in Rollout.objects.filter(eval_run_id=run.pk).values("revision_id", *ROLLOUT_FIGURES):
            by_revision.setdefault(row.pop("revision_id"), []).append(row)
        task_rows = list(EvalRunTask.objects.filter(run_id=run.pk))
        totals = {"finished": 0, "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0), "agent_seconds": 0.0}
        counts = Outcome.counts_zero()
        for task_row in task_rows:
            before = [getattr(task_row, field) for field in TASK_ROW_FIGURES]
            _fill(task_row, by_revision.get(task_row.revision_id, []), run)
            after = {field: getattr(task_row, field) for field in TASK_ROW_FIGURES}
            if list(after.values()) != before:  # one small update per row that changed (bulk_update's CASE is slower)
                EvalRunTask.objects.filter(pk=task_row.pk).update(**after)
            counted = _counted(task_row)
            for key in totals:
                totals[key] += counted[key]
            for key, n in counted["outcomes"].items():
                counts[key] = counts.get(key, 0) + n
        finished = totals.pop("finished")
        EvalRun.objects.filter(pk=run.pk).update(
            rollouts_total=sum(len(rows) for rows in by_revision.values()),
            rollouts_finished=finished,
            outcome_counts=counts,
            **totals,
        )
    run.refresh_from_db()
    store_summary(run)
    run.refresh_from_db()
    return run
