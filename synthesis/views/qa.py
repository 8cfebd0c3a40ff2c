"""The quality-assessment card of a task revision: fetched into the task page with htmx (tasks does not import
synthesis), or a page of its own for a plain request."""

from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from accounts.decorators import viewer_required
from tasks.models import TaskRevision

from ..qa_checks import latest_assessments


@viewer_required
@require_GET
def qa_card(request, revision_id: int):
    revision = get_object_or_404(TaskRevision.objects.select_related("task"), pk=revision_id)
    context = {
        "revision": revision,
        "rows": latest_assessments(revision),
        "synthesized": bool((revision.metadata or {}).get("synthesis")),
    }
    template = "synthesis/_qa_card.html" if request.htmx else "synthesis/qa_page.html"
    return TemplateResponse(request, template, context, headers={"Vary": "HX-Request"})
