"""The pieces the candidate page is built from, apart from the views that serve them.

A `Unit` is one part of a revision a reviewer looks at and edits (the instruction, the rubric, one file); an
`IssueCard` is one of the LLM's issues as its card shows it. `review_rows` pairs them into the review grid: each
part of the task beside the issues about it. `PANELS` names the context of each panel that refreshes itself.
"""

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property
from urllib.parse import urlencode

from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.urls import reverse

from jobs.models import JobRun
from review import edits, rediagnosis, services, solving, team
from review.forms import VIEWER, DecisionForm
from review.models import SEVERITY_RANK, DiagnosisIssue, ReviewDecision
from review.solvability import solvability
from tasks.diffing import diff_lines, diff_revisions, role_folder
from tasks.job_kinds import SANITY_JOB
from tasks.models import TaskRevision
from tasks.templatetags.task_tags import score_levels
from tasks.viewers import MAX_TEXT_BYTES, decode_text, is_binary, view_file
from tasks.views import files_by_role, sanity_context

from .difficulty import difficulty_context

Decision = ReviewDecision.Decision
Verdict = ReviewDecision.Verdict


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
        return self.field in edits.FILE_FIELDS

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
            return "Binary files cannot be edited inline: download it, change it, then delete it here and add the new version."
        return f"Files over {MAX_TEXT_BYTES // 1024} KiB cannot be edited inline."

    @property
    def rubric_rows(self) -> list[dict]:
        """The rubric's rules with their own score levels, lowest first, as (level, description), for its table."""
        return [rule | {"levels": score_levels(rule)} for rule in self.revision.rubric]

    @property
    def editor_rows(self) -> int:
        return min(40, max(8, (self.text or "").count("\n") + 3))


def rubric_json(rules) -> str:
    """The rubric as the editor shows it: indented JSON, or nothing when there is no rubric."""
    return json.dumps(rules, indent=2, ensure_ascii=False) + "\n" if rules else ""


def load_units(revision: TaskRevision, keys, slot: str = "") -> dict[tuple[str, str], Unit]:
    """Units for (field, path) pairs, file contents read in one query."""
    keys = list(keys)
    wanted = Q(pk__in=[])
    for field_name, path in keys:
        if field_name in edits.FILE_FIELDS:
            wanted |= Q(role=field_name, path=path)
    files = {(f.role, f.path): f.blob.content for f in revision.files.filter(wanted).select_related("blob")}
    return {(f, p): Unit(revision, f, p, files.get((f, p)), slot) for f, p in keys}


def load_unit(revision: TaskRevision, field_name: str, path: str = "", slot: str = "") -> Unit:
    return load_units(revision, [(field_name, path)], slot)[(field_name, path)]


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
        return edits.issue_target(self.issue)


def replacement_text(issue: DiagnosisIssue) -> str:
    """The suggested replacement as the editor would hold it (a rubric's JSON indented like the rubric editor's)."""
    if issue.component == DiagnosisIssue.Component.RUBRIC:
        try:
            return rubric_json(json.loads(issue.replacement))
        except ValueError:
            pass
    return issue.replacement


def _viewer(candidate):
    """Who is looking (the page views set it): while the review is blind, a reviewer sees only their own decisions
    and verdicts (review.team.visible_decisions); unset, nobody's are shown."""
    return getattr(candidate, "review_viewer", None) or AnonymousUser()


def issue_cards(candidate, issues, revision: TaskRevision, units: dict) -> list[IssueCard]:
    """Cards for issues of the candidate's latest diagnosis, compared with `revision` (units: its loaded parts)."""
    verdicts = services.current_verdicts(candidate, _viewer(candidate))
    fixed_in = {}
    fixes = (
        team.visible_decisions(candidate, _viewer(candidate))
        .filter(decision=Decision.FIX)
        .select_related("revision")
        .order_by("created_at", "id")
    )
    for decision in fixes:
        for pk, value in decision.verdicts.items():
            if value == Verdict.FIXED and decision.revision:
                fixed_in[pk] = decision.revision.number
    cards = []
    for issue in issues:
        card = IssueCard(issue, verdicts.get(str(issue.pk), ""), fixed_in.get(str(issue.pk)))
        field_name, path = card.target
        unit = units.get((field_name, path)) or load_unit(revision, field_name, path)
        card.missing_now = bool(unit.is_file and path and not unit.exists)
        card.anchor = (
            unit.dom_id
            if unit.exists and (unit.path or not unit.is_file)
            else ("row-files" if field_name == "input" else "row-checker")
        )
        diagnosed = issue.diagnosis.revision
        if card.verdict != Verdict.FIXED and diagnosed.pk != revision.pk and (not unit.is_file or path):
            if edits.field_state(diagnosed, field_name, path) != edits.field_state(revision, field_name, path):
                card.changed_since = diagnosed.number
        if issue.replacement is not None:
            suggested = replacement_text(issue)
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


