"""Every state change of the review: proposing, claiming, verdicts, fixes, decisions and freezing.

Views, the API, commands and jobs call these with the acting user; nothing else writes review rows.
"""

import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

import jobs
from accounts.roles import ADMIN, REVIEWER, has_role
from jobs.models import JobRun
from tasks.models import SanityReport, Task, TaskRevision
from tasks.package import validate_rubric
from tasks.sanity import SANITY_JOB
from tasks.services import revise_task

from .jobs import DIAGNOSE_BATCH_JOB, DIAGNOSE_JOB
from .models import (
    Benchmark,
    BenchmarkCandidate,
    BenchmarkVersion,
    ClaimEvent,
    DiagnosisIssue,
    PinnedRevision,
    ReviewDecision,
)

Status = BenchmarkCandidate.Status
Decision = ReviewDecision.Decision


class ReviewError(Exception):
    """The action is not allowed in the candidate's current state; the message says why."""


class ClaimConflict(ReviewError):
    """Another reviewer holds the candidate."""


class AcceptBlocked(ReviewError):
    """Accepting needs a passing sanity report, or an admin's written override reason."""


class NotAllowed(ReviewError):
    """The acting user lacks the role the action needs."""


def claim_minutes() -> int:
    return settings.CLAWGYM_REVIEW_CLAIM_MINUTES


def _require(user, role: str, what: str) -> None:
    if not has_role(user, role):
        raise NotAllowed(f"{what} needs the {role} role")


# --- benchmarks and candidates ---------------------------------------------------------------------------------


def get_or_create_benchmark(name: str, *, user, description: str = "") -> tuple[Benchmark, bool]:
    """The benchmark called `name`, made when missing. `user` None: a trusted script (a management command)."""
    found = Benchmark.objects.filter(name=name).first()
    if found is not None:
        return found, False
    if user is not None:
        _require(user, ADMIN, "creating a benchmark")
    return Benchmark.objects.get_or_create(name=name, defaults={"description": description})


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


def start_diagnosis(candidates, *, user) -> list:
    """Queue one review.diagnose job per candidate; returns the JobRuns."""
    return [jobs.enqueue(DIAGNOSE_JOB, created_by=user, candidate_id=c.pk) for c in candidates]


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
    busy = {
        run["params"].get("candidate_id")
        for run in JobRun.objects.filter(kind=DIAGNOSE_JOB, status__in=JobRun.ACTIVE).values("params")
    }
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
        BenchmarkCandidate.objects.filter(pk=candidate.pk, status=Status.AWAITING_REVIEW).update(status=Status.IN_REVIEW)
        candidate.refresh_from_db()
    ClaimEvent.objects.create(candidate=candidate, user=user, action=ClaimEvent.Action.CLAIM)
    return candidate


def release(candidate: BenchmarkCandidate, *, user) -> BenchmarkCandidate:
    """Give the claim back. Only its holder (or an admin) may; releasing an unclaimed candidate changes nothing."""
    _require(user, REVIEWER, "releasing a candidate")
    owned = Q(claimed_by=user) if not has_role(user, ADMIN) else Q()
    released = BenchmarkCandidate.objects.filter(owned, pk=candidate.pk, claimed_by__isnull=False).update(
        claimed_by=None, claimed_at=None, claim_expires_at=None, updated_at=timezone.now()
    )
    candidate.refresh_from_db()
    if not released and candidate.claimed_by_id:
        raise ClaimConflict(f"{candidate.claimed_by.get_username()} holds this candidate, not you")
    if released:
        BenchmarkCandidate.objects.filter(pk=candidate.pk, status=Status.IN_REVIEW).update(status=Status.AWAITING_REVIEW)
        candidate.refresh_from_db()
        ClaimEvent.objects.create(candidate=candidate, user=user, action=ClaimEvent.Action.RELEASE)
    return candidate


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


def current_verdicts(candidate: BenchmarkCandidate) -> dict[str, str]:
    """{issue id: verdict}, the latest decision naming an issue winning."""
    verdicts: dict[str, str] = {}
    for row in candidate.decisions.order_by("created_at", "id").values_list("verdicts", flat=True):
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
        if not str(key).isdigit() or int(key) not in known:
            raise ReviewError(f"issue {key} is not an issue of this candidate's diagnoses")
        out[str(int(key))] = value
    return out


