"""The candidate page: everything a reviewer needs to judge one benchmark candidate, and every action on it.

    GET  candidates/<pk>/                   the page (viewers read; reviewers act)
    GET  candidates/<pk>/part/<name>/       a panel that refreshes itself: head, summary, sanity, accept, history, tree
    GET  candidates/<pk>/unit/              one part of the task (?field=&path=) to view, or to edit (&mode=edit)
    POST candidates/<pk>/edit/              save an edit: a revision + a FIX decision + a sanity check
    GET  candidates/<pk>/issues/<id>/       one issue card
    POST candidates/<pk>/verdict/           an issue is valid / not valid
    POST candidates/<pk>/apply-fix/         apply an issue's suggested replacement
    POST candidates/<pk>/decide/            accept, fix or reject
    POST candidates/<pk>/rediagnose/        admins: diagnose again

htmx requests get back the piece they act on, with an HX-Trigger "review-changed" on success; the head, issue
summary, sanity card, accept state, history and file tree refresh themselves on it. Refusals and conflicts come
back in place with status 200 for htmx (it swaps 2xx answers only); plain requests get whole pages with
400/403/409, or a redirect, so every action also works without JavaScript.
"""

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import BadRequest
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path as url
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseLocation, reswap, retarget, trigger_client_event

from accounts.decorators import admin_required, reviewer_required, viewer_required
from accounts.roles import REVIEWER, has_role
from jobs.engine import JobEngineError
from jobs.models import JobRun
from review import services
from review.forms import DecisionForm
from review.jobs import DIAGNOSE_JOB
from review.models import SEVERITY_RANK, BenchmarkCandidate, DiagnosisIssue, ReviewDecision
from tasks.diffing import diff_lines, diff_revisions, role_folder
from tasks.models import TaskRevision
from tasks.package import RUBRIC_SCORES
from tasks.sanity import SANITY_JOB
from tasks.services import StaleRevisionError
from tasks.viewers import MAX_TEXT_BYTES, decode_text, is_binary, view_file
from tasks.views import _files_by_role, _sanity_context

Decision = ReviewDecision.Decision
Verdict = ReviewDecision.Verdict
CHANGED = "review-changed"  # the HX-Trigger event of every successful action
FILE_FIELDS = services.FILE_FIELDS
VIEWER = "viewer"  # the slot of a file opened in the file viewer


# --- the parts of a task and the issues about them -------------------------------------------------------------


@dataclass
class Unit:
    """One part of a revision a reviewer looks at and edits: the instruction, the rubric, or one file.

    A file is shown in its own row beside the issues about it, or in the file viewer (slot "viewer"); the slot
    keeps the two apart on the page, so that each can be edited and swapped on its own.
    """

    revision: TaskRevision
    field: str
    path: str = ""
    data: bytes | None = None  # a file's content; None when the revision has no such file
    slot: str = ""

    @property
    def key(self) -> str:
        return f"{self.field}:{self.path}" if self.path else self.field

    @property
    def dom_id(self) -> str:
        name = (
            f"unit-{self.field}-{hashlib.sha1(self.path.encode()).hexdigest()[:12]}"
            if self.path
            else f"unit-{self.field}"
        )
        return f"{self.slot}-{name}" if self.slot else name

    @property
    def title(self) -> str:
        if self.path:
            return role_folder(self.field) + self.path
        return self.field.capitalize()

    @property
    def query(self) -> str:
        """The query string naming this part to the unit and edit views."""
        names = {"field": self.field, "path": self.path, "slot": self.slot}
        return urlencode({key: value for key, value in names.items() if value})

    @property
    def is_file(self) -> bool:
        return self.field in FILE_FIELDS

    @property
    def exists(self) -> bool:
        return not self.is_file or self.data is not None

    @cached_property
    def view(self):
        return view_file(self.path, self.data) if self.data is not None else None

    @cached_property
    def text(self) -> str | None:
        """The text the editor opens with, and diffs compare; None when the part cannot be edited as text."""
        if self.field == "instruction":
            return self.revision.instruction
        if self.field == "rubric":
            return rubric_json(self.revision.rubric)
        if self.data is None:
            return ""
        if is_binary(self.data) or len(self.data) > MAX_TEXT_BYTES:
            return None
        return decode_text(self.data)

    @property
    def not_editable(self) -> str:
        """Why this part cannot be edited inline ("" when it can)."""
        if self.text is not None:
            return ""
        if is_binary(self.data):
            return "Binary files cannot be edited inline: download it, change it and add it again."
        return f"Files over {MAX_TEXT_BYTES // 1024} KiB cannot be edited inline."

    @property
    def rubric_rows(self) -> list[dict]:
        """The rubric's rules with their score descriptions in level order, for its table."""
        return [
            rule | {"levels": [rule["scores"].get(level, "") for level in RUBRIC_SCORES]}
            for rule in self.revision.rubric
        ]

    @property
    def editor_rows(self) -> int:
        return min(40, max(8, (self.text or "").count("\n") + 3))


