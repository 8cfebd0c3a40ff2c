"""The candidate page: everything a reviewer needs to judge one benchmark candidate, and every action on it.

    GET  candidates/<pk>/                   the page (viewers read; reviewers act)
    GET  candidates/<pk>/part/<name>/       a panel that refreshes itself: head, summary, sanity, accept, history, tree
    GET  candidates/<pk>/unit/              one part of the task (?field=&path=) to view, or to edit (&mode=edit)
    POST candidates/<pk>/edit/              save an edit: a revision + a FIX decision + a sanity check
    GET  candidates/<pk>/issues/<id>/       one issue card
    POST candidates/<pk>/verdict/           an issue is valid / not valid
    POST candidates/<pk>/apply-fix/         apply an issue's suggested replacement
    POST candidates/<pk>/decide/            accept, fix or reject
    POST candidates/<pk>/rediagnose/        reviewers: diagnose again (when an endpoint serves the diagnosis role)

htmx requests get back the piece they act on, with an HX-Trigger "review-changed" on success; the head, issue
summary, sanity card, accept state, history and file tree refresh themselves on it. Refusals and conflicts come
back in place with status 200 for htmx (it swaps 2xx answers only); plain requests get whole pages with
400/403/409, or a redirect, so every action also works without JavaScript.

What the page is built from (the parts of the task, the issue cards, the review grid, each panel's context) lives
in candidate_parts; this module holds the views and the request-bound context around them.
"""

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseLocation, reswap, retarget, trigger_client_event

from accounts.decorators import reviewer_required, viewer_required
from accounts.roles import REVIEWER, has_role
from jobs.engine import JobEngineError
from jobs.models import JobRun
from review import edits, rediagnosis, services, solving, team
from review.forms import VIEWER, DecisionForm, EditForm
from review.job_kinds import DIAGNOSE_JOB
from review.models import BenchmarkCandidate, DiagnosisIssue, ReviewDecision
from tasks.diffing import diff_lines
from tasks.models import TaskRevision
from tasks.services import StaleRevisionError
from tasks.views import files_by_role

from .candidate_parts import (
    PANELS,
    Unit,
    accept_context,
    diagnosis_state,
    head_context,
    history_context,
    issue_cards,
    load_unit,
    replacement_text,
    review_rows,
    sanity_panel_context,
    saved_context,
    solve_panel_context,
    summary_context,
    tree_context,
)
from .difficulty import difficulty_context

Decision = ReviewDecision.Decision
Verdict = ReviewDecision.Verdict
CHANGED = "review-changed"  # the HX-Trigger event of every successful action


# --- context --------------------------------------------------------------------------------------------------


def _get_candidate(pk) -> BenchmarkCandidate:
    return get_object_or_404(
        BenchmarkCandidate.objects.select_related("task__benchmark_category", "benchmark", "claimed_by"), pk=pk
    )


