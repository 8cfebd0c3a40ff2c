"""Evaluation runs: a model over a benchmark version's task revisions with repeats, as ordinary rollouts.

A run's life: created with its rollouts queued (one per revision x repeat) -> running -> complete | incomplete
(| cancelled). What moves it on as its rollouts change (their outcome classes, its task rows and counters, retries of
infrastructure failures, handing its next rollouts to the engine, finishing it) is evaluation.services.run_progress;
its figures, JSON, comparisons and the leaderboard are evaluation.reports.
Starting a run with the configuration of an earlier one (same revisions, model, harness, options, limits, repeats)
resumes that one instead: its finished rollouts are kept. A resume with another configuration is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import jobs
from jobs.services import cancel_job

from ..harnesses import HARNESSES, ExitReason, check_options
from ..models import EvalRun, EvalRunTask, Outcome, Rollout
from ..reports import store_summary
from .rollouts import MAX_REPEATS, execute_rollout, fail_lost_rollouts, retry_rollout
from .run_progress import maybe_finish, recompute_run, refresh_task_row, retry_delay, top_up

log = logging.getLogger(__name__)

LIMIT_KEYS = ("timeout", "max_turns", "token_limit")
MAX_TASKS = 20000


class EvalRunError(ValueError):
    """A run cannot be started or resumed as asked; the message says why."""


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
    maybe_finish(run.pk)
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
        # Cancelled is finished: maybe_finish will not finish it again, so its on_finish job is queued here.
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
        refresh_task_row(run.pk, revision_id)
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
    maybe_finish(run.pk)
    run.refresh_from_db()
    return run
