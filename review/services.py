"""Every state change of the review: proposing, claiming, verdicts, fixes, decisions and freezing (which chooses the
revisions a new benchmark version pins; benchmarks.services stores it, and makes benchmarks).

Views, the API, commands and jobs call these with the acting user; nothing else writes review rows.
"""

import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import jobs
from accounts.roles import ADMIN, REVIEWER, has_role
from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import BenchmarkError, create_version
from benchmarks.services import NotAllowed as BenchmarkNotAllowed
from jobs.models import JobRun
from lib.bounds import TextRefused, check_chars, check_text, parse_id
from tasks.diffing import role_folder
from tasks.job_kinds import SANITY_JOB
from tasks.models import SanityReport, Task, TaskRevision
from tasks.package import PackageError, validate_rubric
from tasks.paths import TaskFileError, normalize_path
from tasks.services import SaveOutcome, StaleRevisionError, revise_task

from . import solvability, team
from .job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
from .models import BenchmarkCandidate, ClaimEvent, DiagnosisIssue, ReviewDecision
from .rediagnosis import rediagnose_after_save

Status = BenchmarkCandidate.Status
Decision = ReviewDecision.Decision


class ReviewError(Exception):
    """The action is not allowed in the candidate's current state; the message says why."""


class ClaimConflict(ReviewError):
    """Another reviewer holds the candidate."""


class AcceptBlocked(ReviewError):
    """Accepting needs a passing sanity report and proof of solvability, or an admin's written override reason."""


class NotAllowed(ReviewError):
    """The acting user lacks the role the action needs."""


def _note(text: str, what: str) -> str:
    """A reason, note or comment a person wrote, within CLAWGYM_MAX_NOTE_BYTES (lib.bounds)."""
    try:
        return check_text(text or "", what, setting="CLAWGYM_MAX_NOTE_BYTES")
    except TextRefused as exc:
        raise ReviewError(str(exc)) from None


def _name(text: str, what: str, model, field: str = "name") -> str:
    """A name within its column's length (a CharField's max_length)."""
    try:
        return check_chars(text, what, model._meta.get_field(field).max_length)
    except TextRefused as exc:
        raise ReviewError(str(exc)) from None


def http_status(exc: Exception) -> int:
    """The HTTP status of a refusal, the same for the API and the pages: 403 when the role is missing, 409 for a
    conflict (another reviewer's claim, a blocked accept, a stale base revision), else 400."""
    if isinstance(exc, NotAllowed):
        return 403
    if isinstance(exc, (ClaimConflict, AcceptBlocked, StaleRevisionError)):
        return 409
    return 400


def claim_minutes() -> int:
    return settings.CLAWGYM_REVIEW_CLAIM_MINUTES


def _require(user, role: str, what: str) -> None:
    if not has_role(user, role):
        raise NotAllowed(f"{what} needs the {role} role")


# --- candidates ------------------------------------------------------------------------------------------------


@dataclass
class ProposeResult:
    created: int
    existing: int
    skipped: list[str]  # tasks without a revision


def propose_candidates(benchmark: Benchmark, tasks, *, user) -> ProposeResult:
    """Make each task a candidate of the benchmark, awaiting diagnosis. Tasks already proposed are left alone."""
    tasks = list(tasks)
    skipped = [t.external_id for t in tasks if t.current_revision_id is None]
    wanted = [t for t in tasks if t.current_revision_id is not None]
    existing = set(
        BenchmarkCandidate.objects.filter(benchmark=benchmark, task__in=wanted).values_list("task_id", flat=True)
    )
    new = [
        BenchmarkCandidate(task=t, benchmark=benchmark, proposed_by=user if user and user.is_authenticated else None)
        for t in wanted
        if t.pk not in existing
    ]
    # ignore_conflicts: a concurrent proposal of the same task is not an error, the candidate exists either way.
    BenchmarkCandidate.objects.bulk_create(new, ignore_conflicts=True)
    return ProposeResult(created=len(new), existing=len(existing), skipped=skipped)


def _active_diagnoses() -> dict:
    """{candidate id: its review.diagnose run that is queued or running}."""
    runs = JobRun.objects.filter(kind=DIAGNOSE_JOB, status__in=JobRun.ACTIVE).order_by("id")
    return {run.params.get("candidate_id"): run for run in runs}