def review_rows(revision: TaskRevision, groups, issues, candidate) -> list[dict]:
    """The review grid: each part of the task beside the issues about it, in reading order."""
    present = {(g["role"], f.path) for g in groups for f in g["files"]}
    named_inputs = sorted({i.path for i in issues if i.component == "input_file" and ("input", i.path) in present})
    reward = [f.path for g in groups if g["role"] == "reward" for f in g["files"]]
    keys = [("instruction", ""), ("rubric", "")]
    keys += [("input", p) for p in named_inputs] + [("reward", p) for p in reward]
    units = load_units(revision, keys)
    cards = issue_cards(candidate, issues, revision, units)
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


# --- the panels that refresh themselves ------------------------------------------------------------------------


def head_context(candidate, revision) -> dict:
    """The latest diagnosis and the worst severity among its issues, for the page's head."""
    diagnosis = candidate.diagnoses.select_related("revision").first()
    worst = None
    if diagnosis is not None:
        rank = diagnosis.issues.order_by("severity_rank").values_list("severity_rank", flat=True).first()
        worst = next((s for s, r in SEVERITY_RANK.items() if r == rank), None)
    return {"diagnosis": diagnosis, "worst": worst}


def summary_context(candidate, revision) -> dict:
    """The latest diagnosis's issues counted by severity, and how many have a verdict."""
    diagnosis = candidate.diagnoses.first()
    severities = list(diagnosis.issues.values_list("pk", "severity")) if diagnosis else []
    verdicts = services.current_verdicts(candidate, _viewer(candidate))
    counts = defaultdict(int)
    for _, severity in severities:
        counts[severity] += 1
    return {
        "severity_counts": sorted(counts.items(), key=lambda kv: SEVERITY_RANK[kv[0]]),
        "issue_count": len(severities),
        "judged": sum(1 for pk, _ in severities if str(pk) in verdicts),
    }


def accept_context(candidate, revision) -> dict:
    """Why accepting `revision` is blocked (None when it is not), its proof of solvability (review.solvability), and
    the final decision once there is one."""
    visible = team.visible_decisions(candidate, _viewer(candidate))
    final = visible.filter(decision__in=(Decision.ACCEPT, Decision.REJECT)).select_related("reviewer", "revision")
    return {
        "accept_block": services.sanity_block(revision, candidate.benchmark),
        "final": final.first(),
        "team": team.candidate_team(candidate, _viewer(candidate)),
        "solvability": solvability(revision),
    }


def history_context(candidate, revision) -> dict:
    """The candidate's timeline, each verdict labelled with the issue it judged."""
    labels = {
        str(pk): f"#{pk} {severity} {component}{' ' + path if path else ''}"
        for pk, severity, component, path in DiagnosisIssue.objects.filter(diagnosis__candidate=candidate).values_list(
            "pk", "severity", "component", "path"
        )
    }
    names = dict(Verdict.choices)
    events = services.history(candidate, _viewer(candidate))
    for event in events:
        event["verdict_list"] = [
            (labels.get(pk, f"#{pk}"), value, names.get(value, value))
            for pk, value in (event.get("verdicts") or {}).items()
        ]
    return {"events": events}


def tree_context(candidate, revision, groups=None) -> dict:
    """The file tree: every file opens in the viewer beside it (slot "viewer")."""
    groups = groups or files_by_role(revision)
    for group in groups:
        group["entries"] = [
            {"file": f, "query": Unit(revision, f.role, f.path, slot=VIEWER).query} for f in group["files"]
        ]
    return {"groups": groups}