def rubric_json(rules) -> str:
    """The rubric as the editor shows it: indented JSON, or nothing when there is no rubric."""
    return json.dumps(rules, indent=2, ensure_ascii=False) + "\n" if rules else ""


def _load_units(revision: TaskRevision, keys, slot: str = "") -> dict[tuple[str, str], Unit]:
    """Units for (field, path) pairs, file contents read in one query."""
    keys = list(keys)
    wanted = Q(pk__in=[])
    for field_name, path in keys:
        if field_name in FILE_FIELDS:
            wanted |= Q(role=field_name, path=path)
    files = {(f.role, f.path): f.blob.content for f in revision.files.filter(wanted).select_related("blob")}
    return {(f, p): Unit(revision, f, p, files.get((f, p)), slot) for f, p in keys}


def _load_unit(revision: TaskRevision, field_name: str, path: str = "", slot: str = "") -> Unit:
    return _load_units(revision, [(field_name, path)], slot)[(field_name, path)]


@dataclass
class IssueCard:
    """An LLM issue as its card shows it: the current verdict and how its suggestion compares to the task now."""

    issue: DiagnosisIssue
    verdict: str = ""
    fixed_in: int | None = None  # the revision whose fix marked it fixed
    missing_now: bool = False  # it names a file the current revision lacks
    changed_since: int | None = None  # the diagnosed revision's number, when the part changed since
    replacement_diff: list = dataclass_field(default_factory=list)
    replacement_applied: bool = False  # the current content already equals the suggested replacement
    replacement_note: str = ""
    anchor: str = ""  # the id of the page element showing the part it concerns

    @property
    def target(self) -> tuple[str, str]:
        return services.issue_target(self.issue)


def _replacement_text(issue: DiagnosisIssue) -> str:
    """The suggested replacement as the editor would hold it (a rubric's JSON indented like the rubric editor's)."""
    if issue.component == DiagnosisIssue.Component.RUBRIC:
        try:
            return rubric_json(json.loads(issue.replacement))
        except ValueError:
            pass
    return issue.replacement


def _issue_cards(candidate, issues, revision: TaskRevision, units: dict) -> list[IssueCard]:
    """Cards for issues of the candidate's latest diagnosis, compared with `revision` (units: its loaded parts)."""
    verdicts = services.current_verdicts(candidate)
    fixed_in = {}
    fixes = candidate.decisions.filter(decision=Decision.FIX).select_related("revision").order_by("created_at", "id")
    for decision in fixes:
        for pk, value in decision.verdicts.items():
            if value == Verdict.FIXED and decision.revision:
                fixed_in[pk] = decision.revision.number
    cards = []
    for issue in issues:
        card = IssueCard(issue, verdicts.get(str(issue.pk), ""), fixed_in.get(str(issue.pk)))
        field_name, path = card.target
        unit = units.get((field_name, path)) or _load_unit(revision, field_name, path)
        card.missing_now = bool(unit.is_file and path and not unit.exists)
        card.anchor = (
            unit.dom_id
            if unit.exists and (unit.path or not unit.is_file)
            else ("row-files" if field_name == "input" else "row-checker")
        )
        diagnosed = issue.diagnosis.revision
        if card.verdict != Verdict.FIXED and diagnosed.pk != revision.pk and (not unit.is_file or path):
            if services.field_state(diagnosed, field_name, path) != services.field_state(revision, field_name, path):
                card.changed_since = diagnosed.number
        if issue.replacement is not None:
            suggested = _replacement_text(issue)
            if unit.text is None:
                card.replacement_note = "The current file is not text: applying replaces it with the text below."
                card.replacement_diff = diff_lines("", suggested, "(binary)", "suggested")
            else:
                card.replacement_applied = unit.exists and unit.text == suggested
                before = f"r{revision.number}/{unit.title}" if unit.exists else "(no such file)"
                card.replacement_diff = diff_lines(unit.text, suggested, before, "suggested")
        cards.append(card)
    return cards


def _row_key(card: IssueCard, row_files: set) -> str:
    """Which row of the page an issue sits in: the part it concerns, or the files/checker overview."""
    field_name, path = card.target
    if not path and field_name in ("instruction", "rubric"):
        return field_name
    if (field_name, path) in row_files:
        return f"{field_name}:{path}"
    return "files" if field_name == "input" else "checker"


