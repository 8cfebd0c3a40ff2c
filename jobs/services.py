"""State changes of job runs made by people (starting one is `jobs.enqueue`)."""

from django.utils import timezone

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
    return run
