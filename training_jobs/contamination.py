"""The contamination check over training data (benchmarks.contamination names the rule; this module knows the data).

Training data is every SFT dataset's samples (the task revision each trajectory's rollout ran), every SFT run's
dataset, and every RL run's task revisions. A benchmark task revision is contaminated by a piece of training data
that holds the same content (equal content hashes) or a near-duplicate: an instruction whose MiniLM embedding
(synthesis.novelty, the embeddings synthesis QA's novelty stage uses) is at least as similar as QA's novelty
threshold (synthesis.qa_checks.DEFAULT_THRESHOLDS["novelty"], 0.90). A paraphrase of a benchmark task is caught
however its task is named.

Both directions use the same embeddings and threshold:
- `check_revisions` (registered with benchmarks.contamination): revisions about to be frozen against all training
  data. Freezing refuses while it finds anything.
- `against_frozen`: the revisions some training data would hold against every revision a frozen version pins (for
  each pinned revision, the closest one). Starting a training run refuses while it finds anything.
- `every_match`: the same rule turned round, each training revision against its closest pinned one. Building a
  dataset leaves out every trajectory of a task it finds (reason `benchmark_duplicate`), not only the closest of
  each pinned task, so that the run's check passes on what the dataset kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from benchmarks.contamination import EXACT, NEAR, ContaminationError, Finding
from benchmarks.models import PinnedRevision
from tasks.models import Task, TaskRevision

from .models import DatasetSample, TrainingDataset, TrainingRun


@dataclass(frozen=True)
class Holder:
    """Where training data is: a dataset or a run."""

    kind: str  # "dataset" or "run"
    pk: int
    label: str


def threshold() -> float:
    """synthesis QA fails a task whose instruction is this similar to another's: the same line marks a near-duplicate
    (imported when needed: synthesis.qa_checks brings the LLM client)."""
    from synthesis.qa_checks import DEFAULT_THRESHOLDS

    return float(DEFAULT_THRESHOLDS["novelty"])


def dataset_holder(dataset: TrainingDataset) -> Holder:
    return Holder("dataset", dataset.pk, f"dataset #{dataset.pk} {dataset.name}".strip())


def run_holder(run: TrainingRun) -> Holder:
    return Holder("run", run.pk, f"training run #{run.pk} {run.name}".strip())


def training_data() -> dict[Holder, set[int]]:
    """Every holder of training data and the task revisions (ids) it holds."""
    held: dict[Holder, set[int]] = {}
    datasets = {d.pk: d for d in TrainingDataset.objects.only("pk", "name")}
    by_dataset: dict[int, set[int]] = {}
    rows = DatasetSample.objects.values_list("dataset_id", "trajectory__rollout__revision_id").distinct()
    for dataset_id, revision_id in rows.iterator(chunk_size=2000):
        by_dataset.setdefault(dataset_id, set()).add(revision_id)
    for dataset_id, revisions in by_dataset.items():
        held[dataset_holder(datasets[dataset_id])] = revisions
    for run in TrainingRun.objects.only("pk", "name", "kind", "dataset_id", "config"):
        if run.dataset_id in by_dataset:
            held[run_holder(run)] = by_dataset[run.dataset_id]
        tasks = (run.config or {}).get("tasks") if run.kind == TrainingRun.Kind.RL else None
        if isinstance(tasks, list) and tasks:
            held[run_holder(run)] = {pk for pk in tasks if isinstance(pk, int)}
    return held


@dataclass(frozen=True)
class _Row:
    pk: int
    task: str
    number: int
    content_hash: str
    instruction: str


def _rows(revision_ids: Iterable[int]) -> dict[int, _Row]:
    fields = ("pk", "task__external_id", "number", "content_hash", "instruction")
    ids = list(set(revision_ids))
    rows = {}
    for start in range(0, len(ids), 500):
        for values in TaskRevision.objects.filter(pk__in=ids[start : start + 500]).values_list(*fields):
            rows[values[0]] = _Row(*values)
    return rows


def _vectors(rows: list[_Row]) -> np.ndarray:
    from synthesis import novelty

    try:
        return novelty.embed([r.instruction for r in rows])
    except (ImportError, OSError, ValueError) as exc:  # the model package missing or unreadable
        raise ContaminationError(f"the near-duplicate check cannot embed instructions: {exc}") from None


def compare(benchmark: dict[int, _Row], held: dict[Holder, set[int]], versions: dict[int, str]) -> list[Finding]:
    """For each benchmark revision and each holder: the closest revision it holds, when exact or near."""
    training = _rows(set().union(*held.values())) if held else {}
    if not benchmark or not training:
        return []
    bench_rows, train_rows = list(benchmark.values()), list(training.values())
    column = {row.pk: i for i, row in enumerate(train_rows)}
    similarity = _vectors(bench_rows) @ _vectors(train_rows).T
    limit = threshold()
    findings = []
    # Per holder, its columns once, and each benchmark row's best column among them in one numpy step: a pool of
    # thousands of revisions and hundreds of holders is compared without a Python loop over every pair.
    for holder, revision_ids in held.items():
        cols = np.array(sorted(column[pk] for pk in revision_ids if pk in column), dtype=np.int64)
        if not len(cols):
            continue
        hashes = {}
        for c in cols:
            hashes.setdefault(train_rows[c].content_hash, int(c))
        best = cols[np.argmax(similarity[:, cols], axis=1)]
        for i, bench in enumerate(bench_rows):
            if bench.content_hash in hashes:
                match, kind, score = train_rows[hashes[bench.content_hash]], EXACT, 1.0
            else:
                match, kind, score = train_rows[best[i]], NEAR, float(similarity[i, best[i]])
                if score < limit:
                    continue
            findings.append(
                Finding(
                    task=bench.task,
                    revision=bench.number,
                    content_hash=bench.content_hash,
                    source_kind=holder.kind,
                    source_id=holder.pk,
                    source=holder.label,
                    training_task=match.task,
                    kind=kind,
                    similarity=round(min(score, 1.0), 4),
                    version=versions.get(bench.pk, ""),
                )
            )
    return sorted(findings, key=lambda f: (f.task, f.source_kind, f.source_id))


def check_revisions(revisions: list) -> list[Finding]:
    """Task revisions (e.g. those a freeze would pin) against all training data."""
    return compare(_rows(r.pk for r in revisions), training_data(), {})


def frozen_revisions() -> tuple[dict[int, _Row], dict[int, str]]:
    """Every revision a frozen version pins, and the version that pins it (the newest, as "name vN")."""
    pins = PinnedRevision.objects.values_list("revision_id", "version__benchmark__name", "version__number")
    versions: dict[int, tuple[str, int]] = {}
    for revision_id, name, number in pins.iterator(chunk_size=2000):
        if revision_id not in versions or versions[revision_id][1] < number:
            versions[revision_id] = (name, number)
    return _rows(versions), {pk: f"{name} v{number}" for pk, (name, number) in versions.items()}


def against_frozen(holder: Holder, revision_ids: Iterable[int]) -> list[Finding]:
    """The revisions `holder` would hold against every frozen version's pinned revisions."""
    revision_ids = set(revision_ids)
    if not revision_ids:
        return []
    benchmark, versions = frozen_revisions()
    return compare(benchmark, {holder: revision_ids}, versions)