def start_diagnosis(candidates, *, user) -> list:
    """One review.diagnose run per candidate: the one already queued or running for it, else a new one.

    So a second press of "diagnose" (or a batch overlapping a single start) never diagnoses a candidate twice.
    """
    active = _active_diagnoses()
    return [active.get(c.pk) or jobs.enqueue(DIAGNOSE_JOB, created_by=user, candidate_id=c.pk) for c in candidates]


def start_diagnosis_batch(benchmark: Benchmark | None, *, user):
    """Queue one review.diagnose_batch job over every candidate awaiting diagnosis (of `benchmark`, or of all).

    Returns the parent JobRun, or None when nothing awaits diagnosis. Candidates a diagnosis job is already queued
    or running for are left out, so pressing the button twice does not diagnose anything twice.
    """
    if user is not None:
        _require(user, ADMIN, "starting diagnoses")
    waiting = BenchmarkCandidate.objects.filter(status=Status.AWAITING_DIAGNOSIS)
    if benchmark is not None:
        waiting = waiting.filter(benchmark=benchmark)
    busy = _active_diagnoses()
    ids = [pk for pk in waiting.order_by("id").values_list("pk", flat=True) if pk not in busy]
    if not ids:
        return None
    return jobs.enqueue(DIAGNOSE_BATCH_JOB, created_by=user, candidate_ids=ids)


# --- claims ----------------------------------------------------------------------------------------------------


def claim(candidate: BenchmarkCandidate, *, user, minutes: int | None = None) -> BenchmarkCandidate:
    """Lock the candidate to `user` for `minutes` (settings.CLAWGYM_REVIEW_CLAIM_MINUTES by default).

    One conditional UPDATE: of two reviewers claiming at once only one matches; the other gets ClaimConflict.
    A claim that has expired may be taken; claiming again extends one's own claim.
    """
    _require(user, REVIEWER, "claiming a candidate")
    now = timezone.now()
    free = Q(claimed_by__isnull=True) | Q(claim_expires_at__lte=now) | Q(claimed_by=user)
    taken = BenchmarkCandidate.objects.filter(free, pk=candidate.pk, status__in=BenchmarkCandidate.OPEN).update(
        claimed_by=user,
        claimed_at=now,
        claim_expires_at=now + timedelta(minutes=minutes or claim_minutes()),
        updated_at=now,
    )
    candidate.refresh_from_db()
    if not taken:
        if candidate.status not in BenchmarkCandidate.OPEN:
            raise ReviewError(f"the candidate is {candidate.get_status_display().lower()}: there is nothing to claim")
        holder = candidate.held_by(now)
        raise ClaimConflict(
            f"{holder.get_username() if holder else 'another reviewer'} holds this candidate until "
            f"{candidate.claim_expires_at:%H:%M} UTC"
        )
    if candidate.status == Status.AWAITING_REVIEW:
        BenchmarkCandidate.objects.filter(pk=candidate.pk, status=Status.AWAITING_REVIEW).update(
            status=Status.IN_REVIEW
        )
        candidate.refresh_from_db()
    ClaimEvent.objects.create(candidate=candidate, user=user, action=ClaimEvent.Action.CLAIM)
    return candidate


def release(candidate: BenchmarkCandidate, *, user) -> BenchmarkCandidate:
    """Give the claim back. Only its holder (or an admin) may; anyone may clear a claim that has run out.
    Releasing an unclaimed candidate changes nothing."""
    _require(user, REVIEWER, "releasing a candidate")
    now = timezone.now()
    owned = Q(claimed_by=user) | Q(claim_expires_at__lte=now) if not has_role(user, ADMIN) else Q()
    released = BenchmarkCandidate.objects.filter(owned, pk=candidate.pk, claimed_by__isnull=False).update(
        claimed_by=None, claimed_at=None, claim_expires_at=None, updated_at=now
    )
    candidate.refresh_from_db()
    if not released and candidate.claimed_by_id:
        raise ClaimConflict(
            f"{candidate.claimed_by.get_username()} holds this candidate until "
            f"{candidate.claim_expires_at:%H:%M} UTC, not you"
        )
    if released:
        BenchmarkCandidate.objects.filter(pk=candidate.pk, status=Status.IN_REVIEW).update(
            status=Status.AWAITING_REVIEW
        )
        candidate.refresh_from_db()
        ClaimEvent.objects.create(candidate=candidate, user=user, action=ClaimEvent.Action.RELEASE)
    return candidate


