"""Evaluation runs: a model over a benchmark version's task revisions with repeats, as ordinary rollouts.

A run's life: created with its rollouts queued (one per revision x repeat) -> running -> complete | incomplete
(| cancelled). Only so many of its rollouts have a job on the engine at once (jobs.fanout.limit of the sandbox
queue); `top_up` hands the next ones over as those finish, first repeat of every task first. Every state change of
one of its rollouts calls `rollout_changed`, which
1. gives the finished rollout its outcome class (Outcome; every rollout has one, run or not);
2. recomputes the run's row for that task revision from its few rollouts, and moves the run's counters by the
   difference (one small update; `recompute_run` redoes everything exactly);
3. queues the next attempt of a rollout the infrastructure failed, with backoff, while the run's attempt budget
   lasts (never a 0: an infra failure has no score);
4. tops the run's jobs up (`top_up`) when the rollout finished;
5. finishes the run when none of its rollouts is left to run: complete when every repeat has a score, else
   incomplete (the figures name the tasks that lack one), and stores its figures (evaluation.reports builds them).
Starting a run with the configuration of an earlier one (same revisions, model, harness, options, limits, repeats)
resumes that one instead: its finished rollouts are kept. A resume with another configuration is refused.
"""

from __future__ import annotations

import hashlib
import json
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
from jobs.services import cancel_job

from ..figures import run_figures
from ..harnesses import HARNESSES, ExitReason, check_options
from ..job_kinds import ROLLOUT_JOB
from ..models import SCORED_OUTCOMES, EvalRun, EvalRunTask, Outcome, Rollout
from ..reports import store_summary, task_rows
from .rollouts import MAX_REPEATS, RolloutError, execute_rollout, fail_lost_rollouts, retry_rollout
from .scans import scan_finished_run

log = logging.getLogger(__name__)

LIMIT_KEYS = ("timeout", "max_turns", "token_limit")
AGENT_LIMITS = {ExitReason.TIMEOUT, ExitReason.MAX_TURNS, ExitReason.TOKEN_LIMIT}
MAX_TASKS = 20000
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


class EvalRunError(ValueError):
    """A run cannot be started or resumed as asked; the message says why."""


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


# --- starting ------------------------------------------------------------------------------------------------


def run_config(*, revisions, endpoint, harness, options, limits, repeats, benchmark_version=None) -> dict:
    """The settings that make a run what it is, normalised (key order, revision order): equal configs, same run."""
    return {
        "benchmark_version": benchmark_version.pk if benchmark_version is not None else None,
        "revisions": sorted(r.pk for r in revisions),
        "endpoint": endpoint.name,
        "model": endpoint.model,
        "harness": harness,
        "harness_options": json.loads(json.dumps(options or {}, sort_keys=True)),
        "limits": {k: v for k, v in sorted((limits or {}).items())},
        "repeats": repeats,
    }


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def config_differences(old: dict, new: dict) -> list[str]:
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))


def _validate(*, revisions, endpoint, harness, options, limits, repeats, pass_threshold, max_attempts) -> None:
    if harness not in HARNESSES:
        raise EvalRunError(f"unknown harness {harness!r}; known: {', '.join(HARNESSES)}")
    if not revisions:
        raise EvalRunError("the run has no tasks")
    if len(revisions) > MAX_TASKS:
        raise EvalRunError(f"a run takes at most {MAX_TASKS} tasks, got {len(revisions)}")
    if len({r.task_id for r in revisions}) != len(revisions):
        raise EvalRunError("a run takes one revision per task")
    if not 1 <= repeats <= MAX_REPEATS:
        raise EvalRunError(f"repeats must be between 1 and {MAX_REPEATS}, got {repeats}")
    if not endpoint.enabled:
        raise EvalRunError(f"model endpoint {endpoint.name!r} is disabled")
    if not isinstance(options or {}, dict) or not isinstance(limits or {}, dict):
        raise EvalRunError("harness options and limits must be JSON objects")
    clash = sorted(set(options or {}) & set(LIMIT_KEYS))
    if clash:
        raise EvalRunError(f"give {', '.join(clash)} as limits, not as harness options")
    unknown = sorted(set(limits or {}) - set(LIMIT_KEYS))
    if unknown:
        raise EvalRunError(f"unknown limit(s) {', '.join(unknown)}; known: {', '.join(LIMIT_KEYS)}")
    for key, value in (limits or {}).items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise EvalRunError(f"the {key} limit must be a whole number of at least 1, got {value!r}")
    try:
        check_options(harness, {**(options or {}), **(limits or {})})
    except ValueError as exc:
        raise EvalRunError(str(exc)) from None
    if not 0.0 < pass_threshold <= 1.0:
        raise EvalRunError(f"the pass threshold must be in (0, 1], got {pass_threshold!r}")
    if not 1 <= max_attempts <= 20:
        raise EvalRunError(f"max_attempts must be between 1 and 20, got {max_attempts!r}")


