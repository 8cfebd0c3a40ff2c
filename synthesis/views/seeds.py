"""Pages of the synthesis seeds: personas (search, import for admins) and skills (each with its latest annotation,
whether the skill route may use it and why not, the admin's override; import of the bundled skills, annotation as a
job). They validate and call synthesis.services.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import admin_required, viewer_required
from jobs.engine import JobEngineError
from lib.bounds import parse_id
from lib.htmx import render_page

from .. import annotation, seed_files, services, skills
from ..forms import PersonaImportForm, PersonaSearchForm, SkillOverrideForm
from ..models import Persona, Skill, SkillAnnotation

PERSONAS_PAGE_SIZE = 50
SKILLS_PAGE_SIZE = 100
FAILURES_SHOWN = 10


def _report_message(request, what: str, report: dict) -> None:
    """An import's {"imported", "updated", "unchanged", "failed", "failed_count"} as a message, with the first
    failures named."""
    text = (
        f"{what}: {report['imported']} imported, {report['updated']} updated, {report['unchanged']} unchanged, "
        f"{report['failed_count']} failed."
    )
    if report["failed"]:
        shown = "; ".join(f"{f['source']}: {f['error']}" for f in report["failed"][:FAILURES_SHOWN])
        more = report["failed_count"] - FAILURES_SHOWN
        messages.warning(request, f"{text} {shown}" + (f"; and {more} more" if more > 0 else ""))
    else:
        messages.success(request, text)


# --- personas ----------------------------------------------------------------------------------------------------


@viewer_required
@require_GET
def persona_list(request):
    search = PersonaSearchForm(request.GET)
    personas = Persona.objects.all()
    query = search.cleaned_data["q"].strip() if search.is_valid() else ""
    if query:
        personas = personas.filter(text__icontains=query)
    page = Paginator(personas, PERSONAS_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "nav": "synthesis",
        "search": search,
        "query": query,
        "page": page,
        "total": Persona.objects.count(),
        "import_form": PersonaImportForm(),
    }
    return render_page(request, "synthesis/persona_list.html", context, partial="personas")


@admin_required
@require_POST
def persona_import(request):
    form = PersonaImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose a file of personas to import.")
        return redirect("synthesis:personas")
    upload = form.cleaned_data["file"]
    try:
        report = services.import_personas(upload, source=upload.name)
    except seed_files.SeedError as exc:
        messages.error(request, f"The personas were not imported: {exc}")
    else:
        _report_message(request, f"Personas from {upload.name}", report.as_dict())
    return redirect("synthesis:personas")


# --- skills ------------------------------------------------------------------------------------------------------


def skill_rows(queryset):
    """Skills with their latest annotation (.annotation) and the label the skill route follows (.synthesizable,
    synthesis.annotation's rule)."""
    latest = SkillAnnotation.objects.order_by("skill", "-created_at", "-id")
    rows = list(queryset.select_related("override_by").prefetch_related(Prefetch("annotations", queryset=latest)))
    for skill in rows:
        found = list(skill.annotations.all())
        skill.annotation = found[0] if found else None
        skill.synthesizable = annotation.skill_synthesizable(skill)
    return rows


@viewer_required
@require_GET
def skill_list(request):
    # The label depends on the override and the latest annotation: worked out per skill (hundreds at most).
    rows = skill_rows(Skill.objects.all())
    label = request.GET.get("label", "")
    shown = [s for s in rows if s.synthesizable == (label == "yes")] if label in ("yes", "no") else rows
    context = {
        "nav": "synthesis",
        "page": Paginator(shown, SKILLS_PAGE_SIZE).get_page(request.GET.get("page")),
        "label": label,
        "total": len(rows),
        "synthesizable_total": sum(1 for s in rows if s.synthesizable),
        "override_form": SkillOverrideForm(),
    }
    return render_page(request, "synthesis/skill_list.html", context)


@admin_required
@require_POST
def skills_import_bundled(request):
    try:
        report = services.import_skills(bundled=True)
    except skills.SkillImportError as exc:
        messages.error(request, f"The bundled skills were not imported: {exc}")
    else:
        _report_message(request, "Skills bundled with OpenClaw", report.as_dict())
    return redirect("synthesis:skills")


@admin_required
@require_POST
def skills_annotate(request):
    """Annotate every skill (or those ticked, `skill`) as a job; the job page follows it."""
    ids = [pk for pk in map(parse_id, request.POST.getlist("skill")) if pk is not None] or None
    endpoint = request.POST.get("endpoint", "").strip() or None
    try:
        run = services.start_annotation(user=request.user, endpoint_name=endpoint, skill_ids=ids)
    except (annotation.AnnotationError, JobEngineError) as exc:
        messages.error(request, f"The annotation was not started: {exc}")
        return redirect("synthesis:skills")
    messages.success(request, f"Annotating {'every skill' if ids is None else f'{len(ids)} skills'} (job #{run.pk}).")
    return redirect("jobs:detail", run.pk)


@admin_required
@require_POST
def skill_override(request, pk: int):
    skill = get_object_or_404(Skill, pk=pk)
    form = SkillOverrideForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(e for field in form.errors.values() for e in field)
        messages.error(request, f"The label of {skill.name} was not changed: {errors}")
        return redirect("synthesis:skills")
    value = form.cleaned_data["value"]
    services.set_override(skill, value, reason=form.cleaned_data["reason"], user=request.user)
    if value is None:
        messages.success(request, f"{skill.name} follows its annotation again.")
    else:
        messages.success(request, f"{skill.name} is now {'' if value else 'not '}synthesizable (overridden).")
    return redirect(f"{reverse('synthesis:skills')}#skill-{skill.pk}")
