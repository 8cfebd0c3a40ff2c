"""Background entry point of transcript scans (registered through evaluation/jobs/__init__.py): a run's rollouts read
by the scanners, queued when the run finishes (the rule-based ones) and on demand (services.scans.request_scan)."""

from django.urls import reverse

from jobs.registry import job

from ..job_kinds import SCAN_JOB
from ..models import EvalRun
from ..services.scans import judge_by_name, scan_run


def _scan_subject(params: dict) -> tuple[str, str]:
    run_id = params.get("run_id")
    return f"run #{run_id}", reverse("evaluations:detail", args=[run_id]) if isinstance(run_id, int) else ""


@job(SCAN_JOB, queue="default", title="Scan transcripts", subject=_scan_subject)
def scan(ctx, *, run_id: int, scanners: list[str] | None = None, judge: str | None = None) -> dict:
    """Scan the run's finished rollouts and store the findings. Running it twice replaces the first scan's findings
    with the same ones (a judge may answer otherwise)."""
    run = EvalRun.objects.filter(pk=run_id).first()
    if run is None:
        raise LookupError(f"no evaluation run #{run_id}")
    result = scan_run(
        run,
        user=ctx.run.created_by,
        scanners=scanners,
        judge=judge_by_name(judge),
        on_progress=lambda done, total: ctx.progress(done, total),
    )
    for error in result.errors:
        where = f"rollout #{error['rollout']}" if error["rollout"] else "every rollout"
        ctx.log(f"{error['scanner']}: {where}: {error['error']}")
    ctx.progress(result.rollouts, result.rollouts, f"{result.findings} finding(s) in {result.rollouts} rollout(s)")
    return {"scan": result.pk, "rollouts": result.rollouts, "findings": result.findings, "errors": len(result.errors)}