def _rows(revision: TaskRevision, groups, issues, candidate) -> list[dict]:
    """The review grid: each part of the task beside the issues about it, in reading order."""
    present = {(g["role"], f.path) for g in groups for f in g["files"]}
    named_inputs = sorted({i.path for i in issues if i.component == "input_file" and ("input", i.path) in present})
    reward = [f.path for g in groups if g["role"] == "reward" for f in g["files"]]
    keys = [("instruction", ""), ("rubric", "")]
    keys += [("input", p) for p in named_inputs] + [("reward", p) for p in reward]
    units = _load_units(revision, keys)
    cards = _issue_cards(candidate, issues, revision, units)
    row_files = {k for k in keys if k[1]}
    by_row = defaultdict(list)
    for card in cards:
        by_row[_row_key(card, row_files)].append(card)

    def row(key, kind, title, unit=None):
        return {"key": key, "kind": kind, "title": title, "unit": unit, "cards": by_row.get(key, [])}

    rows = [row("instruction", "unit", "Instruction", units[("instruction", "")])]
    rows.append(row("files", "files", "Input files"))
    rows += [row(f"input:{p}", "unit", p, units[("input", p)]) for p in named_inputs]
    rows.append(row("checker", "checker", "Checker"))
    rows += [row(f"reward:{p}", "unit", f"reward/{p}", units[("reward", p)]) for p in reward]
    rows.append(row("rubric", "unit", "Rubric", units[("rubric", "")]))
    return rows


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
    revision = TaskRevision.objects.select_related("author_user").get(pk=candidate.task.current_revision_id)
    holder = candidate.held_by()
    is_open = candidate.status in BenchmarkCandidate.OPEN
    return {
        "nav": "review",
        "candidate": candidate,
        "task": candidate.task,
        "revision": revision,
        "holder": holder,
        "holds": holder is not None and holder.pk == request.user.pk,
        "is_open": is_open,
        "can_review": is_open and has_role(request.user, REVIEWER),
        "page_url": _page_url(candidate),
    }


def _head_context(candidate, revision) -> dict:
    diagnosis = candidate.diagnoses.select_related("revision").first()
    worst = None
    if diagnosis is not None:
        rank = diagnosis.issues.order_by("severity_rank").values_list("severity_rank", flat=True).first()
        worst = next((s for s, r in SEVERITY_RANK.items() if r == rank), None)
    return {"diagnosis": diagnosis, "worst": worst}


def _summary_context(candidate, revision) -> dict:
    """The latest diagnosis's issues counted by severity, and how many have a verdict."""
    diagnosis = candidate.diagnoses.first()
    severities = list(diagnosis.issues.values_list("pk", "severity")) if diagnosis else []
    verdicts = services.current_verdicts(candidate)
    counts = defaultdict(int)
    for _, severity in severities:
        counts[severity] += 1
    return {
        "severity_counts": sorted(counts.items(), key=lambda kv: SEVERITY_RANK[kv[0]]),
        "issue_count": len(severities),
        "judged": sum(1 for pk, _ in severities if str(pk) in verdicts),
    }


def _accept_context(candidate, revision) -> dict:
    final = candidate.decisions.filter(decision__in=(Decision.ACCEPT, Decision.REJECT)).select_related(
        "reviewer", "revision"
    )
    return {"accept_block": services.sanity_block(revision), "final": final.first()}


def _history_context(candidate, revision) -> dict:
    labels = {
        str(pk): f"#{pk} {severity} {component}{' ' + path if path else ''}"
        for pk, severity, component, path in DiagnosisIssue.objects.filter(diagnosis__candidate=candidate).values_list(
            "pk", "severity", "component", "path"
        )
    }
    names = dict(Verdict.choices)
    events = services.history(candidate)
    for event in events:
        event["verdict_list"] = [
            (labels.get(pk, f"#{pk}"), value, names.get(value, value))
            for pk, value in (event.get("verdicts") or {}).items()
        ]
    return {"events": events}


def _tree_context(candidate, revision, groups=None) -> dict:
    """The file tree: every file opens in the viewer beside it (slot "viewer")."""
    groups = groups or _files_by_role(revision)
    for group in groups:
        group["entries"] = [
            {"file": f, "query": Unit(revision, f.role, f.path, slot=VIEWER).query} for f in group["files"]
        ]
    return {"groups": groups}


def _diagnosis_job(candidate):
    active = JobRun.objects.filter(kind=DIAGNOSE_JOB, params__candidate_id=candidate.pk, status__in=JobRun.ACTIVE)
    return active.order_by("-id").first()


