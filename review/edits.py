"""New revisions of a candidate's task made in the review: the LLM's suggested fixes applied, and reviewers' own
edits of one part (the instruction, the rubric, a file). Each is a new revision recorded as a FIX decision, with a
sanity check of it queued; review.solving builds its multi-part saves from the same pieces.

Views, the API and review.solving call these with the acting user; the review's other state changes (claims,
verdicts, decisions, freezing) are review.services'.
"""

import json
from dataclasses import dataclass

from django.db import transaction

import jobs
from accounts.roles import REVIEWER
from lib.bounds import TextRefused, check_text
from tasks.diffing import role_folder
from tasks.job_kinds import SANITY_JOB
from tasks.models import Task, TaskRevision
from tasks.package import PackageError, validate_rubric
from tasks.paths import TaskFileError, normalize_path
from tasks.services import SaveOutcome, revise_task

from .models import BenchmarkCandidate, DiagnosisIssue, ReviewDecision
from .services import ClaimConflict, ReviewError, _check_verdicts, _note, _require, _require_holder

Decision = ReviewDecision.Decision


# --- suggested fixes -------------------------------------------------------------------------------------------


@dataclass
class FixResult:
    decision: ReviewDecision
    revision: TaskRevision
    sanity_run: object  # jobs.models.JobRun


def apply_suggested_fix(issue: DiagnosisIssue, *, user, base_revision: TaskRevision, reason: str = "") -> FixResult:
    """Apply an issue's concrete replacement as a new revision, and re-run the sanity checks on it.

    `base_revision` is the revision the reviewer saw. When the part the issue concerns changed since, revise_task
    raises tasks.services.StaleRevisionError and nothing is written; changes to other parts are no conflict (see
    base_for). A replacement equal to the current content is refused: there is nothing to apply.
    """
    _require(user, REVIEWER, "applying a fix")
    _note(reason, "the reason")
    if issue.replacement is None:
        raise ReviewError("this issue suggests no concrete replacement to apply")
    candidate = issue.diagnosis.candidate
    changes = _replacement_changes(issue)
    field, path = issue_target(issue)
    with transaction.atomic():
        _require_holder(candidate, user)
        task = Task.objects.select_for_update(of=("self",)).select_related("current_revision").get(pk=candidate.task_id)
        current = task.current_revision
        message = f"review: apply fix of issue {issue.pk} ({issue.component}{' ' + issue.path if issue.path else ''})"
        base = base_for(current, base_revision, field, path)
        result = revise_task(task, user=user, message=message, base_revision=base, **changes)
        if result.outcome == SaveOutcome.UNCHANGED:
            raise ReviewError(f"the suggested replacement is already applied: r{current.number} holds it")
        decision = ReviewDecision.objects.create(
            candidate=candidate,
            reviewer=user,
            decision=Decision.FIX,
            reason=reason or message,
            verdicts={str(issue.pk): ReviewDecision.Verdict.FIXED},
            revision=result.revision,
        )
        run = jobs.enqueue(SANITY_JOB, created_by=user, revision_id=result.revision.pk)
    return FixResult(decision, result.revision, run)


def issue_target(issue: DiagnosisIssue) -> tuple[str, str]:
    """The part of the task an issue concerns, as save_edit names it: (field, path)."""
    Component = DiagnosisIssue.Component
    if issue.component in (Component.INSTRUCTION, Component.RUBRIC):
        return issue.component, ""
    return ("input" if issue.component == Component.INPUT_FILE else "reward"), issue.path


def _replacement_changes(issue: DiagnosisIssue) -> dict:
    """revise_task's keyword arguments for the issue's replacement."""
    Component = DiagnosisIssue.Component
    text = issue.replacement
    if issue.component == Component.INSTRUCTION:
        if not text.strip():
            raise ReviewError("the suggested instruction is empty")
        return {"instruction": text}
    if issue.component == Component.RUBRIC:
        try:
            return {"rubric": validate_rubric(json.loads(text))}
        except ValueError as exc:
            raise ReviewError(f"the suggested rubric is not a valid rubric: {exc}") from None
    role = "input" if issue.component == Component.INPUT_FILE else "reward"
    if not issue.path:
        raise ReviewError(f"the {issue.get_component_display().lower()} issue names no file to replace")
    return {"file_changes": {(role, issue.path): text.encode()}}


def record_fix(candidate: BenchmarkCandidate, revision: TaskRevision, *, user, reason: str, verdicts=None):
    """Record that a reviewer's own edit (made through tasks.services.revise_task) fixed the candidate."""
    _require(user, REVIEWER, "recording a fix")
    _note(reason, "the reason")
    if revision.task_id != candidate.task_id:
        raise ReviewError("the revision belongs to another task")
    with transaction.atomic():
        _require_holder(candidate, user)
        return ReviewDecision.objects.create(
            candidate=candidate,
            reviewer=user,
            decision=Decision.FIX,
            reason=reason,
            verdicts=_check_verdicts(candidate, verdicts or {}),
            revision=revision,
        )


# --- reviewers' own edits --------------------------------------------------------------------------------------

FILE_FIELDS = {"input": "input file", "reward": "checker file", "solution": "solution file"}
EDIT_FIELDS = ("instruction", "rubric", *FILE_FIELDS)


@dataclass
class EditResult:
    decision: ReviewDecision  # the FIX decision pointing at the new revision
    revision: TaskRevision  # its parent is the revision the edit was applied to
    sanity_run: object  # jobs.models.JobRun