def record_verdicts(candidate: BenchmarkCandidate, verdicts: dict, *, user, reason: str = "") -> ReviewDecision:
    """Mark LLM issues valid, not valid or fixed (an append-only decision of kind "verdict")."""
    _require(user, REVIEWER, "judging an issue")
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

    `base_revision` is the revision the reviewer saw: when the task changed since, revise_task raises
    tasks.services.StaleRevisionError and nothing is written.
    """
    _require(user, REVIEWER, "applying a fix")
    if issue.replacement is None:
        raise ReviewError("this issue suggests no concrete replacement to apply")
    candidate = issue.diagnosis.candidate
    changes = _replacement_changes(issue)
    with transaction.atomic():
        _require_holder(candidate, user)
        message = f"review: apply fix of issue {issue.pk} ({issue.component}{' ' + issue.path if issue.path else ''})"
        result = revise_task(candidate.task, user=user, message=message, base_revision=base_revision, **changes)
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
    if revision.task_id != candidate.task_id:
        raise ReviewError("the revision belongs to another task")
    with transaction.atomic():
        _require_holder(candidate, user)
        return ReviewDecision.objects.create(
            candidate=candidate, reviewer=user, decision=Decision.FIX, reason=reason,
            verdicts=_check_verdicts(candidate, verdicts or {}), revision=revision,
        )  # fmt: skip


def sanity_block(revision: TaskRevision) -> str | None:
    """Why accepting this revision is blocked, or None. No report yet blocks too: the checker was never run."""
    report = SanityReport.latest_for(revision).first()
    if report is None:
        return "the checker of this revision has not been sanity-checked yet"
    if report.crashed or report.over_lenient:
        return f"the latest sanity check found the checker {report.verdict}: " + "; ".join(report.problems)
    return None


def decide(
    candidate: BenchmarkCandidate,
    decision: str,
    *,
    user,
    reason: str = "",
    verdicts: dict | None = None,
    override_reason: str = "",
) -> ReviewDecision:
    """Accept, fix or reject. Accepting pins the task's current revision and is blocked while its checker's
    latest sanity report is crashed or over-lenient (or missing), unless an admin writes an override reason.
    Rejecting needs a reason. "fix" records the current revision as the reviewer's fix and keeps it open.
    """
    _require(user, REVIEWER, "deciding on a candidate")
    if decision not in (Decision.ACCEPT, Decision.FIX, Decision.REJECT):
        raise ReviewError(f"decision {decision!r} is not one of accept, fix, reject")
    if decision == Decision.REJECT and not reason.strip():
        raise ReviewError("rejecting needs a reason")
    if override_reason.strip():
        _require(user, ADMIN, "overriding the sanity check")
    with transaction.atomic():
        _require_holder(candidate, user)
        task = Task.objects.select_for_update().get(pk=candidate.task_id)
        revision = task.current_revision
        if decision == Decision.ACCEPT:
            blocked = sanity_block(revision)
            if blocked and not override_reason.strip():
                raise AcceptBlocked(f"cannot accept: {blocked} (an admin may override with a written reason)")
        row = ReviewDecision.objects.create(
            candidate=candidate, reviewer=user, decision=decision, reason=reason,
            verdicts=_check_verdicts(candidate, verdicts or {}), revision=revision,
            override_reason=override_reason.strip() if decision == Decision.ACCEPT else "",
        )  # fmt: skip
        if decision != Decision.FIX:
            status = Status.ACCEPTED if decision == Decision.ACCEPT else Status.REJECTED
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
    accepted = BenchmarkCandidate.objects.filter(benchmark=benchmark, status=Status.ACCEPTED)
    revision_ids = []
    for candidate in accepted:
        revision = accepted_revision(candidate)
        if revision is not None:
            revision_ids.append(revision.pk)
    if not revision_ids:
        raise ReviewError(f"{benchmark.name} has no accepted candidates to freeze")
    for attempt in range(2):
        try:
            with transaction.atomic():
                last = benchmark.versions.order_by("-number").values_list("number", flat=True).first() or 0
                version = BenchmarkVersion.objects.create(
                    benchmark=benchmark, number=last + 1, created_by=user, note=note[:500]
                )
                PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision_id=pk) for pk in revision_ids)
                return version
        except IntegrityError:
            # Two admins froze at once and took the same number: the second retries with the next.
            if attempt:
                raise
    raise AssertionError("unreachable")


# --- history ---------------------------------------------------------------------------------------------------


def history(candidate: BenchmarkCandidate) -> list[dict]:
    """The candidate's timeline, newest first: decisions, revisions of its task, diagnoses and claims."""
    events = []
    for d in candidate.decisions.select_related("reviewer", "revision"):
        events.append({
            "kind": "decision", "at": d.created_at, "who": d.reviewer.get_username() if d.reviewer else "",
            "what": d.decision, "reason": d.reason, "override_reason": d.override_reason,
            "verdicts": d.verdicts, "revision": d.revision.number if d.revision else None,
        })  # fmt: skip
    for r in candidate.task.revisions.select_related("author_user").filter(created_at__gte=candidate.created_at):
        events.append({"kind": "revision", "at": r.created_at, "who": r.author, "what": f"r{r.number}",
                       "reason": r.message, "revision": r.number})  # fmt: skip
    for g in candidate.diagnoses.select_related("revision").prefetch_related("issues"):
        events.append({"kind": "diagnosis", "at": g.created_at, "who": g.endpoint_name,
                       "what": f"{len(g.issues.all())} issues", "reason": g.overall,
                       "revision": g.revision.number})  # fmt: skip
    for c in candidate.claim_events.select_related("user"):
        events.append({"kind": "claim", "at": c.created_at, "who": c.user.get_username() if c.user else "",
                       "what": c.action})  # fmt: skip
    events.sort(key=lambda e: e["at"], reverse=True)
    return events
