"""How often the LLM's diagnoses are right: the precision of diagnosed issues, measured by the reviewers' verdicts.

Reviewers mark each issue of a diagnosis valid, not valid or fixed (ReviewDecision.verdicts; the latest verdict on
an issue wins, as in services.current_verdicts). An issue is valid when its verdict is "valid" or "fixed" (a
reviewer fixed what it named). The precision of a set of issues is the valid share of those with a verdict, with a
95% Wilson score interval and the number of issues behind it; issues nobody judged are left out.

    report = benchmark_precision(benchmark)   # overall, by component, severity, model and prompt version
    rows = annotate_likely_valid(candidates)  # the queue's "issues most likely valid first" sort

A diagnosing model is the endpoint's name stored with each diagnosis (LLMDiagnosis.endpoint_name), its prompt the
prompt version stored with it (LLMDiagnosis.prompt_version).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Case, FloatField, OuterRef, Subquery, Value, When

from . import team
from .models import BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis, ReviewDecision
from .stats import wilson_interval

Verdict = ReviewDecision.Verdict
VALID_VERDICTS = (Verdict.VALID, Verdict.FIXED)


@dataclass
class Cell:
    """Issues with a verdict in one group, and how many of them were valid."""

    valid: int = 0
    n: int = 0

    def add(self, valid: bool) -> None:
        self.n += 1
        self.valid += int(valid)

    @property
    def precision(self) -> float | None:
        return self.valid / self.n if self.n else None

    @property
    def likely_valid(self) -> float:
        """The chance that the next issue of this group is valid, by Laplace's rule of succession: (valid + 1) /
        (n + 2). A group nobody judged yet says 0.5; a few verdicts move it less than many."""
        return (self.valid + 1) / (self.n + 2)

    def as_dict(self) -> dict:
        interval = wilson_interval(self.valid, self.n)
        return {
            "precision": _round(self.precision),
            "valid": self.valid,
            "n": self.n,
            "low": _round(interval[0]) if interval else None,
            "high": _round(interval[1]) if interval else None,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def latest_verdicts(decisions) -> dict[int, str]:
    """{issue id: its latest verdict} over a queryset of ReviewDecision rows."""
    verdicts: dict[int, str] = {}
    for row in decisions.exclude(verdicts={}).order_by("created_at", "id").values_list("verdicts", flat=True):
        for key, value in (row or {}).items():
            if str(key).isdigit():
                verdicts[int(key)] = value
    return verdicts


GROUPS = (
    ("by_component", "component"),
    ("by_severity", "severity"),
    ("by_model", "diagnosis__endpoint_name"),
    ("by_prompt_version", "diagnosis__prompt_version"),
)


def judged_issues(candidates):
    """(issue values, valid) for every diagnosed issue of `candidates` (a queryset) that has a verdict."""
    verdicts = latest_verdicts(ReviewDecision.objects.filter(candidate__in=candidates))
    if not verdicts:
        return []
    fields = ["id", *(field for _, field in GROUPS)]
    # By candidate, not by a list of judged ids: that list may be longer than a database takes in one query.
    issues = DiagnosisIssue.objects.filter(diagnosis__candidate__in=candidates).values(*fields)
    return [(row, verdicts[row["id"]] in VALID_VERDICTS) for row in issues.iterator() if row["id"] in verdicts]


def precision_report(candidates) -> dict:
    """The precision of the diagnoses of `candidates`: overall, and by component, severity, diagnosing model,
    prompt version, and model with prompt version, each group {precision, valid, n, low, high} (precision, low
    and high None when n is 0); components and severities are all listed, judged or not."""
    overall = Cell()
    groups: dict[str, dict[str, Cell]] = {name: defaultdict(Cell) for name, _ in GROUPS}
    by_model_prompt: dict[tuple[str, str], Cell] = defaultdict(Cell)
    for row, valid in judged_issues(candidates):
        overall.add(valid)
        for name, field in GROUPS:
            groups[name][row[field]].add(valid)
        by_model_prompt[(row["diagnosis__endpoint_name"], row["diagnosis__prompt_version"])].add(valid)
    for name, choices in (("by_component", DiagnosisIssue.Component.values), ("by_severity", SEVERITY_ORDER)):
        groups[name] = {value: groups[name].get(value, Cell()) for value in choices}
    report = {"overall": overall.as_dict()}
    for name, cells in groups.items():
        report[name] = {key: cell.as_dict() for key, cell in sorted(cells.items(), key=_group_order(name))}
    report["by_model_prompt"] = [
        {"model": model, "prompt_version": prompt, **cell.as_dict()}
        for (model, prompt), cell in sorted(by_model_prompt.items())
    ]
    return report


SEVERITY_ORDER = ("blocker", "major", "minor")


def _group_order(name: str):
    if name in ("by_component", "by_severity"):
        return lambda item: 0  # already in their natural order
    return lambda item: item[0]


def benchmark_precision(benchmark) -> dict:
    """precision_report over the candidates of one benchmark, but those still under blind review (their verdicts
    count once they are settled: in a small benchmark a figure would tell a blind reviewer the first one's verdicts),
    and how many those are (`under_blind_review`)."""
    blind = team.under_blind_review(benchmark)
    return precision_report(benchmark.candidates.exclude(pk__in=blind)) | {"under_blind_review": len(blind)}


# --- the queue's sort ------------------------------------------------------------------------------------------


def cell_likelihoods(candidates=None) -> dict[tuple[str, str], float]:
    """{(component, severity): the chance an issue of that cell is valid} from every verdict given (on
    `candidates`, a queryset, when given), for every component and severity."""
    cells: dict[tuple[str, str], Cell] = defaultdict(Cell)
    for row, valid in judged_issues(candidates if candidates is not None else BenchmarkCandidate.objects.all()):
        cells[(row["component"], row["severity"])].add(valid)
    return {
        (component, severity): cells[(component, severity)].likely_valid
        for component in DiagnosisIssue.Component.values
        for severity in SEVERITY_ORDER
    }


def annotate_likely_valid(candidates, likelihoods: dict[tuple[str, str], float] | None = None):
    """`candidates` annotated with `likely_valid`: the highest chance, among the issues of its latest diagnosis,
    that an issue is valid (cell_likelihoods of each issue's component and severity); None when the latest
    diagnosis found nothing or there is none. One subquery, so the queue sorts and pages in the database."""
    likelihoods = cell_likelihoods() if likelihoods is None else likelihoods
    chance = Case(
        *(
            When(component=component, severity=severity, then=Value(p))
            for (component, severity), p in likelihoods.items()
        ),
        default=Value(0.5),
        output_field=FloatField(),
    )
    latest = LLMDiagnosis.objects.filter(candidate=OuterRef(OuterRef("pk"))).order_by("-created_at", "-id")
    best = (
        DiagnosisIssue.objects.filter(diagnosis=Subquery(latest.values("pk")[:1]))
        .annotate(chance=chance)
        .order_by("-chance")
        .values("chance")[:1]
    )
    return candidates.annotate(likely_valid=Subquery(best, output_field=FloatField()))
