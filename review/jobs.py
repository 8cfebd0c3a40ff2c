"""Background entry points of the review."""

from django.urls import reverse

from jobs.registry import job

from .diagnosis import diagnose_candidate
from .difficulty import finish_difficulty_filter, verdict_counts
from .job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB, DIFFICULTY_JOB, EXPIRE_CLAIMS_JOB, SOLVE_JOB
from .models import BenchmarkCandidate, DifficultyFilter, LLMDiagnosis
from .services import expire_claims as hand_back
from .solving import run_solve


def _candidate_subject(params: dict) -> tuple[str, str]:
    candidate = BenchmarkCandidate.objects.select_related("task", "benchmark").filter(pk=params["candidate_id"]).first()
    if candidate is None:
        return f"candidate #{params['candidate_id']}", ""
    url = reverse("review:candidate", args=[candidate.pk])
    return f"{candidate.task.external_id} for {candidate.benchmark.name}", url


def _candidates_subject(params: dict) -> tuple[str, str]:
    n = len(params["candidate_ids"])
    return f"{n} candidate{'' if n == 1 else 's'}", ""


@job(DIAGNOSE_JOB, title="Diagnose a benchmark candidate", subject=_candidate_subject)
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


@job(DIAGNOSE_BATCH_JOB, title="Diagnose candidates", subject=_candidates_subject)
def diagnose_batch(ctx, *, candidate_ids: list[int]) -> dict:
    """Start one review.diagnose per candidate, as children of this run (JobContext.fan_out)."""
    return {"queued": ctx.fan_out(DIAGNOSE_JOB, "candidate_id", candidate_ids, "diagnoses")}


def _filter_subject(params: dict) -> tuple[str, str]:
    found = DifficultyFilter.objects.select_related("benchmark").filter(pk=params["filter_id"]).first()
    if found is None:
        return f"difficulty filter #{params['filter_id']}", ""
    return f"difficulty filter #{found.pk} of {found.benchmark.name}", reverse(
        "review:difficulty", args=[found.benchmark.name]
    )


@job(DIFFICULTY_JOB, title="Difficulty verdicts", subject=_filter_subject)
def difficulty_verdicts(ctx, *, filter_id: int) -> dict:
    """Queued by each of a difficulty filter's two evaluation runs when it finishes: the call that finds both
    finished gives the candidates their verdicts; any other call (the first run's, a second delivery) does nothing.
    """
    # Imported here: review.difficulty imports the services, which import this module.

    flt = finish_difficulty_filter(DifficultyFilter.objects.get(pk=filter_id))
    if flt.status == DifficultyFilter.Status.RUNNING:
        ctx.log(f"difficulty filter #{filter_id}: the other run is still going; its end gives the verdicts")
    elif flt.status == DifficultyFilter.Status.FAILED:
        ctx.log(f"difficulty filter #{filter_id} failed: {flt.error}")
    else:
        ctx.log(f"difficulty filter #{filter_id} finished")
    return {"filter": filter_id, "status": flt.status, "verdicts": verdict_counts(flt)}


@job(EXPIRE_CLAIMS_JOB, title="Hand back expired review claims")
def expire_claims(ctx) -> dict:
    """Periodic (jobs.periodic): claims that ran out go back to the queue even when nobody opens its pages."""
    return {"handed_back": hand_back()}


@job(SOLVE_JOB, queue="sandbox", title="Run the checker on a reviewer's workspace", subject=_candidate_subject)
def solve(ctx, *, candidate_id: int, revision_id: int, files: dict) -> dict:
    """The checker of `revision_id` on a reviewer's scratch workspace (review.solving): its score, checks and output.

    Idempotent: a second delivery runs the same checker on the same files again."""
    ctx.log(f"running the checker of revision #{revision_id} on {len(files)} files of candidate #{candidate_id}")
    result = run_solve(revision_id=revision_id, files=files)
    ctx.log(f"score {result['score']:.2f} ({result['status']}){': ' + result['reason'] if result['reason'] else ''}")
    return result