def expire_claims() -> int:
    """Hand back the claims that ran out: their candidates are awaiting review again, and their history says so.

    The queue and the candidate pages call this before they read, so a status never shows a claim nobody holds.
    Each candidate is one conditional UPDATE: of two requests expiring the same claim, one records it.
    """
    now = timezone.now()
    expired = BenchmarkCandidate.objects.filter(status=Status.IN_REVIEW, claim_expires_at__lte=now)
    count = 0
    for pk, holder_id in expired.values_list("pk", "claimed_by_id"):
        handed_back = BenchmarkCandidate.objects.filter(
            pk=pk, status=Status.IN_REVIEW, claimed_by_id=holder_id, claim_expires_at__lte=now
        ).update(status=Status.AWAITING_REVIEW, claimed_by=None, claimed_at=None, claim_expires_at=None)
        if handed_back:
            ClaimEvent.objects.create(candidate_id=pk, user_id=holder_id, action=ClaimEvent.Action.EXPIRE)
            count += 1
    return count


def _require_holder(candidate: BenchmarkCandidate, user) -> None:
    """Review actions need the claim, so that two reviewers never act on one candidate unawares.

    A candidate nobody holds is claimed on the way; one held by someone else raises ClaimConflict.
    """
    candidate.refresh_from_db()
    if candidate.status not in BenchmarkCandidate.OPEN:
        raise ReviewError(f"the candidate is already {candidate.get_status_display().lower()}")
    holder = candidate.held_by()
    if holder is None or holder.pk != user.pk:
        claim(candidate, user=user)


# --- verdicts, fixes and decisions -----------------------------------------------------------------------------


def current_verdicts(candidate: BenchmarkCandidate, viewer=None) -> dict[str, str]:
    """{issue id: verdict}, the latest decision naming an issue winning; with `viewer`, only the decisions they may
    see (review.team.visible_decisions: a blind second reviewer sees their own)."""
    verdicts: dict[str, str] = {}
    rows = candidate.decisions.all() if viewer is None else team.visible_decisions(candidate, viewer)
    for row in rows.order_by("created_at", "id").values_list("verdicts", flat=True):
        verdicts.update(row or {})
    return verdicts


def _check_verdicts(candidate: BenchmarkCandidate, verdicts: dict) -> dict[str, str]:
    if not isinstance(verdicts, dict):
        raise ReviewError("verdicts must map issue ids to valid, not_valid or fixed")
    known = set(DiagnosisIssue.objects.filter(diagnosis__candidate=candidate).values_list("pk", flat=True))
    out = {}
    for key, value in verdicts.items():
        if value not in ReviewDecision.Verdict.values:
            raise ReviewError(f"issue {key}: verdict {value!r} is not one of {ReviewDecision.Verdict.values}")
        pk = parse_id(key)
        if pk not in known:
            raise ReviewError(f"issue {key} is not an issue of this candidate's diagnoses")
        out[str(pk)] = value
    return out


def record_verdicts(candidate: BenchmarkCandidate, verdicts: dict, *, user, reason: str = "") -> ReviewDecision:
    """Mark LLM issues valid, not valid or fixed (an append-only decision of kind "verdict")."""
    _require(user, REVIEWER, "judging an issue")
    _note(reason, "the verdict comment")
    with transaction.atomic():
        _require_holder(candidate, user)
        checked = _check_verdicts(candidate, verdicts)
        if not checked:
            raise ReviewError("no verdict given")
        return ReviewDecision.objects.create(
            candidate=candidate, reviewer=user, decision=Decision.VERDICT, verdicts=checked, reason=reason
        )


@dataclass
class FixResult:
    decision: ReviewDecision
    revision: TaskRevision
    sanity_run: object  # jobs.models.JobRun