def create_eval_run(
    *,
    endpoint,
    revisions=None,
    benchmark_version=None,
    harness: str | None = None,
    repeats: int = 1,
    options: dict | None = None,
    limits: dict | None = None,
    name: str = "",
    pass_threshold: float = 1.0,
    max_attempts: int | None = None,
    user,
    inline: bool = False,
    fresh: bool = False,
    on_finish: str = "",
    on_finish_params: dict | None = None,
) -> tuple[EvalRun, bool]:
    """A run with its task rows and queued rollouts (nothing runs yet), or the earlier run of the same
    configuration (returned with True: resume it to run what is left) unless `fresh`."""
    harness = harness or settings.CLAWGYM_DEFAULT_HARNESS
    if benchmark_version is not None and revisions is None:
        revisions = list(benchmark_version.revisions.select_related("task"))
    revisions = list(revisions or [])
    limits = {k: v for k, v in (limits or {}).items() if v is not None}
    max_attempts = max_attempts or settings.CLAWGYM_EVAL_MAX_ATTEMPTS
    _validate(
        revisions=revisions,
        endpoint=endpoint,
        harness=harness,
        options=options,
        limits=limits,
        repeats=repeats,
        pass_threshold=pass_threshold,
        max_attempts=max_attempts,
    )
    config = run_config(
        revisions=revisions,
        endpoint=endpoint,
        harness=harness,
        options=options,
        limits=limits,
        repeats=repeats,
        benchmark_version=benchmark_version,
    )
    digest = config_hash(config)
    if not fresh:
        earlier = EvalRun.objects.filter(config_hash=digest).order_by("-created_at", "-id").first()
        if earlier is not None:
            return earlier, True
    creator = user if user is not None and user.is_authenticated else None
    rollout_options = {**(options or {}), **limits}
    with transaction.atomic():
        run = EvalRun.objects.create(
            name=name or _default_name(endpoint, benchmark_version, revisions),
            benchmark_version=benchmark_version,
            endpoint=endpoint,
            harness=harness,
            harness_options=options or {},
            repeats=repeats,
            limits=limits,
            pass_threshold=pass_threshold,
            max_attempts=max_attempts,
            config=config,
            config_hash=digest,
            created_by=creator,
            inline=inline,
            on_finish=on_finish,
            on_finish_params=on_finish_params or {},
            rollouts_total=len(revisions) * repeats,
            outcome_counts=Outcome.counts_zero(),
        )
        EvalRunTask.objects.bulk_create(
            EvalRunTask(
                run=run,
                revision=r,
                task_id=r.task_id,
                hybrid=r.has_rubric,
                scores=[None] * repeats,
                outcome_counts=Outcome.counts_zero(),
            )
            for r in revisions
        )
        Rollout.objects.bulk_create(
            Rollout(
                revision=r,
                endpoint=endpoint,
                harness=harness,
                harness_options=rollout_options,
                repeat_index=index,
                group=f"run{run.pk}",
                created_by=creator,
                eval_run=run,
            )
            for r in revisions
            for index in range(repeats)
        )
    log.info("evaluation run %s created: %s rollouts", run.pk, run.rollouts_total)
    return run, False


def _default_name(endpoint, version, revisions) -> str:
    what = str(version) if version is not None else f"{len(revisions)} task(s)"
    return f"{endpoint.name} on {what}"


def start_eval_run(*, user, **settings_) -> tuple[EvalRun, bool]:
    """Create the run (or find the earlier one of the same configuration) and queue what is left to run, one
    job per rollout on the `sandbox` queue, as many at once as `top_up` allows. Returns (run, whether an earlier run
    was resumed)."""
    with transaction.atomic():
        run, reused = create_eval_run(user=user, **settings_)
        if reused:
            if run.inline:  # run by a command's own process before (`evaluate --here`): by the workers from now on
                EvalRun.objects.filter(pk=run.pk).update(inline=False)
                run.inline = False
            resume_eval_run(run, user=user)
        else:
            _begin(run)
            top_up(run.pk)
    return run, reused


def _begin(run: EvalRun) -> None:
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now(), finished_at=None)
    run.refresh_from_db()


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


