"""SFT and RL runs: start one from a preset and edits, cancel, resume from the last checkpoint, clone with edits.
What differs by kind (presets, validation, what a run trains on, its job and report) is the kind's
(training_jobs.kinds); these services record the run and queue it.

A run's whole config is stored on it (what the trainer is given, nothing else), so a run page shows exactly what
ran and a clone starts from exactly that. The trainer itself runs in a subprocess a `gpu` job launches
(training_jobs.run_jobs); nothing here imports torch.
"""

import json

from django.db import transaction
from django.utils import timezone

from benchmarks.contamination import ContaminationError, describe
from jobs import enqueue as enqueue_job
from jobs.models import JobRun
from jobs.runner import append_log, log_line, lost_reason
from jobs.services import cancel_job

from ..contamination import run_contamination
from ..kinds import TrainingRunError, get_kind
from ..models import REPORT_TO, BaseModel, Checkpoint, RLRollout, TrainingDataset, TrainingMetric, TrainingRun

# --- state changes ----------------------------------------------------------------------------------------------


def start_training_run(
    *,
    kind: str,
    user,
    base_model: BaseModel | None = None,
    base_model_path: str = "",
    preset: str = "paper",
    overrides: dict | None = None,
    cpu: bool = False,
    report_to: str = "none",
    name: str = "",
    enqueue: bool = True,
    config: dict | None = None,
    cloned_from: TrainingRun | None = None,
    dataset: TrainingDataset | None = None,
    tasks=None,
    mix_tasks=None,
    harness: str = "",
) -> TrainingRun:
    """Record a run of `kind` ("sft" or "rl", training_jobs.kinds; any other name is refused) with its whole config
    and queue it on the `gpu` queue (enqueue=False: the caller runs the job body itself, `train --here`).

    An SFT run trains on `dataset`; an RL run on `tasks` (revisions, tasks, revision ids or external ids), each
    rollout running `harness`, and on `mix_tasks` drawn as the share `mix_share` of every step (training.rl.task_mix).
    The kind refuses what cannot train first (TrainingRunError: for SFT the dataset, the base model's folder, the
    GPUs, the tokens left after the cut to max_length; for RL benchmark tasks, an unknown harness, a mix that cannot
    be drawn); what trains on less than asked is written in the run's log and given back as `run.warnings`.
    `config`: a stored config to start from instead of the preset (a clone). `report_to`: "tensorboard" also writes
    TensorBoard event files under the run's folder ("none": ClawGym's curves only)."""
    if report_to not in REPORT_TO:
        raise TrainingRunError(f"unknown report_to {report_to!r}; choose one of {', '.join(REPORT_TO)}")
    training = get_kind(kind)
    launch = training.prepare(
        base_model=base_model,
        base_model_path=base_model_path,
        preset=preset,
        overrides=overrides,
        cpu=cpu,
        config=config,
        dataset=dataset,
        tasks=tasks,
        mix_tasks=mix_tasks,
        harness=harness,
    )
    fields = launch.fields
    _refuse_contaminated(dataset, fields.get("config", {}).get("tasks") or [])
    with transaction.atomic():
        run = TrainingRun.objects.create(
            **{**fields, "name": (name or fields["name"])[:200]},
            kind=training.name,
            base_model=base_model,
            preset=preset,
            cpu=cpu,
            report_to=report_to,
            created_by=user if user is not None and user.is_authenticated else None,
            cloned_from=cloned_from,
        )
        if enqueue:
            _enqueue(run, user)
    run.warnings = launch.warnings
    return run


def _refuse_contaminated(dataset: TrainingDataset | None, task_revision_ids: list) -> None:
    """No run trains on a task a frozen benchmark version pins, the same or paraphrased (training_jobs.contamination)."""
    try:
        findings = run_contamination(dataset, task_revision_ids)
    except ContaminationError as exc:
        raise TrainingRunError(f"the contamination check could not be made: {exc}") from None
    if findings:
        raise TrainingRunError(f"benchmark tasks are never trained on (contamination): {describe(findings)}")


def _enqueue(run: TrainingRun, user) -> None:
    job_run = enqueue_job(get_kind(run.kind).job, created_by=user, run_id=run.pk)
    TrainingRun.objects.filter(pk=run.pk).update(job_run=job_run)
    run.job_run = job_run


