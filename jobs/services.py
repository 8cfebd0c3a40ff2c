"""State changes of job runs made by people (starting one is `jobs.enqueue`)."""

from django.utils import timezone

from .fanout import release
from .models import JobRun
from .runner import append_log, log_line


def cancel_job(run: JobRun, *, user) -> JobRun:
    """Cancel a queued job at once; ask a running one to stop at its next progress report.

    A finished run is left as it is. Returns the run as it stands afterwards.
    """
    who = user.get_username() if user is not None and user.is_authenticated else "system"
    note = append_log(log_line(f"cancel requested by {who}"))
    cancelled_now = JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
        status=JobRun.Status.CANCELLED, cancel_requested=True, finished_at=timezone.now(), log_tail=note
    )
    if not cancelled_now:
        JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING, cancel_requested=False).update(
            cancel_requested=True, log_tail=note
        )
    run.refresh_from_db()
    if cancelled_now and run.parent_id:  # one child less on the engine: its batch's next one may go
        release(run.parent_id)
    return run


def cancel_children(parent: JobRun, *, user) -> int:
    """Cancel the unfinished children of a batch run: the held ones in one update (none reaches the engine), then
    those queued on it or running, one by one as cancel_job does. Returns how many were cancelled or asked to stop."""
    who = user.get_username() if user is not None and user.is_authenticated else "system"
    children = JobRun.objects.filter(parent=parent)
    count = children.filter(held=True, status=JobRun.Status.QUEUED).update(
        status=JobRun.Status.CANCELLED,
        cancel_requested=True,
        finished_at=timezone.now(),
        log_tail=log_line(f"cancelled by {who} before it was handed to a worker"),
    )
    for run in children.exclude(status__in=JobRun.FINISHED).exclude(cancel_requested=True):
        cancel_job(run, user=user)
        count += 1
    return count
