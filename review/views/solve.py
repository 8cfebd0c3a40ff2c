"""The candidate page's in-browser solve, and the editors' helpers (review.solving holds the work).

    GET  candidates/<pk>/solve/                 the solve panel (the reviewer's scratch workspace, its last run)
    POST candidates/<pk>/solve/open/            start the workspace from the initial workspace (or the solution)
    GET  candidates/<pk>/solve/file/?path=      one file of the workspace in the editor
    POST candidates/<pk>/solve/file/            save (action=save|create) or delete (action=delete) one file
    POST candidates/<pk>/solve/run/             run the current checker on the workspace (a job)
    POST candidates/<pk>/solve/save/            save the workspace as the reference solution: a new revision
    POST candidates/<pk>/solve/discard/         throw the workspace away
    POST candidates/<pk>/save-all/              several open editors saved as one revision
    POST candidates/<pk>/syntax/                Python's verdict on an editor's text (JSON)
    GET  candidates/<pk>/check/?name=           the checker lines that set a check, opened in the editor

htmx gets the solve panel (or the piece acted on) back; plain requests a redirect to the page's #solve, so each
action also works without JavaScript. Refusals come back in the panel, with status 200 for htmx (4xx otherwise).
"""

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseLocation, trigger_client_event

from accounts.decorators import reviewer_required, viewer_required
from accounts.roles import REVIEWER, has_role
from jobs.engine import JobEngineError
from lib.bounds import TextRefused, check_text
from review import edits, services, solving
from tasks.models import TaskRevision
from tasks.services import StaleRevisionError
from tasks.viewers import MAX_TEXT_BYTES, decode_text, is_binary

from .candidate import (
    CHANGED,
    _base_context,
    _get_base,
    _get_candidate,
    _saved_url,
    _status,
    _unit_context,
    _unit_response,
)
from .candidate_parts import load_unit, solve_panel_context

MAX_SAVE_ALL = 20  # editors saved together


def _solve_url(candidate) -> str:
    return reverse("review:candidate", args=[candidate.pk]) + "#solve"


def solve_context(request, candidate, **extra) -> dict:
    context = _base_context(request, candidate)
    return context | solve_panel_context(candidate, context["revision"], request.user, context["can_review"]) | extra


def _panel(request, candidate, status=200, changed=False, **extra):
    if not request.htmx:
        if extra.get("solve_error"):
            messages.error(request, extra["solve_error"])
        elif extra.get("solve_notice"):
            messages.success(request, extra["solve_notice"])
        return redirect(_solve_url(candidate))
    response = TemplateResponse(
        request, "review/_solve_panel.html", solve_context(request, candidate, **extra), status=status
    )
    return trigger_client_event(response, CHANGED) if changed else response


def _refused(request, candidate, exc, **extra):
    if not request.htmx:
        messages.error(request, str(exc))
        return redirect(_solve_url(candidate))
    return _panel(request, candidate, status=_status(exc, request), solve_error=str(exc), **extra)


@viewer_required
@require_GET
def solve_panel(request, pk):
    candidate = _get_candidate(pk)
    if not request.htmx:
        return redirect(_solve_url(candidate))
    return _panel(request, candidate)


@reviewer_required
@require_POST
def solve_open(request, pk):
    candidate = _get_candidate(pk)
    source = request.POST.get("source", "initial")
    try:
        found = solving.open_workspace(candidate, user=request.user, source=source)
    except services.ReviewError as exc:
        return _refused(request, candidate, exc)
    what = "the reference solution" if source == "solution" else "the initial workspace"
    return _panel(request, candidate, solve_notice=f"Opened {what} of r{found.revision}: {len(found.files)} files.")