def every_match(holder: Holder, revision_ids: Iterable[int]) -> list[Finding]:
    """Each of `revision_ids` that matches a task a frozen version pins (the same content, or a near-duplicate of its
    closest pinned task): one finding for each. against_frozen names, for each pinned task, its closest revision
    among them, which is enough to refuse training data but not to clean it: of two paraphrases of one pinned task it
    names one, and the other stays (and a run on what stayed is refused)."""
    training = _rows(revision_ids)
    benchmark, versions = frozen_revisions()
    if not benchmark or not training:
        return []
    bench_rows, train_rows = list(benchmark.values()), list(training.values())
    similarity = _vectors(train_rows) @ _vectors(bench_rows).T
    closest = np.argmax(similarity, axis=1)
    by_hash: dict[str, int] = {}
    for i, row in enumerate(bench_rows):
        by_hash.setdefault(row.content_hash, i)
    limit = threshold()
    findings = []
    for t, row in enumerate(train_rows):
        if row.content_hash in by_hash:
            b, kind, score = by_hash[row.content_hash], EXACT, 1.0
        else:
            b, kind, score = int(closest[t]), NEAR, float(similarity[t, closest[t]])
            if score < limit:
                continue
        bench = bench_rows[b]
        findings.append(
            Finding(
                task=bench.task,
                revision=bench.number,
                content_hash=bench.content_hash,
                source_kind=holder.kind,
                source_id=holder.pk,
                source=holder.label,
                training_task=row.task,
                kind=kind,
                similarity=round(min(score, 1.0), 4),
                version=versions.get(bench.pk, ""),
            )
        )
    return sorted(findings, key=lambda f: (f.task, f.training_task))


def selection_contamination(dataset: TrainingDataset, trajectories) -> list[Finding]:
    """The frozen versions' tasks that `trajectories` (what the dataset selects, a queryset) would put in it: every
    selected task that matches one (every_match), so that what the dataset keeps passes the run's check."""
    revision_ids = trajectories.values_list("rollout__revision_id", flat=True).distinct()
    return every_match(dataset_holder(dataset), revision_ids)


def duplicate_task_ids(findings: list[Finding]) -> set[int]:
    """The tasks (ids) whose trajectories the findings leave out of a dataset."""
    names = {f.training_task for f in findings}
    return set(Task.objects.filter(external_id__in=names).values_list("pk", flat=True)) if names else set()


def run_contamination(dataset: TrainingDataset | None, task_revision_ids) -> list[Finding]:
    """What a training run would train on (its dataset's tasks, or its RL tasks) against the frozen versions. A
    dataset an admin built with benchmark tasks allowed (the contamination guard's override) is not checked again."""
    if dataset is not None:
        if dataset.allow_benchmark_tasks:
            return []
        samples = DatasetSample.objects.filter(dataset=dataset)
        return against_frozen(
            dataset_holder(dataset), samples.values_list("trajectory__rollout__revision_id", flat=True).distinct()
        )
    return against_frozen(
        Holder("run", 0, "this training run"), [pk for pk in task_revision_ids if isinstance(pk, int)]
    )
