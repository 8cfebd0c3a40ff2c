from django.utils import timezone

from .models import JobRun


def cancel_job(run: JobRun, *, user) -> JobRun:
    """Cancel a queued job at once; ask a running one to stop at its next progress report."""
    now = timezone.now()
    cancelled_now = JobRun.objects.filter(pk=run.pk, status=JobRun.Status.QUEUED).update(
        status=JobRun.Status.CANCELLED, cancel_requested=True, finished_at=now
    )
    if not cancelled_now:
        JobRun.objects.filter(pk=run.pk, status=JobRun.Status.RUNNING).update(cancel_requested=True)
    run.refresh_from_db()
    return run
