"""How well a benchmark's reviewers agree: on the decision (accept or reject) and on the verdicts they give the LLM's
issues, over the candidates that more than one reviewer decided independently (the overlap, review.team).

- `kappa`: Cohen's kappa over the overlapping items, each item's first two independent ratings (by time) paired;
- `pairs`: Cohen's kappa of each pair of reviewers over the items both rated;
- `alpha`: Krippendorff's alpha (nominal) over every independent rating of the overlapping items, so an item rated
  by three reviewers counts all three;
- `vs_adjudicated`: each reviewer's share of decisions that a lead's adjudication upheld.

Every figure comes with `n`, the number of items behind it, and a 95% confidence interval: a percentile bootstrap
over items (BOOTSTRAP_RESAMPLES resamples, a fixed seed, so a report is reproducible); a share's interval is
Wilson's. A figure that cannot be computed (no item, or every rating the same so that chance agreement is
certain) is None. The statistics are checked against published examples in review/tests/test_agreement.py.

An issue verdict is "valid" (valid or fixed: the reviewer says the issue is real) or "not_valid".
"""

import math
import random
from collections import Counter, defaultdict
from itertools import combinations

from . import team
from .models import BenchmarkCandidate, ReviewDecision
from .stats import wilson_interval

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20260
CI_METHOD = f"95% percentile bootstrap over items, {BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}"
SHARE_CI_METHOD = "95% Wilson score interval"

Decision = ReviewDecision.Decision
_VERDICT_CLASS = {"valid": "valid", "fixed": "valid", "not_valid": "not_valid"}


# --- statistics ------------------------------------------------------------------------------------------------


def cohen_kappa(first: list, second: list) -> float | None:
    """Cohen's kappa of two raters' labels of the same items (None: no item, or chance agreement is certain)."""
    n = len(first)
    if n == 0 or n != len(second):
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    left, right = Counter(first), Counter(second)
    expected = sum(left[label] * right[label] for label in left) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def krippendorff_alpha(units: list[list]) -> float | None:
    """Krippendorff's alpha for nominal labels. `units` holds each item's labels (any number of raters; a missing
    rating is left out). Items with fewer than two labels are not pairable and do not count. None: no pairable
    item, or a single label throughout."""
    coincidences: dict[tuple, float] = defaultdict(float)
    for labels in units:
        m = len(labels)
        if m < 2:
            continue
        counts = Counter(labels)
        for c, nc in counts.items():
            for k, nk in counts.items():
                pairs = nc * (nk - 1) if c == k else nc * nk
                coincidences[(c, k)] += pairs / (m - 1)
    totals: dict = defaultdict(float)
    for (c, _k), value in coincidences.items():
        totals[c] += value
    n = sum(totals.values())
    if n <= 1:
        return None
    observed = sum(value for (c, k), value in coincidences.items() if c != k)
    expected = sum(totals[c] * totals[k] for c in totals for k in totals if c != k) / (n - 1)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def bootstrap_ci(items: list, statistic, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED):
    """[low, high], the 2.5th and 97.5th percentiles of `statistic` over resamples of `items` drawn with
    replacement (resamples where it is undefined left out), or None with fewer than two items or defined values."""
    if len(items) < 2:
        return None
    rng = random.Random(seed)
    size = len(items)
    values = []
    for _ in range(resamples):
        value = statistic([items[rng.randrange(size)] for _ in range(size)])
        if value is not None:
            values.append(value)
    if len(values) < 2:
        return None
    values.sort()
    return [_percentile(values, 0.025), _percentile(values, 0.975)]


def _percentile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _rounded(value):
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [round(v, 4) for v in value]
    return round(value, 4)


# --- what the reviewers said -----------------------------------------------------------------------------------


