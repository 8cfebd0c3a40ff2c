"""Propose one task to a benchmark, from the task's page.

    tasks/<external_id>/propose/     GET: the form (htmx: the form alone, fetched into the task page); POST: propose

Admins only, as on the benchmark page (which proposes many tasks at once); both call services.propose_candidates.
Once proposed, the browser goes to the candidate's page.
"""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_http_methods

from accounts.decorators import admin_required
from lib.htmx import render_page
from tasks.models import Task

from .. import services
from ..forms import ProposeTaskForm
from ..models import BenchmarkCandidate


@admin_required
@require_http_methods(["GET", "POST"])
def propose_task(request, external_id):
    task = get_object_or_404(Task, external_id=external_id)
    form = ProposeTaskForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            benchmark = form.cleaned_data["benchmark"]
            result = services.propose_candidates(benchmark, [task], user=request.user)
            if result.skipped:
                form.add_error(None, f"{task.external_id} has no revision yet: there is nothing to review.")
            else:
                done = "Proposed" if result.created else "Already a candidate:"
                messages.success(request, f"{done} {task.external_id} for {benchmark.name}.")
                candidate = BenchmarkCandidate.objects.get(task=task, benchmark=benchmark)
                return redirect("review:candidate", candidate.pk)
        status = 400
    proposed = BenchmarkCandidate.objects.filter(task=task).select_related("benchmark").order_by("benchmark__name")
    context = {"nav": "tasks", "task": task, "form": form, "proposed": proposed}
    return render_page(request, "review/propose_task.html", context, partial="form", status=status)
