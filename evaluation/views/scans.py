"""What agents did wrong, as the transcript scanners found it (evaluation.services.scans): a run's findings (counts per
scanner and per model, the rollouts each scanner flagged, filtered by scanner), a scan asked for by an admin, and
which behaviours differ between two compared runs.

The run and compare pages load these as htmx partials; each is also a page of its own (a plain GET without JS).
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import admin_required, viewer_required
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.registry import UnknownJobKind
from lib.bounds import parse_id
from lib.htmx import render_page

from ..job_kinds import SCAN_JOB
from ..models import EvalRun
from ..scanners import DEFAULT_SCANNERS, SCANNERS
from ..services import scans

PAGE_SIZE = 50


def _run(pk: int) -> EvalRun:
    return get_object_or_404(EvalRun.objects.select_related("endpoint").defer("summary", "config"), pk=pk)


def scanner_rows(counts: dict) -> list[dict]:
    """One row per scanner that looked at the run: its findings, its flagged rollouts, and its findings per model."""
    models = sorted(counts["by_model"])
    return [
        {
            "name": name,
            "title": SCANNERS[name].title,
            "description": SCANNERS[name].description,
            "findings": counts["findings"][name],
            "rollouts": counts["rollouts"][name],
            "per_model": [counts["by_model"][model].get(name, 0) for model in models],
        }
        for name in counts["scanned"]
    ]


@viewer_required
@require_GET
def run_findings(request, pk: int):
    run = _run(pk)
    scanner = request.GET.get("scanner", "")
    status, error = 200, ""
    if scanner and scanner not in SCANNERS:
        error = f"No scanner {scanner!r}; the scanners: {', '.join(SCANNERS)}."
        scanner, status = "", 400
    counts = scans.scan_counts(run)
    page = Paginator(scans.run_findings(run, scanner or None), PAGE_SIZE).get_page(request.GET.get("page"))
    # The scan asked for from here (?job=), else the run's latest: its progress shows until it ends.
    jobs_of_run = JobRun.objects.filter(kind=SCAN_JOB, params__run_id=run.pk)
    scan_job = jobs_of_run.order_by("-created_at", "-id").first()
    if (job_id := parse_id(request.GET.get("job", ""))) is not None:
        scan_job = jobs_of_run.filter(pk=job_id).first() or scan_job
    scanning = scan_job is not None and not scan_job.is_finished
    context = {
        "nav": "evaluations",
        "run": run,
        "rows": scanner_rows(counts),
        "models": sorted(counts["by_model"]),
        "page": page,
        "scanner": scanner,
        "error": error,
        "latest": run.scans.first(),
        "scan_job": scan_job,
        # Polls while the run runs (its scan comes when it finishes) or a scan of it runs.
        "live": not run.is_finished or scanning,
        "scanner_choices": [(name, cls.title, name in DEFAULT_SCANNERS) for name, cls in SCANNERS.items()],
    }
    return render_page(request, "evaluation/run_findings.html", context, partial="findings", status=status)


@admin_required
@require_POST
def run_scan(request, pk: int):
    """Scan the run again (the scanners ticked; none: the rule-based ones) as an evaluation.scan_run job."""
    run = _run(pk)
    try:
        job = scans.request_scan(
            run, user=request.user, scanners=request.POST.getlist("scanner") or None, judge=request.POST.get("judge")
        )
    except (scans.ScanRefused, UnknownJobKind, JobEngineError) as exc:
        messages.error(request, f"The scan was not started: {exc}")
        return redirect("evaluations:findings", pk=pk)
    messages.success(request, f"Scanning the transcripts of {run.name} (job #{job.pk}).")
    return redirect(f"{reverse('evaluations:findings', args=[pk])}?job={job.pk}")


@viewer_required
@require_GET
def compare_findings(request):
    """Which behaviours differ between runs A and B: findings per scanner side by side, with the flagged rollouts."""
    picked = {}
    for key in ("a", "b"):
        pk = parse_id(request.GET.get(key, ""))
        picked[key] = EvalRun.objects.select_related("endpoint").filter(pk=pk).first() if pk is not None else None
    a, b = picked["a"], picked["b"]
    context = {"nav": "evaluations", "a": a, "b": b, "rows": [], "error": ""}
    if a is None or b is None:
        context["error"] = "Choose two runs to compare."
        return render_page(request, "evaluation/compare_findings.html", context, partial="behaviours", status=400)
    context["rows"] = scans.compare_findings(a, b)
    return render_page(request, "evaluation/compare_findings.html", context, partial="behaviours")