def cancel_training_run(run: TrainingRun, *, user) -> TrainingRun:
    """Cancel a queued run at once; a running one's job kills the trainer's process group within a second (it
    watches the run's status and its JobRun's cancel request). `user`: who cancels (None: the system)."""
    who = user.get_username() if user is not None and user.is_authenticated else "system"
    ended = TrainingRun.objects.filter(pk=run.pk, status__in=[TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING])
    ended.update(status=TrainingRun.Status.CANCELLED, finished_at=timezone.now(), error=f"cancelled by {who}")
    if run.job_run_id:
        cancel_job(run.job_run, user=user)
    run.refresh_from_db()
    return run


def last_checkpoint(run: TrainingRun) -> Checkpoint | None:
    return run.checkpoints.order_by("-step").first()


def rewind_to(run: TrainingRun, checkpoint: Checkpoint | None) -> None:
    """Forget what came after `checkpoint` (the start when None), for an attempt that goes on from it."""
    step = checkpoint.step if checkpoint else 0
    # Metrics past the checkpoint are logged again by the resumed trainer.
    TrainingMetric.objects.filter(run=run, step__gt=step).delete()
    # So are an RL run's rollouts: the steps past the checkpoint are sampled again, by the resumed policy.
    RLRollout.objects.filter(run=run, step__gt=step).delete()
    TrainingRun.objects.filter(pk=run.pk).update(steps=step)


def resume_training_run(run: TrainingRun, *, user, overrides: dict | None = None, enqueue: bool = True) -> TrainingRun:
    """Queue the run's next attempt from its last checkpoint (from the start when it has none).

    A run whose worker was killed still reads "running": it is resumable once its JobRun is finished or lost
    (its worker process gone, or silent past CLAWGYM_JOB_STALE_SECONDS). `overrides` edit the stored config
    (e.g. more max_steps); the edit is written in the run's log."""
    run.refresh_from_db()
    if run.status == TrainingRun.Status.SUCCEEDED and not overrides:
        raise TrainingRunError(f"run #{run.pk} succeeded: nothing to resume (clone it to train again)")
    if run.status in (TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING):
        job = run.job_run
        reason = lost_reason(job) if job else None
        if job and not job.is_finished and not reason:
            raise TrainingRunError(f"run #{run.pk} is {run.status} on job #{job.pk}; cancel it first")
        if job and reason:
            JobRun.objects.filter(pk=job.pk, status=JobRun.Status.RUNNING).update(
                status=JobRun.Status.FAILED,
                finished_at=timezone.now(),
                error=f"Worker lost: {reason}.",
                log_tail=append_log(log_line(f"worker lost: {reason}; the training run is resumed")),
            )
    if overrides:
        training = get_kind(run.kind)
        config = training.build_config(run.preset, overrides, base=run.config)
        training.check_edit(run, config)
    else:
        config = run.config
    checkpoint = last_checkpoint(run)
    note = f"attempt {run.attempt + 1}: resumed from " + (
        f"checkpoint step {checkpoint.step}" if checkpoint else "the start (no checkpoint)"
    )
    if overrides:
        note += f"; config edited: {json.dumps(overrides)}"
    with transaction.atomic():
        rewind_to(run, checkpoint)
        TrainingRun.objects.filter(pk=run.pk).update(
            status=TrainingRun.Status.QUEUED,
            error="",
            finished_at=None,
            resumed_from=checkpoint,
            config=config,
            log_tail=(run.log_tail + note + "\n")[-20000:],
        )
        run.refresh_from_db()
        if enqueue:
            _enqueue(run, user)
    return run


def clone_training_run(run: TrainingRun, overrides: dict | None = None, *, user, enqueue: bool = True) -> TrainingRun:
    """A new run from this one's stored config with edits (same dataset or tasks, and base model)."""
    return start_training_run(
        kind=run.kind,
        **get_kind(run.kind).inputs(run),
        base_model=run.base_model,
        base_model_path=run.base_model_path,
        preset=run.preset,
        overrides=overrides,
        cpu=run.cpu,
        report_to=run.report_to,
        user=user,
        enqueue=enqueue,
        config=run.config,
        cloned_from=run,
        name=f"{run.name} (clone)"[:200],
    )


def run_json(run: TrainingRun) -> dict:
    """The `train --json` shape (the run's kind's report)."""
    run.refresh_from_db()
    return get_kind(run.kind).report(run)