def _saved_context(revision: TaskRevision, run=None) -> dict:
    """What a save or an applied fix shows: what the new revision changed, and its sanity check."""
    if run is None:
        run = JobRun.objects.filter(kind=SANITY_JOB, params__revision_id=revision.pk).order_by("-id").first()
    parent = revision.parent
    if parent is None:
        return {"revision": revision, "diff": None, "run": run}
    diff = diff_revisions(parent, revision)
    fields, rubric = diff.fields, []
    if parent.rubric != revision.rubric:
        # The rubric is edited as JSON: show it changed as JSON lines, not rule by rule.
        rubric = diff_lines(
            rubric_json(parent.rubric), rubric_json(revision.rubric), f"r{parent.number}", f"r{revision.number}"
        )
        fields = [change for change in diff.fields if not change.name.startswith("rubric ")]
    return {"revision": revision, "diff": diff, "fields": fields, "rubric": rubric, "run": run}


def _page_context(request, candidate, **extra) -> dict:
    context = _base_context(request, candidate)
    revision = context["revision"]
    context |= _head_context(candidate, revision)
    diagnosis = context["diagnosis"]
    issues = list(diagnosis.issues.select_related("diagnosis__revision")) if diagnosis else []
    groups = _files_by_role(revision)
    context |= _summary_context(candidate, revision)
    context |= _sanity_context(revision) | _accept_context(candidate, revision) | _history_context(candidate, revision)
    context |= _tree_context(candidate, revision, groups)
    context |= {
        "rows": _rows(revision, groups, issues, candidate),
        "diagnosis_job": _diagnosis_job(candidate),
        "decide_form": DecisionForm(),
    }
    return context | extra


def _status(exc: Exception, request) -> int:
    """A refusal's HTTP status for a plain request; htmx gets 200 so that the answer is swapped in place."""
    if request.htmx:
        return 200
    if isinstance(exc, services.NotAllowed):
        return 403
    if isinstance(exc, (services.ClaimConflict, services.AcceptBlocked, StaleRevisionError)):
        return 409
    return 400


def _changed(response):
    return trigger_client_event(response, CHANGED)


# --- the page and its self-refreshing panels -------------------------------------------------------------------


@viewer_required
@require_GET
def candidate_page(request, pk):
    candidate = _get_candidate(pk)
    saved = None
    if request.GET.get("saved"):
        revision = candidate.task.revisions.filter(number=_number(request.GET["saved"], "saved")).first()
        saved = _saved_context(revision) if revision else None
    return TemplateResponse(request, "review/candidate.html", _page_context(request, candidate, saved_change=saved))


PARTS = {
    "head": _head_context,
    "sanity": lambda candidate, revision: _sanity_context(revision),
    "accept": _accept_context,
    "summary": _summary_context,
    "history": _history_context,
    "tree": _tree_context,
}


@viewer_required
@require_GET
def candidate_part(request, pk, name):
    if name not in PARTS:
        raise Http404(f"no panel {name!r}")
    candidate = _get_candidate(pk)
    if not request.htmx:
        return redirect(_page_url(candidate, name))
    context = _base_context(request, candidate)
    context |= PARTS[name](candidate, context["revision"])
    return TemplateResponse(request, f"review/candidate.html#{name}", context)


# --- viewing and editing one part ------------------------------------------------------------------------------