def check_links(candidate, revision, subscores: dict) -> list[dict]:
    """Each check with where the checker of `revision` sets it: [{name, value, pays, places: [(path, lines, dom id
    of the file's row)], url}] (the url opens a place in the editor, its lines highlighted)."""
    url = reverse("review:candidate_check", args=[candidate.pk])
    texts = solving.checker_texts(revision) if subscores else {}
    rows = []
    for name, value in subscores.items():
        places = [
            (path, lines, Unit(revision, "reward", path).dom_id)
            for path, lines in solving.check_lines(revision, name, texts)
        ]
        rows.append({"name": name, "value": value, "pays": value > 0, "places": places, "url": url})
    return rows


def sanity_panel_context(candidate, revision) -> dict:
    """The sanity card: the report, with the checks that pay a lazy agent and those the solution fails linked to
    the checker lines that set them, and each run's output."""
    context = sanity_context(revision)
    report = context["sanity"]
    if report is None:
        return context | {"sanity_paying": [], "sanity_failing": [], "sanity_outputs": []}
    failing = {}
    if report.solution_run:
        failing = {n: v for n, v in (report.solution_run.get("subscores") or {}).items() if v < 1}
    outputs = [
        (kind, run.get("stdout", ""), run.get("stderr", ""))
        for kind, run in context["sanity_rows"]
        if run and (run.get("stdout") or run.get("stderr"))
    ]
    return context | {
        "sanity_paying": check_links(candidate, revision, report.paying_checks),
        "sanity_failing": check_links(candidate, revision, failing),
        "sanity_outputs": outputs,
    }


def diagnosis_state(candidate, revision) -> dict:
    """Whether the checker changed since the diagnosed revision, and why no diagnosis can be started (if so)."""
    diagnosis = candidate.diagnoses.select_related("revision").first()
    changed = bool(
        diagnosis
        and diagnosis.revision_id != revision.pk
        and rediagnosis.checker_state(diagnosis.revision) != rediagnosis.checker_state(revision)
    )
    return {"checker_changed": changed, "diagnosis_unavailable": rediagnosis.diagnosis_endpoint_missing()}


def solve_panel_context(candidate, revision, user, can_review: bool) -> dict:
    """The solve panel: the reviewer's scratch workspace, its changes against the input files, its latest run with
    the checks linked to the current checker's lines, and whether it can be saved as the solution (or why not)."""
    found = solving.workspace(candidate, user) if can_review else None
    latest = solving.runs(candidate, user).first() if found else None
    proof, why = solving.proof_run(candidate, user, found) if found else (None, "")
    result = latest.result if latest and latest.status == JobRun.Status.SUCCEEDED and latest.result else None
    return {
        "ws": found,
        "ws_changes": solving.changes_against(found, revision) if found else {},
        "ws_files": sorted(found.files) if found else [],
        "ws_size": found.size if found else 0,
        "run": latest,
        "run_active": bool(latest and latest.status in JobRun.ACTIVE),
        "result": result,
        "checks": check_links(candidate, revision, (result or {}).get("subscores") or {}),
        "proof": proof,
        "proof_missing": why,
        "has_solution": revision.files.filter(role="solution").exists(),
        "limits": {"files": solving.MAX_FILES, "mib": solving.MAX_BYTES // (1024 * 1024)},
    }


# The panels of the page that refresh themselves on "review-changed", by name: the context each one renders from.
PANELS = {
    "head": head_context,
    "difficulty": lambda candidate, revision: difficulty_context(candidate),
    "sanity": sanity_panel_context,
    "accept": accept_context,
    "summary": summary_context,
    "history": history_context,
    "tree": tree_context,
    # Refreshed only while someone else holds the claim (a form being typed into is never swapped out).
    "decide": lambda candidate, revision: accept_context(candidate, revision) | {"decide_form": DecisionForm()},
}


# --- what a save changed ---------------------------------------------------------------------------------------


def saved_context(revision: TaskRevision, run=None) -> dict:
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