def resume_eval_run(run: EvalRun, *, user, config: dict | None = None) -> EvalRun:
    """Run again what is left of a run: rollouts that failed, were cancelled, or were queued and lost their job
    (a worker killed mid-run). Finished rollouts are kept. `config` (what the resumer asked for) must equal the
    run's: a resume never changes what a run measures."""
    if config is not None and config_hash(config) != run.config_hash:
        changed = config_differences(run.config, config)
        raise EvalRunError(
            f"run #{run.pk} was started with other settings ({', '.join(changed)} differ); start a "
            "new run (or pass the same settings) instead of resuming it"
        )
    fail_lost_rollouts()
    who = user.get_username() if user is not None and user.is_authenticated else ""
    with transaction.atomic():
        EvalRun.objects.filter(pk=run.pk).update(
            status=EvalRun.Status.RUNNING,
            finished_at=None,
            started_at=run.started_at or timezone.now(),
            resumes=[*run.resumes, {"at": timezone.now().isoformat(), "by": who}],
        )
        run.refresh_from_db()
        for rollout in run.rollouts.filter(status__in=Rollout.RETRYABLE):
            retry_rollout(rollout, user=user, enqueue=False)
        top_up(run.pk)  # queued ones whose job was lost (a worker killed mid-run) are given a new one too
    _maybe_finish(run.pk)
    run.refresh_from_db()
    log.info("evaluation run %s resumed by %s", run.pk, who or "a script")
    return run


def cancel_eval_run(run: EvalRun, *, user) -> EvalRun:
    """Stop a run: its queued rollouts are cancelled (and their jobs); running ones finish and are counted."""
    with transaction.atomic():
        stopped = (
            EvalRun.objects.filter(pk=run.pk)
            .exclude(status__in=EvalRun.FINISHED)
            .update(status=EvalRun.Status.CANCELLED, finished_at=timezone.now())
        )
        # Cancelled is finished: _maybe_finish will not finish it again, so its on_finish job is queued here.
        if stopped and run.on_finish:
            jobs.enqueue(run.on_finish, **run.on_finish_params)
        queued = list(run.rollouts.filter(status=Rollout.Status.QUEUED).select_related("job_run"))
        for rollout in queued:
            if rollout.job_run is not None and not rollout.job_run.is_finished:
                cancel_job(rollout.job_run, user=user)
        Rollout.objects.filter(pk__in=[r.pk for r in queued], status=Rollout.Status.QUEUED).update(
            status=Rollout.Status.CANCELLED, exit_reason=ExitReason.CANCELLED, error="the evaluation run was cancelled"
        )
    for revision_id in {r.revision_id for r in queued}:
        _refresh(run.pk, revision_id)
    store_summary(EvalRun.objects.get(pk=run.pk))
    run.refresh_from_db()
    return run


def set_pass_threshold(run: EvalRun, threshold: float, *, user) -> EvalRun:
    """Change what counts as a pass (pass@k, pass^k, solved tasks): figures only, the config is unchanged."""
    if not 0.0 < threshold <= 1.0:
        raise EvalRunError(f"the pass threshold must be in (0, 1], got {threshold!r}")
    EvalRun.objects.filter(pk=run.pk).update(pass_threshold=threshold)
    run.refresh_from_db()
    return recompute_run(run)


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
    _refresh(row["eval_run_id"], row["revision_id"])
    if outcome == Outcome.INFRA and _retry_infra(rollout_id, row["eval_run_id"]):
        return  # its next attempt took its job's place on the engine
    if row["status"] in Rollout.FINISHED:
        top_up(row["eval_run_id"])
    _maybe_finish(row["eval_run_id"])


def _refresh(run_id: int, revision_id: int) -> None:
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
    try:
        with transaction.atomic():
            # No one asks for this attempt: the run retries by itself (recorded as no one's, as a script's).
            retried = retry_rollout(rollout, user=None, enqueue=False)
            if not run.inline:
                _enqueue(retried, user=None, delay=retry_delay(rollout.attempt))
    except RolloutError:
        return False  # another process retried it first
    log.info(
        "evaluation run %s: rollout %s failed (%s), attempt %s queued",
        run_id,
        rollout_id,
        rollout.exit_reason,
        rollout.attempt + 1,
    )
    return True


def _maybe_finish(run_id: int) -> None:
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


# --- in this process -----------------------------------------------------------------------------------------


def run_here(run: EvalRun, *, on_rollout=None) -> EvalRun:
    """Run the run's queued rollouts one after another in this process (`evaluate --here`), retries included
    (after their backoff), until none is left; the run finishes as it would on the workers."""
    if not run.inline:
        EvalRun.objects.filter(pk=run.pk).update(inline=True)
    if run.status == EvalRun.Status.QUEUED:
        _begin(run)
    while True:
        rollout = (
            run.rollouts.filter(status=Rollout.Status.QUEUED).order_by("attempt", "revision_id", "repeat_index").first()
        )
        if rollout is None or EvalRun.objects.get(pk=run.pk).status == EvalRun.Status.CANCELLED:
            break
        if rollout.attempt:
            time.sleep(retry_delay(rollout.attempt))
        try:
            execute_rollout(rollout.pk)
        except Exception as exc:  # recorded on the rollout (failed, runner_error) and retried like any infra failure
            log.warning("rollout %s: %s: %s", rollout.pk, type(exc).__name__, exc)
        if on_rollout:
            on_rollout(Rollout.objects.get(pk=rollout.pk))
    _maybe_finish(run.pk)
    run.refresh_from_db()
    return run