def _number(raw, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise BadRequest(f"{what} must be a number, not {raw!r}") from None


def _get_issue(candidate, raw) -> DiagnosisIssue:
    issues = DiagnosisIssue.objects.select_related("diagnosis__revision", "diagnosis__candidate")
    return get_object_or_404(issues, pk=_number(raw, "issue"), diagnosis__candidate=candidate)


def _get_base(candidate, raw) -> TaskRevision:
    number = _number(raw, "base_revision")
    base = candidate.task.revisions.filter(number=number).first()
    if base is None:
        raise BadRequest(f"{candidate.task.external_id} has no revision {number}")
    return base


def _page_url(candidate, anchor: str = "") -> str:
    return reverse("review:candidate", args=[candidate.pk]) + (f"#{anchor}" if anchor else "")


def _base_context(request, candidate) -> dict:
    """What every piece of the page needs: the candidate, its current revision and what the user may do."""
    candidate.refresh_from_db()
    candidate.review_viewer = request.user  # a blind second reviewer sees only their own decisions (review.team)
    revision = TaskRevision.objects.select_related("author_user").get(pk=candidate.task.current_revision_id)
    holder = candidate.held_by()
    is_open = candidate.status in BenchmarkCandidate.OPEN
    can_review = is_open and has_role(request.user, REVIEWER)
    return {
        "nav": "review",
        "candidate": candidate,
        "task": candidate.task,
        "revision": revision,
        "holder": holder,
        "holds": holder is not None and holder.pk == request.user.pk,
        "is_open": is_open,
        "can_review": can_review,
        # Deciding needs the claim (taken on the way when free): not while someone else holds it.
        "can_decide": can_review and (holder is None or holder.pk == request.user.pk),
        "page_url": _page_url(candidate),
    }


def _diagnosis_job(candidate):
    active = JobRun.objects.filter(kind=DIAGNOSE_JOB, params__candidate_id=candidate.pk, status__in=JobRun.ACTIVE)
    return active.order_by("-id").first()


def _page_context(request, candidate, **extra) -> dict:
    context = _base_context(request, candidate)
    revision = context["revision"]
    context |= head_context(candidate, revision)
    diagnosis = context["diagnosis"]
    issues = list(diagnosis.issues.select_related("diagnosis__revision")) if diagnosis else []
    groups = files_by_role(revision)
    context |= summary_context(candidate, revision)
    context |= sanity_panel_context(candidate, revision) | accept_context(candidate, revision)
    context |= history_context(candidate, revision) | diagnosis_state(candidate, revision)
    context |= solve_panel_context(candidate, revision, request.user, context["can_review"])
    context |= tree_context(candidate, revision, groups)
    context |= {
        "rows": review_rows(revision, groups, issues, candidate),
        "diagnosis_job": _diagnosis_job(candidate),
        "decide_form": DecisionForm(),
    }
    context |= difficulty_context(candidate)
    return context | extra


def _status(exc: Exception, request) -> int:
    """A refusal's HTTP status for a plain request; htmx gets 200 so that the answer is swapped in place."""
    return 200 if request.htmx else services.http_status(exc)


def _changed(response):
    return trigger_client_event(response, CHANGED)


# --- the page and its self-refreshing panels -------------------------------------------------------------------


@viewer_required
@require_GET
def candidate_page(request, pk):
    services.expire_claims()
    candidate = _get_candidate(pk)
    saved = None
    if request.GET.get("saved"):
        revision = candidate.task.revisions.filter(number=_number(request.GET["saved"], "saved")).first()
        saved = saved_context(revision) if revision else None
        if saved and team.hides_message(candidate, revision, request.user):
            saved["message_hidden"] = team.HIDDEN_MESSAGE
    return TemplateResponse(request, "review/candidate.html", _page_context(request, candidate, saved_change=saved))


@viewer_required
@require_GET
def candidate_part(request, pk, name):
    if name not in PANELS:
        raise Http404(f"no panel {name!r}")
    candidate = _get_candidate(pk)
    if not request.htmx:
        return redirect(_page_url(candidate, name))
    context = _base_context(request, candidate)
    context |= PANELS[name](candidate, context["revision"])
    return TemplateResponse(request, f"review/candidate.html#{name}", context)


# --- viewing and editing one part ------------------------------------------------------------------------------


def _unit_context(request, candidate, unit: Unit, mode: str = "view", **extra) -> dict:
    """A unit's template context; in edit mode with the issues about it (an edit may mark them fixed)."""
    context = _base_context(request, candidate) | {"unit": unit, "mode": mode}
    if mode in ("edit", "conflict"):
        diagnosis = candidate.diagnoses.first()
        context["unit_issues"] = [
            issue
            for issue in (diagnosis.issues.all() if diagnosis else [])
            if edits.issue_target(issue) == (unit.field, unit.path)
        ]
        context.setdefault("text", unit.text)
        context.setdefault("base", unit.revision)
        context.setdefault("fixes", [])
    return context | extra


def _unit_response(request, candidate, context, status=200):
    """The unit alone for htmx, a page around it otherwise."""
    if request.htmx:
        return TemplateResponse(request, "review/_candidate_unit.html", context, status=status)
    context |= {"piece": "unit", "piece_title": context["unit"].title}
    return TemplateResponse(request, "review/candidate_piece.html", context, status=status)


@viewer_required
@require_GET
def candidate_unit(request, pk):
    candidate = _get_candidate(pk)
    field_name, file_path, slot = (request.GET.get(key, "") for key in ("field", "path", "slot"))
    if field_name not in edits.EDIT_FIELDS or bool(file_path) != (field_name in edits.FILE_FIELDS):
        raise BadRequest("name a part: field=instruction|rubric, or field=input|reward|solution with a path")
    if slot not in ("", VIEWER):
        raise BadRequest(f"unknown slot {slot!r}")
    revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    unit = load_unit(revision, field_name, file_path, slot)
    if not unit.exists:
        raise Http404(f"r{revision.number} has no {unit.title}")
    wants_edit = request.GET.get("mode") == "edit" and has_role(request.user, REVIEWER) and not unit.not_editable
    mode = "edit" if wants_edit else "view"
    return _unit_response(request, candidate, _unit_context(request, candidate, unit, mode))


@reviewer_required
@require_POST
def candidate_edit(request, pk):
    candidate = _get_candidate(pk)
    diagnosis = candidate.diagnoses.first()
    form = EditForm(
        request.POST, request.FILES, issue_ids=diagnosis.issues.values_list("pk", flat=True) if diagnosis else ()
    )
    if not form.is_valid():
        raise BadRequest("; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()))
    data = form.cleaned_data
    field_name, file_path, action = data["field"], data["path"], data["action"]
    base = _get_base(candidate, data["base_revision"])
    if field_name == "reward" and action != "delete" and isinstance(form.content_value, str):
        problem = solving.check_syntax(file_path, form.content_value)
        if problem:  # a checker that does not compile scores nothing: said here, as the editor says it as one types
            refusal = services.ReviewError(f"reward/{file_path} does not compile: {problem}")
            return _edit_refused(request, candidate, form, base, refusal)
    try:
        result = edits.save_edit(
            candidate,
            user=request.user,
            field=field_name,
            path=file_path,
            content=form.content_value,
            base_revision=base,
            create=action == "create",
            reason=data["reason"],
            fixes=data["fixes"],
        )
    except (services.ReviewError, StaleRevisionError) as exc:
        return _edit_refused(request, candidate, form, base, exc)
    except JobEngineError as exc:
        return _saved_without_sanity(request, candidate, exc)
    if not request.htmx:
        return redirect(_saved_url(candidate, result.revision))
    unit = load_unit(result.revision, field_name, file_path, data["slot"])
    context = _unit_context(request, candidate, unit, saved=saved_context(result.revision, result.sanity_run))
    pieces = [("review/_candidate_unit.html", context)]
    if action == "create":  # the new file shows in the viewer; the add form starts afresh
        pieces.append(("review/candidate.html#add-file", _base_context(request, candidate) | {"oob": True}))
    for pk in data["fixes"]:
        pieces.append(("review/_candidate_issue.html", _issue_context(request, candidate, pk) | {"oob": True}))
    return _changed(_fragments(request, pieces))


def _saved_url(candidate, revision) -> str:
    """The page showing what a save changed and its sanity check (where plain forms land after saving)."""
    return reverse("review:candidate", args=[candidate.pk]) + f"?saved={revision.number}#saved"


def _edit_refused(request, candidate, form, base, exc):
    """The editor again, the reviewer's own text kept: with the reason, or (stale) with what changed meanwhile."""
    data = form.cleaned_data
    field_name, file_path, action = data["field"], data["path"], data["action"]
    current = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    mine = None if action == "delete" or data.get("upload") else form.content_value
    unit = load_unit(current, field_name, file_path, data["slot"])
    extra = {"text": mine, "reason": data["reason"], "fixes": data["fixes"], "action": action}
    if isinstance(exc, StaleRevisionError):
        before = load_unit(exc.base, field_name, file_path)
        theirs = "" if unit.text is None else unit.text
        conflict = {
            "base": exc.base,
            "current": exc.current,
            "changes": diff_lines(before.text or "", theirs, f"r{exc.base.number}", f"r{exc.current.number}"),
            "mine": diff_lines(theirs, mine, f"r{exc.current.number}", "yours") if mine is not None else [],
        }
        context = _unit_context(request, candidate, unit, "conflict", conflict=conflict, base=current, **extra)
        response = _unit_response(request, candidate, context, status=_status(exc, request))
        return _changed(response) if request.htmx else response
    if action == "create":
        typed = {"add_error": str(exc), "add_field": field_name, "add_path": file_path, "add_text": mine or ""}
        if not request.htmx:
            context = _page_context(request, candidate, **typed)
            return TemplateResponse(request, "review/candidate.html", context, status=_status(exc, request))
        response = TemplateResponse(
            request, "review/candidate.html#add-file", _base_context(request, candidate) | typed
        )
        return reswap(retarget(response, "#add-file"), "outerHTML")
    if action == "delete":
        context = _unit_context(request, candidate, unit, error=str(exc))
    else:
        context = _unit_context(request, candidate, unit, "edit", error=str(exc), base=base, **extra)
    return _unit_response(request, candidate, context, status=_status(exc, request))


def _saved_without_sanity(request, candidate, exc):
    """The change was saved but the engine refused its sanity check: show the saved revision, which says so."""
    candidate.task.refresh_from_db()
    revision = candidate.task.current_revision
    if request.htmx:
        return HttpResponseLocation(_saved_url(candidate, revision), target="#candidate-page", select="#candidate-page")
    messages.error(request, f"Saved as r{revision.number}, but its sanity check could not be started: {exc}")
    return redirect(_saved_url(candidate, revision))


def _fragments(request, pieces, status=200) -> HttpResponse:
    """One htmx answer of several pieces: the first is swapped into the target, the others out of band."""
    html = "".join(render_to_string(template, context, request=request) for template, context in pieces)
    return HttpResponse(html, status=status)


# --- issues: verdicts and suggested fixes ----------------------------------------------------------------------


def _issue_context(request, candidate, issue_or_pk, **extra) -> dict:
    context = _base_context(request, candidate)
    issue = issue_or_pk if isinstance(issue_or_pk, DiagnosisIssue) else _get_issue(candidate, issue_or_pk)
    (card,) = issue_cards(candidate, [issue], context["revision"], {})
    return context | {"c": card} | extra


def _issue_response(request, candidate, context, status=200):
    if request.htmx:
        return TemplateResponse(request, "review/_candidate_issue.html", context, status=status)
    context |= {"piece": "issue", "piece_title": f"issue #{context['c'].issue.pk}"}
    return TemplateResponse(request, "review/candidate_piece.html", context, status=status)


@viewer_required
@require_GET
def candidate_issue(request, pk, issue_pk):
    candidate = _get_candidate(pk)
    return _issue_response(request, candidate, _issue_context(request, candidate, issue_pk))


@reviewer_required
@require_POST
def verdict(request, pk):
    candidate = _get_candidate(pk)
    issue = _get_issue(candidate, request.POST.get("issue"))
    value = request.POST.get("verdict", "")
    if value not in (Verdict.VALID, Verdict.NOT_VALID):
        raise BadRequest("verdict must be valid or not_valid")
    try:
        services.record_verdicts(candidate, {str(issue.pk): value}, user=request.user)
    except services.ReviewError as exc:
        return _issue_response(
            request, candidate, _issue_context(request, candidate, issue, error=str(exc)), _status(exc, request)
        )
    if not request.htmx:
        return redirect(_page_url(candidate, f"issue-{issue.pk}"))
    return _changed(_issue_response(request, candidate, _issue_context(request, candidate, issue)))


@reviewer_required
@require_POST
def apply_fix(request, pk):
    candidate = _get_candidate(pk)
    issue = _get_issue(candidate, request.POST.get("issue"))
    base = _get_base(candidate, request.POST.get("base_revision"))
    try:
        fix = edits.apply_suggested_fix(issue, user=request.user, base_revision=base)
    except StaleRevisionError as exc:
        return _fix_conflict(request, candidate, issue, exc)
    except services.ReviewError as exc:
        return _issue_response(
            request, candidate, _issue_context(request, candidate, issue, error=str(exc)), _status(exc, request)
        )
    except JobEngineError as exc:
        return _saved_without_sanity(request, candidate, exc)
    if not request.htmx:
        return redirect(_saved_url(candidate, fix.revision))
    applied = saved_context(fix.revision, fix.sanity_run)
    pieces = [("review/_candidate_issue.html", _issue_context(request, candidate, issue, applied=applied))]
    target = edits.issue_target(issue)
    if load_unit(fix.revision.parent, *target).exists:  # the part is on the page: show its new content there too
        unit = load_unit(fix.revision, *target)
        pieces.append(("review/_candidate_unit.html", _unit_context(request, candidate, unit, oob=True)))
    return _changed(_fragments(request, pieces))


def _fix_conflict(request, candidate, issue, exc: StaleRevisionError):
    """The part changed since the reviewer looked: show how, and offer the fix again on top of the new revision."""
    field_name, file_path = edits.issue_target(issue)
    before, now = load_unit(exc.base, field_name, file_path), load_unit(exc.current, field_name, file_path)
    conflict = {
        "base": exc.base,
        "current": exc.current,
        "changes": diff_lines(before.text or "", now.text or "", f"r{exc.base.number}", f"r{exc.current.number}"),
        "mine": diff_lines(now.text or "", replacement_text(issue), f"r{exc.current.number}", "suggested"),
    }
    context = _issue_context(request, candidate, issue, conflict=conflict)
    response = _issue_response(request, candidate, context, _status(exc, request))
    return _changed(response) if request.htmx else response  # the head, sanity and history catch up too


# --- decisions and diagnosis -----------------------------------------------------------------------------------


def _decide_response(request, candidate, form, error="", notice="", status=200):
    """The decision card again: with the refusal and what was typed, or with what was recorded."""
    if form.errors.get("reason"):
        form.fields["reason"].widget.attrs["autofocus"] = True  # a reject without a reason: type it right away
    if request.htmx:
        context = _base_context(request, candidate)
        context |= accept_context(candidate, context["revision"])
        context |= {"decide_form": form, "decide_error": error, "decide_notice": notice}
        return TemplateResponse(request, "review/candidate.html#decide", context)
    if notice:
        messages.success(request, notice)
        return redirect(_page_url(candidate, "decide"))
    context = _page_context(request, candidate, decide_form=form, decide_error=error)
    return TemplateResponse(request, "review/candidate.html", context, status=status)


@reviewer_required
@require_POST
def decide(request, pk):
    candidate = _get_candidate(pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _decide_response(request, candidate, form, status=400)
    data = form.cleaned_data
    try:
        row = services.decide(
            candidate,
            data["decision"],
            user=request.user,
            reason=data["reason"],
            override_reason=data["override_reason"],
        )
    except services.ReviewError as exc:
        return _decide_response(request, candidate, form, error=str(exc), status=_status(exc, request))
    revision = f"r{row.revision.number}" if row.revision else "the current revision"
    if row.decision == Decision.FIX:
        notice = f"Recorded {revision} as your fix; the candidate stays open."
        return _changed(_decide_response(request, candidate, DecisionForm(), notice=notice))
    after = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(after, {request.get_host()}, require_https=request.is_secure()):
        after = ""
    if request.htmx and not after:
        # The whole page changes (closed, read-only, the outcome on top): swap it in without a reload.
        return HttpResponseLocation(
            _page_url(candidate), target="#candidate-page", select="#candidate-page", swap="outerHTML"
        )
    outcome = "Accepted" if row.decision == Decision.ACCEPT else "Rejected"
    messages.success(request, f"{outcome} {candidate.task.external_id} at {revision}.")
    if request.htmx:
        return HttpResponseClientRedirect(after)
    return redirect(after or _page_url(candidate))


@reviewer_required
@require_POST
def diagnose(request, pk):
    candidate = _get_candidate(pk)
    missing = rediagnosis.diagnosis_endpoint_missing()
    if missing:
        if request.htmx:
            return HttpResponse(format_html('<p class="error" role="alert">Cannot diagnose: {}.</p>', missing))
        messages.error(request, f"Cannot diagnose: {missing}.")
        return redirect(_page_url(candidate, "diagnosis"))
    try:
        (run,) = services.start_diagnosis([candidate], user=request.user)
    except JobEngineError as exc:
        if request.htmx:
            return HttpResponse(format_html('<p class="error">The diagnosis could not be started: {}</p>', exc))
        messages.error(request, f"The diagnosis could not be started: {exc}")
        return redirect(_page_url(candidate, "diagnosis"))
    if not request.htmx:
        return redirect("jobs:detail", run.pk)
    return TemplateResponse(request, "jobs/_progress.html", {"run": run})