def _file_context(request, candidate, path: str, **extra) -> dict:
    context = _base_context(request, candidate)
    found = solving.workspace(candidate, request.user)
    if found is None:
        raise Http404("you have no scratch workspace of this candidate open")
    text = extra.pop("text", None)
    note = ""
    if text is None and path in found.files:
        data = found.read(path)
        if is_binary(data) or len(data) > MAX_TEXT_BYTES:
            note = "This file is binary or too large to edit here: delete it and add a new one instead."
        else:
            text = decode_text(data)
    context |= {"path": path, "text": text, "note": note, "exists": path in found.files}
    return context | extra


@reviewer_required
@require_GET
def solve_file(request, pk):
    candidate = _get_candidate(pk)
    path = request.GET.get("path", "")
    found = solving.workspace(candidate, request.user)
    if found is None or path not in found.files:
        raise Http404(f"your scratch workspace has no file {path!r}")
    if not request.htmx:
        return redirect(_solve_url(candidate))
    return TemplateResponse(request, "review/_solve_file.html", _file_context(request, candidate, path))


@reviewer_required
@require_POST
def solve_file_save(request, pk):
    candidate = _get_candidate(pk)
    action = request.POST.get("action", "save")
    path = request.POST.get("path", "").strip()
    if action not in ("save", "create", "delete"):
        raise BadRequest("action must be save, create or delete")
    try:
        if action == "delete":
            solving.delete_file(candidate, user=request.user, path=path)
            return _panel(request, candidate, solve_notice=f"Deleted {path} from your workspace.")
        upload = request.FILES.get("upload")
        if upload is not None:
            if upload.size > solving.MAX_BYTES:
                raise solving.SolveError(f"{upload.name} is over {solving.MAX_BYTES // (1024 * 1024)} MiB")
            path = path or upload.name
            content = upload.read()
        else:
            content = request.POST.get("content", "").replace("\r\n", "\n")
        solving.write_file(candidate, user=request.user, path=path, content=content, create=action == "create")
    except services.ReviewError as exc:
        if action == "save" and request.htmx:
            context = _file_context(request, candidate, path, text=request.POST.get("content", ""), error=str(exc))
            return TemplateResponse(request, "review/_solve_file.html", context)
        return _refused(request, candidate, exc)
    saved = solving.clean_path(path)
    if action == "create":
        return _panel(request, candidate, solve_notice=f"Added {saved} to your workspace.")
    if not request.htmx:
        return redirect(_solve_url(candidate))
    # The editor stays open; the file list and the save button catch up (the workspace changed since its run).
    context = _file_context(request, candidate, saved, saved_note=f"Saved {saved} in your workspace.")
    response = TemplateResponse(request, "review/_solve_file.html", context)
    return trigger_client_event(response, "solve-changed")


@reviewer_required
@require_POST
def solve_run(request, pk):
    candidate = _get_candidate(pk)
    try:
        solving.start_run(candidate, user=request.user)
    except services.ReviewError as exc:
        return _refused(request, candidate, exc)
    except JobEngineError as exc:
        return _refused(request, candidate, solving.SolveError(f"the run could not be started: {exc}"))
    return _panel(request, candidate)


@reviewer_required
@require_POST
def solve_save(request, pk):
    candidate = _get_candidate(pk)
    base = _get_base(candidate, request.POST.get("base_revision"))
    try:
        result = solving.save_solution(
            candidate, user=request.user, base_revision=base, reason=request.POST.get("reason", "")
        )
    except (services.ReviewError, StaleRevisionError) as exc:
        return _refused(request, candidate, exc)
    except JobEngineError as exc:
        return _refused(request, candidate, solving.SolveError(f"saved, but its sanity check could not start: {exc}"))
    return _after_save(request, candidate, result.revision)


def _after_save(request, candidate, revision):
    """What a save of a new revision answers: the page showing what it changed (swapped in, not reloaded)."""
    url_saved = _saved_url(candidate, revision)
    if request.htmx:
        return HttpResponseLocation(url_saved, target="#candidate-page", select="#candidate-page", swap="outerHTML")
    return redirect(url_saved)


