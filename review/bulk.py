"""Bulk decisions: accept or reject many candidates at once, each one through services.decide.

Nothing is decided here: every candidate goes through the same accept gate (its checker's latest sanity report
against the benchmark's tolerance, and proof that the revision can score full marks: review.solvability), the same
claim rules (claimed on the way when free, refused when another reviewer holds it) and the same audit trail (one
ReviewDecision a candidate) as a decision made alone, in a transaction of its own, so one refusal leaves the others
standing and says why. The accept gate is never overridden in bulk: an override is a written reason about one
candidate, given on that candidate's own page.
"""

from dataclasses import dataclass, field

from accounts.roles import REVIEWER, has_role

from . import planting, services
from .models import BenchmarkCandidate, ReviewDecision

Decision = ReviewDecision.Decision
BULK_DECISIONS = (Decision.ACCEPT, Decision.REJECT)
MAX_BULK = 200  # candidates a request: a queue page shows 50


@dataclass
class BulkItem:
    """What happened to one candidate: its decision, or the reason it was refused (and that refusal's HTTP
    status, services.http_status)."""

    candidate_id: int
    task: str  # its task's external id; "" when there is no such candidate
    decision: ReviewDecision | None = None
    refused: str = ""
    status: int = 201
    planted: dict | None = None  # a planted flaw's reveal after the decision (review.planting.revelation)


@dataclass
class BulkResult:
    decision: str
    items: list[BulkItem] = field(default_factory=list)

    @property
    def decided(self) -> list[BulkItem]:
        return [item for item in self.items if item.decision is not None]

    @property
    def refused(self) -> list[BulkItem]:
        return [item for item in self.items if item.decision is None]

    @property
    def verb(self) -> str:
        return "Accepted" if self.decision == Decision.ACCEPT else "Rejected"

    def summary(self) -> str:
        """e.g. "Accepted 2, refused 1." """
        return f"{self.verb} {len(self.decided)}" + (f", refused {len(self.refused)}" if self.refused else "") + "."


def decide_many(candidate_ids, decision: str, *, user, reason: str = "") -> BulkResult:
    """Accept or reject each candidate (ids, in the order given, each once) with services.decide and the same reason.

    What would refuse every candidate alike is refused at once with ReviewError, deciding nothing: a user without the
    reviewer role (NotAllowed), another decision than accept or reject, a rejection without a reason, no candidate or
    more than MAX_BULK. Anything else is one candidate's refusal, kept in its BulkItem.
    """
    if not has_role(user, REVIEWER):
        raise services.NotAllowed(f"deciding on candidates needs the {REVIEWER} role")
    if decision not in BULK_DECISIONS:
        raise services.ReviewError(
            f"a bulk decision is accept or reject, not {decision!r} (fixes are made one at a "
            "time, on the candidate's page)"
        )
    if decision == Decision.REJECT and not reason.strip():
        raise services.ReviewError("rejecting needs a reason")
    ids = list(dict.fromkeys(int(pk) for pk in candidate_ids))
    if not ids:
        raise services.ReviewError("no candidate selected")
    if len(ids) > MAX_BULK:
        raise services.ReviewError(f"at most {MAX_BULK} candidates at once, not {len(ids)}")
    found = BenchmarkCandidate.objects.select_related("task", "benchmark").in_bulk(ids)
    result = BulkResult(decision)
    for pk in ids:
        candidate = found.get(pk)
        if candidate is None:
            result.items.append(BulkItem(pk, "", refused=f"there is no candidate #{pk}", status=404))
            continue
        item = BulkItem(pk, candidate.task.external_id)
        try:
            item.decision = services.decide(candidate, decision, user=user, reason=reason)
            item.planted = planting.revelation(candidate, user)
        except services.ReviewError as exc:
            item.refused, item.status = str(exc), services.http_status(exc)
        result.items.append(item)
    return result
