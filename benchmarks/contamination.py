"""Contamination: a benchmark task that training data already holds, the same or paraphrased.

    findings = contamination_for(revisions)     # [Finding]: each task of `revisions` some training data holds

A benchmark scores what a model was never trained on. Freezing a version (benchmarks.services.create_version) refuses
while any of its revisions is contaminated, and lists the findings: which task, which dataset or training run holds
what, exactly (the same content hash) or nearly (instructions whose embeddings are at least as similar as synthesis
QA's novelty threshold: a paraphrase counts).

What training data is lives in training_jobs, which imports benchmarks (never the other way round), so the check
itself is registered here by training_jobs when the apps are ready (`register`). Review and reports call
`contamination_for` without knowing where training data is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

EXACT, NEAR = "exact", "near"


@dataclass(frozen=True)
class Finding:
    """One benchmark task revision that one piece of training data holds."""

    task: str  # the benchmark task's external id
    revision: int  # its revision number
    content_hash: str
    source_kind: str  # "dataset" or "run"
    source_id: int
    source: str  # how the source is shown: "dataset #3 sales", "training run #5 rl on 4 task(s) …"
    training_task: str  # the task of the training data that matches (the same task, or another one)
    kind: str  # EXACT (the same content hash) or NEAR (instruction embeddings at or above the threshold)
    similarity: float  # 1.0 for EXACT
    version: str = ""  # "claw-bench v2" when the benchmark task is pinned by a frozen version

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        pinned = f" ({self.version})" if self.version else ""
        what = f"{self.task} r{self.revision}{pinned}"
        other = "it" if self.training_task == self.task else f"task {self.training_task}"
        if self.kind == EXACT:
            return f"{what}: {self.source} holds {other} with the same content"
        return f"{what}: {self.source} holds {other}, a near-duplicate (similarity {self.similarity:.3f})"


class ContaminationError(Exception):
    """The check could not be made (its embedding model cannot be used): nothing can be said clean."""


Checker = Callable[[list], list[Finding]]
_checkers: list[Checker] = []


def register(checker: Checker) -> None:
    """Add a check: it takes task revisions and returns the findings of the training data it knows."""
    if checker not in _checkers:
        _checkers.append(checker)


def contamination_for(revisions: Iterable) -> list[Finding]:
    """Every finding for the task revisions `revisions` (TaskRevision rows) from every registered check."""
    revisions = list(revisions)
    if not revisions:
        return []
    return [finding for checker in _checkers for finding in checker(revisions)]


def describe(findings: list[Finding], limit: int = 10) -> str:
    """The findings as one message: the first `limit`, and how many more."""
    shown = "; ".join(str(f) for f in findings[:limit])
    more = len(findings) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
