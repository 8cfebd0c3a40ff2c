"""Review as a team: several reviewers per benchmark, routed, overlapping, blind to each other, adjudicated.

- A benchmark (benchmarks.models.Benchmark) names its reviewers (none: every reviewer), how many independent
  accept/reject decisions each candidate needs (`decisions_needed`) and the share of candidates that get one more
  (`overlap_share`), chosen by a hash of the candidate's id, so the same candidates are chosen on every machine.
- Routing (`next_candidate`): the queue offers a reviewer the open candidate they have not decided or edited,
  least-reviewed first, oldest first, never one another reviewer holds.
- Open until decided: a candidate with fewer decisions than it needs goes back to "awaiting review" after each
  decision (its state shows "n of m decisions"). When it has them all and they agree (the same decision, no issue
  judged valid by one and not valid by another) it is accepted or rejected; when they disagree it awaits
  adjudication, and a lead (accounts.roles.LEAD) decides (review.adjudication). The reviewers' decisions and the
  lead's stay.
- Blind second review (`is_blind`, `visible_decisions`): while a candidate needs more than one decision and is
  open, a reviewer who has not decided it sees no one else's decisions, verdicts or reasons (pages, partials, API,
  history). Other reviewers' edits are revisions of the task and stay visible.

review.services.decide calls `status_after_decision`, so this module imports nothing of review.services; everything
else here is called by the views and the API.
"""

import hashlib
import statistics
from collections import Counter, defaultdict
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from accounts.roles import ADMIN, LEAD, REVIEWER, has_role
from benchmarks.models import Benchmark
from tasks.models import TaskRevision

from .models import BenchmarkCandidate, ClaimEvent, ReviewDecision

Status = BenchmarkCandidate.Status
Decision = ReviewDecision.Decision
FINAL = (Decision.ACCEPT, Decision.REJECT)
MAX_DECISIONS = 5
_VERDICT_CLASS = {"valid": "valid", "fixed": "valid", "not_valid": "not_valid"}


class TeamError(ValueError):
    """Bad team settings or an adjudication the candidate's state does not allow; the message says why."""


class TeamNotAllowed(TeamError):
    """The acting user lacks the role the action needs."""


# --- how many decisions ----------------------------------------------------------------------------------------


