"""Background entry points of the task catalog."""

from pathlib import Path

from django.urls import reverse

from jobs.registry import job

from .importing import import_path, remove_upload
from .models import SanityReport, TaskRevision
from .sanity import SANITY_BATCH_JOB, SANITY_JOB, check_revision


def _upload_subject(params: dict) -> tuple[str, str]:
    return Path(params["upload_path"]).name, ""


def _revision_subject(params: dict) -> tuple[str, str]:
    revision = TaskRevision.objects.select_related("task").filter(pk=params["revision_id"]).first()
    if revision is None:
        return f"revision #{params['revision_id']}", ""
    url = reverse("tasks:detail", args=[revision.task.external_id]) + f"?rev={revision.number}"
    return f"{revision.task.external_id} r{revision.number}", url


def _revisions_subject(params: dict) -> tuple[str, str]:
    n = len(params["revision_ids"])
    return f"{n} revision{'' if n == 1 else 's'}", ""


@job("tasks.import_upload", title="Import tasks", report="tasks/_import_report.html", subject=_upload_subject)
def import_upload(ctx, *, upload_path: str, fmt: str | None = None) -> dict:
    """Import an uploaded folder archive or .jsonl file, then delete the upload (also when it fails).

    The upload is the job's only input, so a second delivery after a finished run fails saying the file
    is gone; running the same upload again imports nothing twice (identical tasks come back unchanged).
    """
    try:
        ctx.log(f"importing {Path(upload_path).name}" + (f" as {fmt}" if fmt else ""))
        report = import_path(
            upload_path,
            fmt=fmt,
            user=ctx.run.created_by,
            progress=lambda done, total: ctx.progress(done, total),
            on_failure=lambda source, error: ctx.log(f"failed: {source}: {error}"),
        )
    finally:
        remove_upload(upload_path)
    result = report.as_dict()
    ctx.items_failed(len(result["failed"]))
    ctx.log(
        f"imported {result['imported']}, updated {result['updated']}, unchanged {result['unchanged']}, "
        f"failed {len(result['failed'])}"
    )
    return result


@job(SANITY_JOB, queue="sandbox", title="Sanity-check a checker", subject=_revision_subject)
def sanity_check(ctx, *, revision_id: int) -> dict:
    """Run the sanity checks of one revision's checker and store its SanityReport (returned as a dict).

    A second delivery of the same run, after its report was stored, returns that report instead of checking again.
    """
    done = SanityReport.objects.filter(job_run=ctx.run).select_related("revision__task").first()
    if done is not None:
        ctx.log("already checked by this run; returning its report")
        return done.as_dict()
    revision = TaskRevision.objects.select_related("task").get(pk=revision_id)
    ctx.log(f"checking the checker of {revision}")
    report = check_revision(revision, job_run=ctx.run, progress=ctx.progress)
    ctx.log(f"{report.verdict}" + "".join(f"\n  {problem}" for problem in report.problems))
    return report.as_dict()


@job(SANITY_BATCH_JOB, title="Sanity-check checkers", subject=_revisions_subject)
def sanity_check_batch(ctx, *, revision_ids: list[int]) -> dict:
    """Start one tasks.sanity_check per revision, as children of this run (JobContext.fan_out)."""
    return {"queued": ctx.fan_out(SANITY_JOB, "revision_id", revision_ids, "sanity checks")}