@reviewer_required
@require_POST
def solve_discard(request, pk):
    candidate = _get_candidate(pk)
    try:
        solving.discard_workspace(candidate, user=request.user)
    except services.ReviewError as exc:
        return _refused(request, candidate, exc)
    return _panel(request, candidate, solve_notice="Your scratch workspace is discarded.")


@reviewer_required
@require_POST
def save_all(request, pk):
    """Several editors of the page as one revision: field, path and content repeated, in the same order."""
    candidate = _get_candidate(pk)
    fields, paths, contents = (request.POST.getlist(key) for key in ("field", "path", "content"))
    if not fields or not (len(fields) == len(paths) == len(contents)):
        raise BadRequest("give field, path and content once for each part saved")
    if len(fields) > MAX_SAVE_ALL:
        raise BadRequest(f"save at most {MAX_SAVE_ALL} parts at once")
    base = _get_base(candidate, request.POST.get("base_revision"))
    parts = []
    for field_name, file_path, content in zip(fields, paths, contents, strict=True):
        if field_name not in edits.EDIT_FIELDS:
            raise BadRequest(f"{field_name!r} is not an editable part")
        parts.append((field_name, file_path.strip(), content.replace("\r\n", "\n")))
    try:
        for field_name, file_path, content in parts:
            problem = solving.check_syntax(file_path, content) if field_name == "reward" else None
            if problem:
                raise solving.SolveError(f"reward/{file_path} does not compile: {problem}")
        result = solving.save_parts(
            candidate, user=request.user, parts=parts, base_revision=base, reason=request.POST.get("reason", "")
        )
    except (services.ReviewError, StaleRevisionError) as exc:
        if request.htmx:
            return TemplateResponse(request, "review/_solve_save_all.html", {"error": str(exc)})
        messages.error(request, str(exc))
        return redirect(reverse("review:candidate", args=[candidate.pk]))
    except JobEngineError as exc:
        messages.error(request, f"Saved, but the sanity check could not be started: {exc}")
        candidate.task.refresh_from_db()
        return _after_save(request, candidate, candidate.task.current_revision)
    return _after_save(request, candidate, result.revision)


@viewer_required
@require_POST
def syntax(request, pk):
    """{"ok": true} or {"ok": false, "line", "column", "message"}; only .py paths are checked."""
    _get_candidate(pk)
    path = request.POST.get("path", "")
    try:
        text = check_text(request.POST.get("content", ""), "the text", setting="CLAWGYM_MAX_FILE_BYTES")
    except TextRefused as exc:
        return JsonResponse({"ok": False, "line": 1, "column": 1, "message": str(exc)})
    problem = solving.check_syntax(path, text)
    if problem is None:
        return JsonResponse({"ok": True, "checked": path.endswith(".py")})
    return JsonResponse(
        {"ok": False, "line": problem.line, "column": problem.column, "message": problem.message, "text": str(problem)}
    )


@viewer_required
@require_GET
def check_source(request, pk):
    """The checker file that sets a check, in the editor (reviewers) or the viewer, its lines highlighted."""
    candidate = _get_candidate(pk)
    name = request.GET.get("name", "")
    if not name:
        raise BadRequest("name the check: ?name=")
    revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    places = solving.check_lines(revision, name)
    wanted = request.GET.get("path", "")
    place = next((p for p in places if p[0] == wanted), places[0] if places else None)
    if place is None:
        raise Http404(f"no checker file of r{revision.number} names the check {name!r} as a string")
    path, lines = place
    unit = load_unit(revision, "reward", path)
    if not request.htmx:
        return redirect(reverse("review:candidate", args=[candidate.pk]) + f"#{unit.dom_id}")
    editable = has_role(request.user, REVIEWER) and not unit.not_editable and candidate.status in candidate.OPEN
    context = _unit_context(request, candidate, unit, "edit" if editable else "view", highlight=lines, check=name)
    return _unit_response(request, candidate, context)