def in_overlap(candidate_id: int, share: float) -> bool:
    """Whether the candidate is among the `share` of candidates that get one more decision: a hash of its id mapped
    to [0, 1) below `share`, so the choice is the same on every run and every machine."""
    digest = hashlib.sha256(f"clawgym-overlap:{candidate_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def decisions_required(candidate: BenchmarkCandidate) -> int:
    """How many independent decisions the candidate needs: the benchmark's number, one more in the overlap."""
    return decisions_required_for(candidate.pk, candidate.benchmark)


def decisions_required_for(candidate_id: int, benchmark: Benchmark) -> int:
    return benchmark.decisions_needed + (1 if in_overlap(candidate_id, benchmark.overlap_share) else 0)


def independent_decisions(candidate: BenchmarkCandidate) -> dict[int, ReviewDecision]:
    """{reviewer id: their latest accept or reject of the candidate}, adjudications left out."""
    rows = candidate.decisions.filter(decision__in=FINAL, adjudication=False, reviewer__isnull=False)
    latest: dict[int, ReviewDecision] = {}
    for row in rows.select_related("reviewer").order_by("created_at", "id"):
        latest[row.reviewer_id] = row
    return latest


def reviewer_verdicts(candidate: BenchmarkCandidate, reviewer_ids) -> dict[int, dict[str, str]]:
    """{reviewer id: {issue id: valid | not_valid}}: each reviewer's latest verdict on each issue (fixed counts as
    valid: the reviewer says the issue is real)."""
    out: dict[int, dict[str, str]] = {pk: {} for pk in reviewer_ids}
    rows = candidate.decisions.filter(adjudication=False, reviewer_id__in=list(reviewer_ids)).order_by(
        "created_at", "id"
    )
    for reviewer_id, verdicts in rows.values_list("reviewer_id", "verdicts"):
        for issue, verdict in (verdicts or {}).items():
            if verdict in _VERDICT_CLASS:
                out[reviewer_id][issue] = _VERDICT_CLASS[verdict]
    return out


def disagreement(candidate: BenchmarkCandidate, decided: dict[int, ReviewDecision]) -> list[str]:
    """What the independent decisions disagree on, in words (empty: they agree)."""
    reasons = []
    kinds = Counter(row.decision for row in decided.values())
    if len(kinds) > 1:
        reasons.append(" vs ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())))
    by_issue: dict[str, set] = defaultdict(set)
    for verdicts in reviewer_verdicts(candidate, decided).values():
        for issue, verdict in verdicts.items():
            by_issue[issue].add(verdict)
    split = sorted((issue for issue, seen in by_issue.items() if len(seen) > 1), key=int)
    if split:
        reasons.append("issue verdicts differ on " + ", ".join(f"#{issue}" for issue in split))
    return reasons


def status_after_decision(candidate: BenchmarkCandidate, row: ReviewDecision, error: type[Exception]) -> str:
    """The status a reviewer's accept or reject (`row`, just stored) leaves the candidate in: awaiting review while
    it needs more decisions, accepted or rejected once enough agree, awaiting adjudication when they disagree.

    Raises `error` (rolling the decision back) when the reviewer had decided the candidate already: a second
    decision of theirs would not be independent."""
    decided = independent_decisions(candidate)
    earlier = candidate.decisions.filter(
        decision__in=FINAL, adjudication=False, reviewer_id=row.reviewer_id, created_at__lte=row.created_at
    ).exclude(pk=row.pk)
    required = decisions_required(candidate)
    if required > 1 and earlier.exists():
        raise error("you have decided this candidate already: it waits for an independent decision of another reviewer")
    if len(decided) < required:
        return Status.AWAITING_REVIEW
    if disagreement(candidate, decided):
        return Status.AWAITING_ADJUDICATION
    return Status.ACCEPTED if row.decision == Decision.ACCEPT else Status.REJECTED


# --- blind second review ---------------------------------------------------------------------------------------


def decided_by(candidate: BenchmarkCandidate, user) -> bool:
    """True when `user` has accepted or rejected the candidate as one of its reviewers (an adjudication aside)."""
    if user is None or not user.is_authenticated:
        return False
    return candidate.decisions.filter(decision__in=FINAL, adjudication=False, reviewer=user).exists()


def is_blind(candidate: BenchmarkCandidate, user) -> bool:
    """True while `user` must not see the other reviewers' decisions on the candidate: it is open, needs more than
    one decision, and `user` has not decided it yet."""
    if candidate.status not in BenchmarkCandidate.OPEN or decisions_required(candidate) < 2:
        return False
    if user is None or not user.is_authenticated:
        return True
    return not decided_by(candidate, user)


def visible_decisions(candidate: BenchmarkCandidate, user):
    """The candidate's decisions `user` may see: all of them, or only their own while blind."""
    rows = candidate.decisions.all()
    if is_blind(candidate, user):
        return rows.filter(reviewer=user) if user is not None and user.is_authenticated else rows.none()
    return rows


HIDDEN_MESSAGE = "message hidden until you decide"


def under_blind_review(benchmark: Benchmark) -> set[int]:
    """Ids of the benchmark's open candidates that need more than one decision (is_blind's rule, for any reviewer yet
    to decide): a reviewer may still be routed to one blind, so no figure everyone reads may count what its reviewers
    said until it is settled (agreement, the diagnoses' precision; progress by reviewer counts them as pending)."""
    open_ids = BenchmarkCandidate.objects.filter(benchmark=benchmark, status__in=BenchmarkCandidate.OPEN)
    return {pk for pk in open_ids.values_list("pk", flat=True) if decisions_required_for(pk, benchmark) > 1}


def hides_message(candidate: BenchmarkCandidate, revision: TaskRevision, user, *, blind: bool | None = None) -> bool:
    """True when `user` must not read `revision`'s message: a reason another person typed with an edit of the
    candidate while its review is blind to `user`. The edit itself stays visible (it is the task); its message is
    that reviewer's reasoning, as a decision's reason is. `blind`: is_blind(candidate, user), when already known."""
    if revision.author_user_id is None or revision.author_user_id == getattr(user, "pk", None):
        return False
    if revision.task_id != candidate.task_id or revision.created_at < candidate.created_at:
        return False
    return is_blind(candidate, user) if blind is None else blind


# --- routing ---------------------------------------------------------------------------------------------------


def routable(user, benchmark: Benchmark | None = None):
    """The open candidates the queue may offer `user`: of a benchmark they review (or one naming no reviewers),
    never held by someone else, never one they decided or edited; the one they hold first (finish it, or release
    it), then least-reviewed first, oldest first."""
    now = timezone.now()
    benchmarks = Benchmark.objects.filter(Q(reviewers=user) | Q(reviewers__isnull=True))
    if benchmark is not None:
        benchmarks = benchmarks.filter(pk=benchmark.pk)
    touched = ReviewDecision.objects.filter(
        candidate=OuterRef("pk"), reviewer=user, decision__in=(*FINAL, Decision.FIX)
    )
    edited = TaskRevision.objects.filter(
        task=OuterRef("task_id"), author_user=user, created_at__gte=OuterRef("created_at")
    )
    held = Q(claimed_by__isnull=False, claim_expires_at__gt=now) & ~Q(claimed_by=user)
    return (
        BenchmarkCandidate.objects.filter(
            status__in=(Status.AWAITING_REVIEW, Status.IN_REVIEW), benchmark__in=benchmarks.values("pk")
        )
        .exclude(held)
        .exclude(Exists(touched))
        .exclude(Exists(edited))
        .annotate(
            reviewed=Count(
                "decisions__reviewer",
                filter=Q(decisions__decision__in=FINAL, decisions__adjudication=False),
                distinct=True,
            )
        )
        .annotate(mine=Exists(BenchmarkCandidate.objects.filter(pk=OuterRef("pk"), claimed_by=user)))
        .order_by("-mine", "reviewed", "created_at", "id")
    )


def next_candidate(user, benchmark: Benchmark | None = None) -> BenchmarkCandidate | None:
    """The candidate the routing rule offers `user` next, or None when nothing is left for them."""
    if not has_role(user, REVIEWER):
        raise TeamNotAllowed("being routed candidates needs the reviewer role")
    return routable(user, benchmark).select_related("task", "benchmark").first()


# --- adjudication ----------------------------------------------------------------------------------------------


def adjudication_queue(benchmark: Benchmark | None = None):
    waiting = BenchmarkCandidate.objects.filter(status=Status.AWAITING_ADJUDICATION)
    if benchmark is not None:
        waiting = waiting.filter(benchmark=benchmark)
    return waiting.select_related("task", "benchmark").order_by("updated_at", "id")


BLIND_SIDES = (
    "the reviewers' sides of this candidate show once it awaits adjudication or you have decided it: its review "
    "is blind to you until then"
)


class BlindSides(TeamNotAllowed):
    """The review of the candidate is still blind to the acting user: no one's side shows to them yet."""


def sides(candidate: BenchmarkCandidate, viewer=None) -> list[dict]:
    """Each reviewer's side of a disagreement: their decision, reason, revision and issue verdicts.

    With `viewer` (whoever asks through a page or the API), refused with BlindSides while the review is blind to
    them (`is_blind`): a lead may also review the candidate, and the lead's pages must not show what the candidate's
    own page hides. None: a caller that shows the sides to nobody."""
    if viewer is not None and is_blind(candidate, viewer):
        raise BlindSides(BLIND_SIDES)
    decided = independent_decisions(candidate)
    verdicts = reviewer_verdicts(candidate, decided)
    return [
        {
            "reviewer": row.reviewer.get_username(),
            "decision": row.decision,
            "reason": row.reason,
            "revision": row.revision.number if row.revision_id else None,
            "verdicts": verdicts.get(reviewer_id, {}),
            "at": row.created_at,
        }
        for reviewer_id, row in sorted(decided.items(), key=lambda item: item[1].created_at)
    ]


# --- settings --------------------------------------------------------------------------------------------------


def set_team(benchmark: Benchmark, *, user, reviewers=None, decisions_needed=None, overlap_share=None) -> Benchmark:
    """Set who reviews the benchmark, how many independent decisions a candidate needs and the overlap share (an
    admin's act; None leaves a setting as it is). Reviewers must hold the reviewer role."""
    if not has_role(user, ADMIN):
        raise TeamNotAllowed("setting a benchmark's review team needs the admin role")
    changes = {}
    if decisions_needed is not None:
        if isinstance(decisions_needed, bool) or not isinstance(decisions_needed, int):
            raise TeamError("decisions needed must be a whole number")
        if not 1 <= decisions_needed <= MAX_DECISIONS:
            raise TeamError(f"decisions needed must be between 1 and {MAX_DECISIONS}, not {decisions_needed}")
        changes["decisions_needed"] = decisions_needed
    if overlap_share is not None:
        share = float(overlap_share)
        if not 0.0 <= share <= 1.0:  # NaN fails this too
            raise TeamError(f"the overlap share must be in [0, 1], not {share:g}")
        changes["overlap_share"] = share
    people = None
    if reviewers is not None:
        names = [str(name).strip() for name in reviewers if str(name).strip()]
        found = {u.get_username(): u for u in get_user_model().objects.filter(username__in=names, is_active=True)}
        unknown = [name for name in names if name not in found]
        if unknown:
            raise TeamError("no active user named " + ", ".join(sorted(set(unknown))))
        not_reviewers = sorted(name for name, u in found.items() if not has_role(u, REVIEWER))
        if not_reviewers:
            raise TeamError("not reviewers (grant them the reviewer role first): " + ", ".join(not_reviewers))
        people = list(found.values())
    with transaction.atomic():
        if changes:
            Benchmark.objects.filter(pk=benchmark.pk).update(**changes)
        if people is not None:
            benchmark.reviewers.set(people)
    benchmark.refresh_from_db()
    return benchmark


def team_settings(benchmark: Benchmark) -> dict:
    return {
        "reviewers": sorted(benchmark.reviewers.values_list("username", flat=True)),
        "decisions_needed": benchmark.decisions_needed,
        "overlap_share": benchmark.overlap_share,
    }


# --- progress --------------------------------------------------------------------------------------------------


def candidate_states(benchmark: Benchmark) -> dict[int, str]:
    """{candidate id: its state}: the status, with an open candidate that has some but not all of its decisions
    shown as "needs_decisions" (the derived state)."""
    counts = dict(
        ReviewDecision.objects.filter(candidate__benchmark=benchmark, decision__in=FINAL, adjudication=False)
        .values("candidate_id")
        .annotate(n=Count("reviewer", distinct=True))
        .values_list("candidate_id", "n")
    )
    states = {}
    for pk, status in BenchmarkCandidate.objects.filter(benchmark=benchmark).values_list("pk", "status"):
        states[pk] = "needs_decisions" if status in BenchmarkCandidate.OPEN and counts.get(pk) else status
    return states


STATE_LABELS = dict(Status.choices) | {"needs_decisions": "Needs more decisions"}


def progress(benchmark: Benchmark, *, days: int = 14) -> dict:
    """What a benchmark's review has done and what is left: candidates by state, by category and by reviewer,
    decisions per day (the last `days` days), the median time from a reviewer's claim to their decision.

    By reviewer, an accept or reject of a candidate still open to a blind review counts as "pending", not by its
    direction: everyone reads this page, and a reviewer routed to that candidate must not learn it here."""
    candidates = list(
        BenchmarkCandidate.objects.filter(benchmark=benchmark).values_list(
            "pk", "status", "task__benchmark_category__name"
        )
    )
    states = candidate_states(benchmark)
    by_state = Counter(states.values())
    by_category: dict[str, Counter] = defaultdict(Counter)
    for pk, _status, category in candidates:
        by_category[category or "(no category)"][states[pk]] += 1
    decisions = list(
        ReviewDecision.objects.filter(candidate__benchmark=benchmark, reviewer__isnull=False)
        .values_list("candidate_id", "reviewer__username", "decision", "adjudication", "created_at")
        .order_by("created_at", "id")
    )
    open_ids = [pk for pk, status, _ in candidates if status in BenchmarkCandidate.OPEN]
    required = {pk: decisions_required_for(pk, benchmark) for pk in open_ids}
    blind = {pk for pk in open_ids if required[pk] > 1}  # is_blind's rule, for any reviewer yet to decide
    by_reviewer: dict[str, Counter] = defaultdict(Counter)
    per_day: Counter = Counter()
    final_rows = []
    for candidate_id, name, decision, adjudication, at in decisions:
        if adjudication:
            by_reviewer[name]["adjudication"] += 1
        elif decision in FINAL and candidate_id in blind:
            by_reviewer[name]["pending"] += 1
        else:
            by_reviewer[name][decision] += 1
        if decision in FINAL:
            per_day[at.date()] += 1
            if not adjudication:
                final_rows.append((candidate_id, name, at))
    claims = defaultdict(list)
    for candidate_id, name, at in (
        ClaimEvent.objects.filter(candidate__benchmark=benchmark, action=ClaimEvent.Action.CLAIM, user__isnull=False)
        .values_list("candidate_id", "user__username", "created_at")
        .order_by("created_at", "id")
    ):
        claims[(candidate_id, name)].append(at)
    waits = []
    for candidate_id, name, at in final_rows:
        before = [t for t in claims.get((candidate_id, name), []) if t <= at]
        if before:
            waits.append((at - before[-1]).total_seconds())
    today = timezone.now().date()
    have = dict(
        ReviewDecision.objects.filter(candidate_id__in=open_ids, decision__in=FINAL, adjudication=False)
        .values("candidate_id")
        .annotate(n=Count("reviewer", distinct=True))
        .values_list("candidate_id", "n")
    )
    return {
        "candidates": len(candidates),
        "by_state": [
            {"state": state, "label": STATE_LABELS.get(state, state), "count": by_state[state]}
            for state in (*Status.values, "needs_decisions")
            if by_state[state]
        ],
        "by_category": [
            {
                "category": name,
                "states": dict(counts),
                "total": sum(counts.values()),
                "open": sum(counts[state] for state in (*BenchmarkCandidate.OPEN, "needs_decisions")),
            }
            for name, counts in sorted(by_category.items())
        ],
        "by_reviewer": [{"reviewer": name, **dict(counts)} for name, counts in sorted(by_reviewer.items())],
        "decisions_per_day": [
            {"day": (today - timedelta(days=back)).isoformat(), "decisions": per_day[today - timedelta(days=back)]}
            for back in range(days - 1, -1, -1)
        ],
        "median_claim_to_decision_s": round(statistics.median(waits), 1) if waits else None,
        "timed_decisions": len(waits),
        "left": {
            "open": len(open_ids),
            "decisions": sum(max(required[pk] - have.get(pk, 0), 0) for pk in open_ids),
            "adjudications": by_state[Status.AWAITING_ADJUDICATION],
        },
    }


def candidate_team(candidate: BenchmarkCandidate, viewer) -> dict:
    """What the decision card says about the team's review of a candidate, for `viewer`: the decisions it needs
    and has, whether `viewer` decided it already (their decision), whether they review blind, and whether it
    awaits a lead's adjudication."""
    required = decisions_required(candidate)
    decided = independent_decisions(candidate)
    mine = decided.get(viewer.pk) if viewer is not None and viewer.is_authenticated else None
    return {
        "required": required,
        "decided": len(decided),
        "left": max(required - len(decided), 0),
        "mine": mine if candidate.status in BenchmarkCandidate.OPEN else None,
        "blind": is_blind(candidate, viewer),
        "adjudicating": candidate.status == Status.AWAITING_ADJUDICATION,
        "may_adjudicate": has_role(viewer, LEAD),
    }
