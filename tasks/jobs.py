"""Background entry points of the task catalog."""

from pathlib import Path

from django.urls import reverse

from jobs.registry import job

from .categorizing import (
    Decisions,
    accept_proposals,
    awaiting_proposal,
    categorizer_endpoint,
    pending_up_to,
    propose_categories,
)
from .importing import import_path, remove_upload
from .job_kinds import ACCEPT_JOB, CATEGORIZE_JOB, IMPORT_JOB, SANITY_BATCH_JOB, SANITY_JOB
from .models import CategoryProposal, SanityReport, Task, TaskRevision
from .sanity import check_revision


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


@job(IMPORT_JOB, title="Import tasks", report="tasks/_import_report.html", subject=_upload_subject)
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
    tried = result["failed_count"] + result["imported"] + result["updated"] + result["unchanged"]
    ctx.items_failed(result["failed_count"], of=tried)
    ctx.log(
        f"imported {result['imported']}, updated {result['updated']}, unchanged {result['unchanged']}, "
        f"failed {result['failed_count']}"
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


def _categorize_subject(params: dict) -> tuple[str, str]:
    ids = params.get("task_ids")
    what = "the uncategorized tasks" if ids is None else f"{len(ids)} task{'' if len(ids) == 1 else 's'}"
    return what, reverse("tasks:categories")


@job(CATEGORIZE_JOB, queue="default", title="Categorize tasks", subject=_categorize_subject)
def categorize(ctx, *, task_ids: list[int] | None = None, endpoint: str | None = None) -> dict:
    """Propose a benchmark category for each task (`task_ids`, or those without a category and without a pending
    proposal), one model call each, stored as CategoryProposals for an admin to decide.

    A second delivery of the same run asks only about the tasks this run has no proposal for yet.
    """
    model = categorizer_endpoint(endpoint)
    proposed = CategoryProposal.objects.filter(job_run=ctx.run)
    done = set(proposed.values_list("task_id", flat=True))
    if task_ids is None:
        tasks = awaiting_proposal()
    else:
        tasks = Task.objects.filter(pk__in=task_ids, current_revision__isnull=False).order_by("external_id")
    todo = [task for task in tasks.only("pk", "external_id") if task.pk not in done]
    total = len(todo) + len(done)
    ctx.log(
        f"asking {model.name} about {len(todo)} task{'' if len(todo) == 1 else 's'}"
        + (f" ({len(done)} asked before)" if done else "")
    )
    ctx.progress(len(done), total, "categorizing")

    def heard(proposal):
        if proposal.status == CategoryProposal.Status.FAILED:
            ctx.log(f"failed: {proposal.task.external_id}: {proposal.error}")
        ctx.progress(ctx.run.progress_done + 1, total, f"{proposal.task.external_id}: {proposal.category or 'failed'}")

    propose_categories(todo, endpoint=model, user=ctx.run.created_by, job_run=ctx.run, on_proposal=heard)
    failed = list(proposed.filter(status=CategoryProposal.Status.FAILED).select_related("task"))
    ctx.items_failed(len(failed), of=proposed.count())
    ctx.log(f"proposed {proposed.count() - len(failed)}, failed {len(failed)}")
    return {
        "proposed": proposed.count() - len(failed),
        "failed": len(failed),
        "failures": [{"task": p.task.external_id, "error": p.error} for p in failed[:20]],
    }


ACCEPT_CHUNK = 100


def _accept_subject(params: dict) -> tuple[str, str]:
    return f"pending proposals up to #{params['up_to_id']}", reverse("tasks:categories")


@job(ACCEPT_JOB, queue="default", title="Accept category proposals", subject=_accept_subject)
def accept_categories(ctx, *, up_to_id: int) -> dict:
    """Accept every proposal pending when an admin clicked "accept all" (the newest then was #up_to_id), as the
    admin who did: each a new revision of its task. Running it again accepts only what is still pending."""
    todo = list(pending_up_to(up_to_id).values_list("pk", flat=True))
    ctx.progress(0, len(todo), "accepting")
    totals = Decisions()
    for start in range(0, len(todo), ACCEPT_CHUNK):
        chunk = CategoryProposal.objects.filter(pk__in=todo[start : start + ACCEPT_CHUNK]).order_by("pk")
        done = accept_proposals(list(chunk), user=ctx.run.created_by)
        for name in ("accepted", "rejected", "skipped", "errors"):
            getattr(totals, name).extend(getattr(done, name))
        for proposal, error in done.errors:
            ctx.log(f"not applied: proposal #{proposal.pk} ({proposal.task.external_id}): {error}")
        ctx.progress(min(start + ACCEPT_CHUNK, len(todo)), len(todo))
    ctx.items_failed(len(totals.errors), of=len(todo))
    ctx.log(
        f"accepted {len(totals.accepted)}, stale {len(totals.rejected)}, skipped {len(totals.skipped)}, "
        f"not applied {len(totals.errors)}"
    )
    result = totals.as_dict()
    return {
        "accepted": len(result["accepted"]),
        "rejected": result["rejected"][:50],
        "skipped": len(result["skipped"]),
        "errors": result["errors"][:50],
    }
