"""The review's state changes: proposing, starting diagnoses, claiming, verdicts, decisions and freezing (which
chooses the revisions a new benchmark version pins; benchmarks.services stores it, and makes benchmarks). The new
revisions a review makes of a task, suggested fixes and reviewers' own edits, are review.edits'.

Views, the API, commands and jobs call these with the acting user.
"""

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
from tasks.models import SanityReport, Task, TaskRevision
from tasks.services import StaleRevisionError

from . import solvability, team
from .job_kinds import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
from .models import BenchmarkCandidate, ClaimEvent, DiagnosisIssue, PlantedFlaw, ReviewDecision

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
    if candidate.status in BenchmarkCandidate.OPEN and team.decided_by(candidate, user):
        # Their claim would only keep the candidate from the reviewer whose decision it waits for.
        raise ReviewError("you have decided this candidate already: it waits for another reviewer's decision")
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


# --- verdicts and decisions ------------------------------------------------------------------------------------


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


def set_lazy_tolerance(benchmark: Benchmark, tolerance: float, *, user) -> Benchmark:
    """Set what a lazy agent may earn with a candidate's checker before the benchmark's accept gate blocks it."""
    _require(user, ADMIN, "setting a benchmark's lazy-score tolerance")
    tolerance = float(tolerance)
    if not 0.0 <= tolerance <= 1.0:  # NaN fails this too
        raise ReviewError(f"the lazy-score tolerance must be in [0, 1], not {tolerance:g}")
    Benchmark.objects.filter(pk=benchmark.pk).update(lazy_tolerance=tolerance)
    benchmark.lazy_tolerance = tolerance
    return benchmark


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
            if PlantedFlaw.objects.filter(candidate__task_id=candidate.task_id).exists():
                # A planted flaw's copy (review.planting) closes, in whichever benchmark it was proposed to: its task
                # is wrong on purpose and never enters a benchmark.
                status = Status.REJECTED
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
    # Planted flaws' copies (review.planting) are never accepted, in any benchmark; should one be all the same (one
    # proposed to another benchmark and accepted there before decide knew better), it is left out.
    accepted = BenchmarkCandidate.objects.filter(benchmark=benchmark, status=Status.ACCEPTED).exclude(
        task__in=PlantedFlaw.objects.values("candidate__task")
    )
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
    blind = viewer is not None and team.is_blind(candidate, viewer)
    for r in candidate.task.revisions.select_related("author_user").filter(created_at__gte=candidate.created_at):
        hidden = viewer is not None and team.hides_message(candidate, r, viewer, blind=blind)
        events.append(
            {
                "kind": "revision",
                "at": r.created_at,
                "who": r.author,
                "what": f"r{r.number}",
                "reason": team.HIDDEN_MESSAGE if hidden and r.message else r.message,
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