def apply_suggested_fix(issue: DiagnosisIssue, *, user, base_revision: TaskRevision, reason: str = "") -> FixResult:
    """Apply an issue's concrete replacement as a new revision, and re-run the sanity checks on it.

    `base_revision` is the revision the reviewer saw. When the part the issue concerns changed since, revise_task
    raises tasks.services.StaleRevisionError and nothing is written; changes to other parts are no conflict (see
    _base_for). A replacement equal to the current content is refused: there is nothing to apply.
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
        base = _base_for(current, base_revision, field, path)
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
        rediagnose_after_save(candidate, result.revision, user=user)
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


def _base_for(current: TaskRevision, base: TaskRevision, field: str, path: str) -> TaskRevision:
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
    path, changes, label = _edit_changes(field, path, content)
    with transaction.atomic():
        _require_own_claim(candidate, user)
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
                base_revision=_base_for(current, base_revision, field, path),
                **changes,
            )
        except (PackageError, TaskFileError) as exc:
            raise ReviewError(str(exc)) from None
        if result.outcome == SaveOutcome.UNCHANGED:
            raise ReviewError(f"nothing to save: {label} is the same as in r{current.number}")
        verdicts = dict.fromkeys((str(pk) for pk in fixes), ReviewDecision.Verdict.FIXED)
        decision = record_fix(candidate, result.revision, user=user, reason=message, verdicts=verdicts)
        run = jobs.enqueue(SANITY_JOB, created_by=user, revision_id=result.revision.pk)
        rediagnose_after_save(candidate, result.revision, user=user)
    return EditResult(decision, result.revision, run)


def _require_own_claim(candidate: BenchmarkCandidate, user) -> None:
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


def _edit_changes(field: str, path: str, content) -> tuple[str, dict, str]:
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


def set_lazy_tolerance(benchmark: Benchmark, tolerance: float, *, user) -> Benchmark:
    """Set what a lazy agent may earn with a candidate's checker before the benchmark's accept gate blocks it."""
    _require(user, ADMIN, "setting a benchmark's lazy-score tolerance")
    tolerance = float(tolerance)
    if not 0.0 <= tolerance <= 1.0:  # NaN fails this too
        raise ReviewError(f"the lazy-score tolerance must be in [0, 1], not {tolerance:g}")
    Benchmark.objects.filter(pk=benchmark.pk).update(lazy_tolerance=tolerance)
    benchmark.lazy_tolerance = tolerance
    return benchmark


def _bounded_rubric(text: str) -> None:
    try:
        check_text(text, "the rubric", setting="CLAWGYM_MAX_RUBRIC_BYTES")
    except TextRefused as exc:
        raise ReviewError(str(exc)) from None


NOT_SANITY_CHECKED = solvability.NOT_SANITY_CHECKED  # sanity_block's first reason


def sanity_block(revision: TaskRevision, benchmark: Benchmark) -> str | None:
    """Why accepting this revision into `benchmark` is blocked (every reason of solvability.accept_blocks, in one
    text), or None."""
    blocks = solvability.accept_blocks(revision, benchmark)
    return "; and ".join(block.reason for block in blocks) or None


def decide(
    candidate: BenchmarkCandidate,
    decision: str,
    *,
    user,
    reason: str = "",
    verdicts: dict | None = None,
    override_reason: str = "",
) -> ReviewDecision:
    """Accept, fix or reject. Accepting pins the task's current revision and is blocked (solvability.accept_blocks)
    while its checker's latest sanity report is missing, crashed, pays a lazy agent more than the benchmark's
    tolerance or finds the reference solution failing, or while nothing proves the revision solvable, unless an
    admin writes an override reason.
    Rejecting needs a reason. "fix" records the current revision as the reviewer's fix and keeps it open.
    """
    _require(user, REVIEWER, "deciding on a candidate")
    if decision not in (Decision.ACCEPT, Decision.FIX, Decision.REJECT):
        raise ReviewError(f"decision {decision!r} is not one of accept, fix, reject")
    if decision == Decision.REJECT and not reason.strip():
        raise ReviewError("rejecting needs a reason")
    _note(reason, "the reason")
    _note(override_reason, "the override reason")
    if override_reason.strip():
        _require(user, ADMIN, "overriding the sanity check")
    with transaction.atomic():
        _require_holder(candidate, user)
        task = Task.objects.select_for_update().get(pk=candidate.task_id)
        revision = task.current_revision
        if decision == Decision.FIX and candidate.decisions.filter(decision=Decision.FIX, revision=revision).exists():
            # Saving an edit (or applying a suggested fix) recorded it already: a second row would list it twice.
            raise ReviewError(
                f"r{revision.number} is recorded as a fix already; edit the task again to record "
                "another fix, or accept it"
            )
        if decision == Decision.ACCEPT:
            blocks = solvability.accept_blocks(revision, candidate.benchmark)
            if blocks and not override_reason.strip():
                steps = "; ".join(dict.fromkeys(block.step for block in blocks))
                raise AcceptBlocked(
                    f"cannot accept: {'; and '.join(block.reason for block in blocks)}. To accept, {steps}; "
                    "or an admin accepts with a written override reason"
                )
        row = ReviewDecision.objects.create(
            candidate=candidate,
            reviewer=user,
            decision=decision,
            reason=reason,
            verdicts=_check_verdicts(candidate, verdicts or {}),
            revision=revision,
            override_reason=override_reason.strip() if decision == Decision.ACCEPT else "",
        )
        if decision != Decision.FIX:
            status = team.status_after_decision(candidate, row, ReviewError)  # more decisions, or adjudication
            if BenchmarkCandidate.objects.filter(pk=candidate.pk, plant__isnull=False).exists():
                status = Status.REJECTED  # a planted flaw (review.planting) closes: it never enters the benchmark
            BenchmarkCandidate.objects.filter(pk=candidate.pk).update(
                status=status, claimed_by=None, claimed_at=None, claim_expires_at=None, updated_at=timezone.now()
            )
    candidate.refresh_from_db()
    return row


def accepted_revision(candidate: BenchmarkCandidate) -> TaskRevision | None:
    row = candidate.decisions.filter(decision=Decision.ACCEPT).order_by("-created_at", "-id").first()
    return row.revision if row else None


# --- freezing --------------------------------------------------------------------------------------------------


def freeze_version(benchmark: Benchmark, *, user, note: str = "") -> BenchmarkVersion:
    """A new immutable version pinning the revision each accepted candidate was accepted at."""
    _require(user, ADMIN, "freezing a benchmark version")
    # Planted flaws (review.planting) are never accepted; they are left out should one be all the same.
    accepted = BenchmarkCandidate.objects.filter(benchmark=benchmark, status=Status.ACCEPTED, plant__isnull=True)
    revision_ids = []
    for candidate in accepted:
        revision = accepted_revision(candidate)
        if revision is not None:
            revision_ids.append(revision.pk)
    if not revision_ids:
        raise ReviewError(f"{benchmark.name} has no accepted candidates to freeze")
    try:
        return create_version(benchmark, revision_ids, user=user, note=note)
    except BenchmarkNotAllowed as exc:
        raise NotAllowed(str(exc)) from None
    except BenchmarkError as exc:
        raise ReviewError(str(exc)) from None


# --- history ---------------------------------------------------------------------------------------------------


def history(candidate: BenchmarkCandidate, viewer=None) -> list[dict]:
    """The candidate's timeline, newest first: decisions, revisions of its task, their sanity checks, diagnoses
    and claims. With `viewer`, only the decisions they may see (review.team.visible_decisions)."""
    events = []
    decisions = candidate.decisions.all() if viewer is None else team.visible_decisions(candidate, viewer)
    for d in decisions.select_related("reviewer", "revision"):
        events.append(
            {
                "kind": "decision",
                "at": d.created_at,
                "who": d.reviewer.get_username() if d.reviewer else "",
                "what": d.decision,
                "reason": d.reason,
                "override_reason": d.override_reason,
                "verdicts": d.verdicts,
                "revision": d.revision.number if d.revision else None,
                "adjudication": d.adjudication,
            }
        )
    for r in candidate.task.revisions.select_related("author_user").filter(created_at__gte=candidate.created_at):
        events.append(
            {
                "kind": "revision",
                "at": r.created_at,
                "who": r.author,
                "what": f"r{r.number}",
                "reason": r.message,
                "revision": r.number,
            }
        )
    reports = SanityReport.objects.filter(revision__task=candidate.task_id, created_at__gte=candidate.created_at)
    for report in reports.select_related("revision", "job_run__created_by"):
        creator = report.job_run.created_by if report.job_run else None
        events.append(
            {
                "kind": "sanity",
                "at": report.created_at,
                "who": creator.get_username() if creator else "sanity check",
                "what": report.verdict,
                "reason": "; ".join(report.problems),
                "revision": report.revision.number,
            }
        )
    for g in candidate.diagnoses.select_related("revision").prefetch_related("issues"):
        found = len(g.issues.all())
        events.append(
            {
                "kind": "diagnosis",
                "at": g.created_at,
                "who": g.endpoint_name,
                "what": f"{found} issue{'' if found == 1 else 's'}",
                "reason": g.overall,
                "revision": g.revision.number,
            }
        )
    for c in candidate.claim_events.select_related("user"):
        events.append(
            {"kind": "claim", "at": c.created_at, "who": c.user.get_username() if c.user else "", "what": c.action}
        )
    events.sort(key=lambda e: e["at"], reverse=True)
    return events