class EditForm(forms.Form):
    """One save of an inline editor, of the add-a-file form or of a delete button."""

    field = forms.ChoiceField(choices=[(f, f) for f in services.EDIT_FIELDS])
    path = forms.CharField(required=False, max_length=500)
    content = forms.CharField(required=False, strip=False)
    upload = forms.FileField(required=False)
    base_revision = forms.IntegerField(min_value=1)
    action = forms.ChoiceField(choices=[("edit", "edit"), ("create", "create"), ("delete", "delete")], required=False)
    reason = forms.CharField(required=False, max_length=400)
    fixes = forms.TypedMultipleChoiceField(coerce=int, required=False)
    slot = forms.ChoiceField(choices=[("", "row"), (VIEWER, VIEWER)], required=False)

    def __init__(self, *args, issue_ids=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["fixes"].choices = [(pk, pk) for pk in issue_ids]

    def clean(self):
        data = super().clean()
        data["path"] = (data.get("path") or "").strip()
        data["action"] = data.get("action") or "edit"
        if data.get("upload") and not data["path"]:
            data["path"] = data["upload"].name
        if data.get("field") not in FILE_FIELDS:
            data["path"] = ""
        elif not data["path"]:
            self.add_error("path", "Name the file.")
        return data

    @cached_property
    def content_value(self):
        """What to save: None deletes; an upload's bytes; typed text without the CRs browsers add to line ends."""
        data = self.cleaned_data
        if data["action"] == "delete":
            return None
        if data.get("upload"):
            return data["upload"].read()
        return data["content"].replace("\r\n", "\n")


def _unit_context(request, candidate, unit: Unit, mode: str = "view", **extra) -> dict:
    """A unit's template context; in edit mode with the issues about it (an edit may mark them fixed)."""
    context = _base_context(request, candidate) | {"unit": unit, "mode": mode}
    if mode in ("edit", "conflict"):
        diagnosis = candidate.diagnoses.first()
        context["unit_issues"] = [
            issue
            for issue in (diagnosis.issues.all() if diagnosis else [])
            if services.issue_target(issue) == (unit.field, unit.path)
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
    if field_name not in services.EDIT_FIELDS or bool(file_path) != (field_name in FILE_FIELDS):
        raise BadRequest("name a part: field=instruction|rubric, or field=input|reward|solution with a path")
    if slot not in ("", VIEWER):
        raise BadRequest(f"unknown slot {slot!r}")
    revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    unit = _load_unit(revision, field_name, file_path, slot)
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
    try:
        result = services.save_edit(
            candidate, user=request.user, field=field_name, path=file_path, content=form.content_value,
            base_revision=base, create=action == "create", reason=data["reason"], fixes=data["fixes"],
        )  # fmt: skip
    except (services.ReviewError, StaleRevisionError) as exc:
        return _edit_refused(request, candidate, form, base, exc)
    except JobEngineError as exc:
        return _saved_without_sanity(request, candidate, exc)
    if not request.htmx:
        return redirect(_saved_url(candidate, result.revision))
    unit = _load_unit(result.revision, field_name, file_path, data["slot"])
    context = _unit_context(request, candidate, unit, saved=_saved_context(result.revision, result.sanity_run))
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
    unit = _load_unit(current, field_name, file_path, data["slot"])
    extra = {"text": mine, "reason": data["reason"], "fixes": data["fixes"], "action": action}
    if isinstance(exc, StaleRevisionError):
        before = _load_unit(exc.base, field_name, file_path)
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
    (card,) = _issue_cards(candidate, [issue], context["revision"], {})
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
        fix = services.apply_suggested_fix(issue, user=request.user, base_revision=base)
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
    applied = _saved_context(fix.revision, fix.sanity_run)
    pieces = [("review/_candidate_issue.html", _issue_context(request, candidate, issue, applied=applied))]
    target = services.issue_target(issue)
    if _load_unit(fix.revision.parent, *target).exists:  # the part is on the page: show its new content there too
        unit = _load_unit(fix.revision, *target)
        pieces.append(("review/_candidate_unit.html", _unit_context(request, candidate, unit, oob=True)))
    return _changed(_fragments(request, pieces))


def _fix_conflict(request, candidate, issue, exc: StaleRevisionError):
    """The part changed since the reviewer looked: show how, and offer the fix again on top of the new revision."""
    field_name, file_path = services.issue_target(issue)
    before, now = _load_unit(exc.base, field_name, file_path), _load_unit(exc.current, field_name, file_path)
    conflict = {
        "base": exc.base,
        "current": exc.current,
        "changes": diff_lines(before.text or "", now.text or "", f"r{exc.base.number}", f"r{exc.current.number}"),
        "mine": diff_lines(now.text or "", _replacement_text(issue), f"r{exc.current.number}", "suggested"),
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
        context |= _accept_context(candidate, context["revision"])
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
            candidate, data["decision"], user=request.user, reason=data["reason"],
            override_reason=data["override_reason"],
        )  # fmt: skip
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


@admin_required
@require_POST
def diagnose(request, pk):
    candidate = _get_candidate(pk)
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


urlpatterns = [
    url("candidates/<int:pk>/", candidate_page, name="candidate"),
    url("candidates/<int:pk>/part/<slug:name>/", candidate_part, name="candidate_part"),
    url("candidates/<int:pk>/unit/", candidate_unit, name="candidate_unit"),
    url("candidates/<int:pk>/edit/", candidate_edit, name="candidate_edit"),
    url("candidates/<int:pk>/issues/<int:issue_pk>/", candidate_issue, name="candidate_issue"),
    url("candidates/<int:pk>/verdict/", verdict, name="verdict"),
    url("candidates/<int:pk>/apply-fix/", apply_fix, name="apply_fix"),
    url("candidates/<int:pk>/decide/", decide, name="decide"),
    url("candidates/<int:pk>/rediagnose/", diagnose, name="candidate_diagnose"),
]
