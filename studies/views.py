"""The studies' pages: the list, the start form (admins) and a study's page, which refreshes itself while the study
runs (its cells by status, the chart of the cells' means with their intervals, the comparison with the best)."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from accounts.decorators import admin_required, viewer_required
from jobs.engine import JobEngineError
from lib.htmx import render_page
from lib.listing import poll_attributes, render_list

from .forms import StudyForm
from .kinds import KINDS, StudyError
from .models import Study, StudyCell
from .services import cancel_study, chart, figures, start_study


@viewer_required
def study_list(request):
    return render_list(
        request,
        "studies/list.html",
        Study.objects.select_related("created_by"),
        partial="rows",
        context={"nav": "studies"},
        per_page=50,
        statuses=Study.Status.choices,
        is_live=lambda study: not study.is_finished,
    )


@admin_required
def study_start(request):
    form = StudyForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                study = start_study(
                    kind=form.cleaned_data["kind"],
                    params=form.params(),
                    user=request.user,
                    name=form.cleaned_data["name"],
                )
            except StudyError as exc:
                form.add_error(None, str(exc))
            except JobEngineError as exc:
                form.add_error(None, f"the job engine did not take the study's first step: {exc}")
            else:
                messages.success(request, f"Study #{study.pk} started.")
                return redirect("studies:detail", study.pk)
        status = 400
    return render_page(request, "studies/start.html", {"nav": "studies", "form": form, "kinds": KINDS}, status=status)


@viewer_required
def study_detail(request, pk: int):
    study = get_object_or_404(Study.objects.select_related("created_by"), pk=pk)
    summary = study.summary if study.is_finished and study.summary else figures(study)
    groups = [
        (label, [row for row in summary["cells"] if row["status"] == value])
        for value, label in StudyCell.Status.choices
    ]
    context = {
        "nav": "studies",
        "study": study,
        "summary": summary,
        "groups": [(label, rows) for label, rows in groups if rows],
        "chart": chart(summary, study.kind),
        "axis": KINDS[study.kind].axis if study.kind in KINDS else "cell",
        "poll": "" if study.is_finished else poll_attributes(request.get_full_path()),
    }
    return render_page(request, "studies/detail.html", context, partial="live")


@admin_required
@require_POST
def study_cancel(request, pk: int):
    study = get_object_or_404(Study, pk=pk)
    if study.is_finished:
        messages.error(request, f"Study #{study.pk} has finished ({study.status}): there is nothing to cancel.")
    else:
        cancel_study(study, user=request.user)
        messages.success(request, f"Study #{study.pk} cancelled.")
    return redirect("studies:detail", study.pk)