def field_state(revision: TaskRevision, field: str, path: str = ""):
    """What one part of a revision holds, comparable across revisions: the instruction's text, the rubric's rules,
    or a file's content hash (None: no such file)."""
    if field == "instruction":
        return revision.instruction
    if field == "rubric":
        return revision.rubric
    return revision.files.filter(role=field, path=path).values_list("blob_id", flat=True).first()


def base_for(current: TaskRevision, base: TaskRevision, field: str, path: str) -> TaskRevision:
    """The revision a change of one part, made while looking at `base`, is checked against.

    A change elsewhere since `base` (another file, the rubric) is no conflict: the change goes on top of the
    current revision. Only when this very part changed is `base` kept, so that revise_task raises
    StaleRevisionError and the reviewer gets to see what changed before overwriting it.
    """
    if base.pk == current.pk or field_state(base, field, path) == field_state(current, field, path):
        return current
    return base


def save_edit(
    candidate: BenchmarkCandidate,
    *,
    user,
    field: str,
    content,
    base_revision: TaskRevision,
    path: str = "",
    create: bool = False,
    reason: str = "",
    fixes=(),
) -> EditResult:
    """A reviewer's own edit of one part of the candidate's task: a new revision, recorded as a FIX decision,
    with a sanity check of the new revision queued.

    `field` is "instruction", "rubric" (`content` is its JSON text; blank for no rubric) or a file role of
    FILE_FIELDS with `path` (`content` is text or bytes; None deletes the file; `create` refuses to overwrite an
    existing file). `fixes` are ids of issues this edit fixes. Editing needs the reviewer's own running claim.
    Raises ReviewError (bad content, no claim, nothing changed) or StaleRevisionError (this part changed since
    `base_revision`); either way nothing is written.
    """
    _require(user, REVIEWER, "editing a candidate")
    _note(reason, "the reason")
    path, changes, label = edit_changes(field, path, content)
    with transaction.atomic():
        require_own_claim(candidate, user)
        task = Task.objects.select_for_update(of=("self",)).select_related("current_revision").get(pk=candidate.task_id)
        current = task.current_revision
        if base_revision.task_id != task.pk:
            raise ReviewError("the base revision belongs to another task")
        if create and field_state(current, field, path) is not None:
            raise ReviewError(f"{label} exists already: edit it instead")
        verb = "add" if create else ("delete" if content is None else "edit")
        message = f"review: {verb} {label}" + (f": {reason.strip()}" if reason.strip() else "")
        try:
            result = revise_task(
                task,
                user=user,
                message=message,
                base_revision=base_for(current, base_revision, field, path),
                **changes,
            )
        except (PackageError, TaskFileError) as exc:
            raise ReviewError(str(exc)) from None
        if result.outcome == SaveOutcome.UNCHANGED:
            raise ReviewError(f"nothing to save: {label} is the same as in r{current.number}")
        verdicts = dict.fromkeys((str(pk) for pk in fixes), ReviewDecision.Verdict.FIXED)
        decision = record_fix(candidate, result.revision, user=user, reason=message, verdicts=verdicts)
        run = jobs.enqueue(SANITY_JOB, created_by=user, revision_id=result.revision.pk)
    return EditResult(decision, result.revision, run)


def require_own_claim(candidate: BenchmarkCandidate, user) -> None:
    """Unlike a verdict, an edit never claims on the way: nobody rewrites a candidate they have not taken."""
    candidate.refresh_from_db()
    if candidate.status not in BenchmarkCandidate.OPEN:
        raise ReviewError(f"the candidate is already {candidate.get_status_display().lower()}")
    holder = candidate.held_by()
    if holder is None:
        raise ReviewError("claim this candidate to edit it")
    if holder.pk != user.pk:
        raise ClaimConflict(
            f"claim this candidate to edit it: {holder.get_username()} holds it until "
            f"{candidate.claim_expires_at:%H:%M} UTC"
        )


def edit_changes(field: str, path: str, content) -> tuple[str, dict, str]:
    """(the normalised path, revise_task's keyword arguments, the part in words) for an edit."""
    if field == "instruction":
        if not isinstance(content, str) or not content.strip():
            raise ReviewError("the instruction cannot be empty")
        return "", {"instruction": content}, "the instruction"
    if field == "rubric":
        return "", {"rubric": parse_rubric(content or "")}, "the rubric"
    if field not in FILE_FIELDS:
        raise ReviewError(f"{field!r} is not an editable part: choose one of {', '.join(EDIT_FIELDS)}")
    try:
        path = normalize_path((path or "").strip())
    except TaskFileError as exc:
        raise ReviewError(f"bad file path {exc}") from None
    data = content.encode() if isinstance(content, str) else (None if content is None else bytes(content))
    return path, {"file_changes": {(field, path): data}}, f"{FILE_FIELDS[field]} {role_folder(field)}{path}"


def parse_rubric(text: str) -> list[dict]:
    """A rubric typed as JSON, validated; blank text means no rubric. Raises ReviewError saying what is wrong."""
    if not text.strip():
        return []
    _bounded_rubric(text)
    try:
        rules = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReviewError(f"the rubric is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    try:
        return validate_rubric(rules)
    except PackageError as exc:
        raise ReviewError(f"the rubric is not valid: {exc}") from None


def _bounded_rubric(text: str) -> None:
    try:
        check_text(text, "the rubric", setting="CLAWGYM_MAX_RUBRIC_BYTES")
    except TextRefused as exc:
        raise ReviewError(str(exc)) from None
