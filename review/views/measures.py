"""How well the review works, on the pages: the diagnosis's precision and the planted flaws.

    GET  benchmarks/<name>/diagnosis-precision/   the valid share of judged issues, with intervals (viewers)
    GET  benchmarks/<name>/planted/               per flaw kind and per reviewer, what was caught (viewers); admins
                                                  also see each plant and the form to plant more
    POST benchmarks/<name>/planted/               admins: plant N flaws of the chosen kinds (review.planting)

The plant form answers htmx with its panel (errors in place) or, once planted, sends the browser to the page with a
message; without JS it posts normally and redirects the same way. The reveal after a decision is in the candidate
and queue views (`reveal_context`).
"""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounts.decorators import viewer_required
from accounts.roles import ADMIN, has_role
from benchmarks.models import Benchmark
from jobs.engine import JobEngineError
from lib.htmx import render_page

from .. import planting, precision
from ..forms import PlantForm
from ..models import DiagnosisIssue, PlantedFlaw, Severity

Kind = PlantedFlaw.Kind


def _benchmark(name: str) -> Benchmark:
    return get_object_or_404(Benchmark, name=name)


def _labelled(cells: dict, labels: dict) -> list[dict]:
    return [{"key": key, "label": labels.get(key, key or "(none)"), **cell} for key, cell in cells.items()]


@viewer_required
@require_GET
def diagnosis_precision(request, name):
    benchmark = _benchmark(name)
    report = precision.benchmark_precision(benchmark)
    context = {
        "nav": "review",
        "benchmark": benchmark,
        "report": report,
        "groups": [
            ("Component", _labelled(report["by_component"], dict(DiagnosisIssue.Component.choices))),
            ("Severity", _labelled(report["by_severity"], dict(Severity.choices))),
            ("Diagnosing model", _labelled(report["by_model"], {})),
            ("Prompt version", _labelled(report["by_prompt_version"], {})),
        ],
    }
    return render_page(request, "review/benchmark_precision.html", context, partial="report")


def _planted_page(request, benchmark, form=None, status=200, partial="report"):
    is_admin = has_role(request.user, ADMIN)
    report = planting.planted_report(benchmark)
    context = {
        "nav": "review",
        "benchmark": benchmark,
        "report": report,
        "kinds": [(kind, label, report["by_kind"][kind]) for kind, label in Kind.choices],
        "kind_labels": dict(Kind.choices),
        "plants": planting.plant_rows(benchmark) if is_admin else [],
        "plant_form": form or PlantForm(),
        "sources": len(planting.sources(benchmark)) if is_admin else 0,
    }
    return render_page(request, "review/benchmark_planted.html", context, partial=partial, status=status)


@viewer_required
@require_http_methods(["GET", "POST"])
def planted(request, name):
    benchmark = _benchmark(name)
    if request.method == "GET":
        return _planted_page(request, benchmark)
    if not has_role(request.user, ADMIN):
        return HttpResponse("Planting flaws needs the admin role.", status=403)
    form = PlantForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            plants = planting.plant_flaws(benchmark, data["kinds"], data["count"], user=request.user, seed=data["seed"])
        except planting.PlantError as exc:
            form.add_error(None, str(exc))
        except JobEngineError as exc:
            messages.error(request, f"The flaws were planted, but their checks could not be started: {exc}")
            return _done(request, benchmark)
        else:
            n = len(plants)
            messages.success(
                request,
                f"Planted {n} flaw{'' if n == 1 else 's'} into copies of accepted candidates of {benchmark.name}; "
                "they wait in the queue, unmarked, for their diagnosis.",
            )
            return _done(request, benchmark)
    # htmx swaps 2xx answers only: the form with its errors must still replace its panel.
    return _planted_page(request, benchmark, form, status=200 if request.htmx else 400, partial="plant")


def _done(request, benchmark):
    url = reverse("review:planted", args=[benchmark.name])
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
