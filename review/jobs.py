"""Background entry points of the review."""

import jobs
from jobs.models import JobRun
from jobs.registry import job

from .diagnosis import diagnose_candidate
from .models import BenchmarkCandidate, LLMDiagnosis

DIAGNOSE_JOB = "review.diagnose"
DIAGNOSE_BATCH_JOB = "review.diagnose_batch"


@job(DIAGNOSE_JOB, title="Diagnose a benchmark candidate")
def diagnose(ctx, *, candidate_id: int) -> dict:
    """Diagnose one candidate with the "diagnosis" endpoint and store the report.

    A second delivery of the same run, after its diagnosis was stored, returns that one instead of calling again.
    A failed diagnosis fails the run; the reason is also kept on the candidate, which stays awaiting diagnosis.
    """
    done = LLMDiagnosis.objects.filter(job_run=ctx.run).first()
    if done is None:
        candidate = BenchmarkCandidate.objects.select_related("task__current_revision").get(pk=candidate_id)
        ctx.log(f"diagnosing {candidate.task.external_id} r{candidate.task.current_revision.number}")
        done = diagnose_candidate(candidate, job_run=ctx.run)
    else:
        ctx.log("already diagnosed by this run; returning its diagnosis")
    counts = {}
    for severity in done.issues.values_list("severity", flat=True):
        counts[severity] = counts.get(severity, 0) + 1
    ctx.log(f"{sum(counts.values())} issues" + "".join(f", {n} {s}" for s, n in sorted(counts.items())))
    return {"candidate": candidate_id, "diagnosis": done.pk, "issues": counts}


@job(DIAGNOSE_BATCH_JOB, title="Diagnose candidates")
def diagnose_batch(ctx, *, candidate_ids: list[int]) -> dict:
    """Start one review.diagnose per candidate, as children of this run, so they spread across workers.

    Finishes once they are queued (a waiting job would hold a worker its children need); batch_progress() tells
    how far the children are. A second delivery queues only the candidates that have no child yet.
    """
    queued = {child.params.get("candidate_id") for child in JobRun.objects.filter(parent=ctx.run).only("params")}
    todo = [pk for pk in candidate_ids if pk not in queued]
    ctx.progress(0, len(todo), "queueing diagnoses")
    for i, candidate_id in enumerate(todo, start=1):
        jobs.enqueue(DIAGNOSE_JOB, created_by=ctx.run.created_by, parent=ctx.run, candidate_id=candidate_id)
        ctx.progress(i, len(todo))
    ctx.log(f"queued {len(todo)} diagnoses" + (f" ({len(queued)} were queued before)" if queued else ""))
    return {"queued": len(todo) + len(queued)}