def _ratings(benchmark, leave_out=()):
    """({candidate id: [(reviewer, decision)]}, {(candidate id, issue id): [(reviewer, verdict class)]},
    {candidate id: adjudicated decision}), each list in the order the reviewers decided. A reviewer's rating is
    their latest independent accept or reject; their verdict on an issue is the latest they gave it."""
    rows = (
        ReviewDecision.objects.filter(candidate__benchmark=benchmark, reviewer__isnull=False)
        .exclude(candidate_id__in=leave_out)
        .select_related("reviewer")
        .order_by("created_at", "id")
    )
    decisions: dict[int, dict] = defaultdict(dict)
    verdicts: dict[tuple, dict] = defaultdict(dict)
    adjudicated: dict[int, str] = {}
    for row in rows:
        name = row.reviewer.get_username()
        if row.adjudication:
            if row.decision in (Decision.ACCEPT, Decision.REJECT):
                adjudicated[row.candidate_id] = row.decision
            continue
        if row.decision in (Decision.ACCEPT, Decision.REJECT):
            decisions[row.candidate_id].pop(name, None)  # re-inserted: ordered by the latest decision
            decisions[row.candidate_id][name] = row.decision
        for issue, verdict in (row.verdicts or {}).items():
            if verdict in _VERDICT_CLASS:
                key = (row.candidate_id, issue)
                verdicts[key].pop(name, None)
                verdicts[key][name] = _VERDICT_CLASS[verdict]
    as_lists = {key: list(by.items()) for key, by in decisions.items()}
    verdict_lists = {key: list(by.items()) for key, by in verdicts.items()}
    return as_lists, verdict_lists, adjudicated


def agreement_of(items: dict) -> dict:
    """The agreement figures over `items` ({item: [(rater, label)] in rating order}); only items two or more
    raters rated count."""
    overlapping = [ratings for ratings in items.values() if len(ratings) >= 2]

    def first_two_kappa(sample):
        return cohen_kappa([r[0][1] for r in sample], [r[1][1] for r in sample])

    pairs = []
    raters = sorted({rater for ratings in overlapping for rater, _ in ratings})
    for a, b in combinations(raters, 2):
        both = []
        for ratings in overlapping:
            by = dict(ratings)
            if a in by and b in by:
                both.append((by[a], by[b]))
        if not both:
            continue

        def pair_kappa(sample):
            return cohen_kappa([x for x, _ in sample], [y for _, y in sample])

        pairs.append(
            {
                "reviewers": [a, b],
                "kappa": _rounded(pair_kappa(both)),
                "n": len(both),
                "observed_agreement": _rounded(sum(x == y for x, y in both) / len(both)),
                "ci": _rounded(bootstrap_ci(both, pair_kappa)),
            }
        )

    def alpha(sample):
        return krippendorff_alpha([[label for _, label in ratings] for ratings in sample])

    return {
        "kappa": _rounded(first_two_kappa(overlapping)),
        "n": len(overlapping),
        "ci": _rounded(bootstrap_ci(overlapping, first_two_kappa)),
        "observed_agreement": _rounded(
            sum(r[0][1] == r[1][1] for r in overlapping) / len(overlapping) if overlapping else None
        ),
        "pairs": pairs,
        "alpha": {
            "alpha": _rounded(alpha(overlapping)),
            "n": len(overlapping),
            "ratings": sum(len(r) for r in overlapping),
            "ci": _rounded(bootstrap_ci(overlapping, alpha)),
        },
    }


def _vs_adjudicated(decisions: dict, adjudicated: dict) -> dict:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for candidate_id, outcome in adjudicated.items():
        for rater, label in decisions.get(candidate_id, []):
            per[rater][0] += 1
            per[rater][1] += label == outcome
    return {
        "adjudicated": len(adjudicated),
        "ci_method": SHARE_CI_METHOD,
        "reviewers": [
            {
                "reviewer": rater,
                "n": n,
                "agreed": agreed,
                "share": _rounded(agreed / n),
                "ci": _rounded(wilson_interval(agreed, n)),
            }
            for rater, (n, agreed) in sorted(per.items())
        ],
    }


def benchmark_agreement(benchmark) -> dict:
    """The benchmark's agreement figures (the module docstring says what each is):
    {"decision": {...}, "issue_verdicts": {...}, "alpha": {"decision": ..., "issue_verdicts": ...},
    "vs_adjudicated": {...}, "ci_method": ..., "candidates": N}."""
    blind = team.under_blind_review(benchmark)  # what their reviewers said shows once they are settled
    decisions, verdicts, adjudicated = _ratings(benchmark, leave_out=blind)
    decision = agreement_of(decisions)
    issue_verdicts = agreement_of(verdicts)
    return {
        "decision": decision,
        "issue_verdicts": issue_verdicts,
        "alpha": {"decision": decision["alpha"], "issue_verdicts": issue_verdicts["alpha"]},
        "vs_adjudicated": _vs_adjudicated(decisions, adjudicated),
        "ci_method": CI_METHOD,
        "candidates": BenchmarkCandidate.objects.filter(benchmark=benchmark).count(),
        "under_blind_review": len(blind),
    }
