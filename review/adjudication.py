"""A lead settles a disagreement of a benchmark's independent reviews (review.team says when one arises).

Kept apart from review.team, which review.services imports: this module builds on review.services.
"""

from django.db import transaction
from django.utils import timezone

from accounts.roles import LEAD, has_role

from . import services
from .models import BenchmarkCandidate, ReviewDecision
from .team import FINAL

Status = BenchmarkCandidate.Status
Decision = ReviewDecision.Decision


def adjudicate(candidate: BenchmarkCandidate, decision: str, *, user, reason: str = "", verdicts=None):
    """A lead settles a disagreement: accept (the task's current revision, through the same accept gate as a
    reviewer's accept) or reject. The reviewers' decisions stay; this one is recorded as an adjudication."""
    if not has_role(user, LEAD):
        raise services.NotAllowed(f"adjudicating needs the {LEAD} role")
    if decision not in FINAL:
        raise services.ReviewError(f"an adjudication is accept or reject, not {decision!r}")
    reason = services._note(reason, "the reason")
    if not reason.strip():
        raise services.ReviewError("an adjudication needs a reason: the reviewers will read it")
    with transaction.atomic():
        locked = BenchmarkCandidate.objects.select_for_update().get(pk=candidate.pk)
        if locked.status != Status.AWAITING_ADJUDICATION:
            raise services.ReviewError(
                f"the candidate is {locked.get_status_display().lower()}, not awaiting adjudication"
            )
        revision = locked.task.current_revision
        if decision == Decision.ACCEPT:
            blocked = services.sanity_block(revision, locked.benchmark)
            if blocked:
                raise services.AcceptBlocked(f"cannot accept: {blocked}")
        row = ReviewDecision.objects.create(
            candidate=locked,
            reviewer=user,
            decision=decision,
            reason=reason,
            verdicts=services._check_verdicts(locked, verdicts or {}),
            revision=revision,
            adjudication=True,
        )
        BenchmarkCandidate.objects.filter(pk=locked.pk).update(
            status=Status.ACCEPTED if decision == Decision.ACCEPT else Status.REJECTED,
            claimed_by=None,
            claimed_at=None,
            claim_expires_at=None,
            updated_at=timezone.now(),
        )
    candidate.refresh_from_db()
    return row
