"""Importing a curriculum into the catalog and freezing its held-out splits as benchmark versions.

    result = import_curriculum(curriculum(seed=0), user=admin)

Every step is the product's own: the task folders go through tasks.importing.import_path (as `import_tasks` does),
each held-out split becomes a benchmark (`<name>-heldout`, `<name>-unseen`) whose tasks are proposed as candidates,
sanity-checked in the sandbox (tasks.sanity), accepted by `user` (review.services.decide, which refuses a checker
that pays a lazy agent) and frozen (review.services.freeze_version). The LLM diagnosis is skipped on purpose: the
tasks are generated, and their checkers are proven on each task's reference solution and lazy workspaces instead.

A second run with the same seed changes nothing: unchanged tasks stay at their revision, the candidates are accepted
already, and a benchmark whose latest version pins exactly these revisions is not frozen again. The train split is
imported but never pinned, so `tasks_from(train_selection(seed))` selects it for RL and build_dataset keeps its
trajectories (benchmark tasks it leaves out).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmarks.services import get_or_create_benchmark
from review.models import BenchmarkCandidate
from review.services import ReviewError, accepted_revision, decide, freeze_version, propose_candidates
from tasks.importing import import_path
from tasks.models import BenchmarkCategory, SanityReport, Task
from tasks.sanity import check_here

from .build import ID_PREFIX, Curriculum, CurriculumError, category_slug, train_selection, write_curriculum
from .kinds import KINDS

# The splits frozen as benchmarks, and the end of each benchmark's name.
BENCHMARK_SPLITS = {"heldout": "heldout", "unseen_kind": "unseen", "heldout_lexical": "lexical"}
CATEGORY_ORDER = 100  # after the ClawGym categories (tasks/migrations/0002_taxonomy.py)


def ensure_categories() -> dict[str, BenchmarkCategory]:
    """{kind: its benchmark category}, made where missing (an admin's later edits of one are kept)."""
    found = {}
    for order, (name, kind) in enumerate(KINDS.items()):
        found[name], _ = BenchmarkCategory.objects.get_or_create(
            slug=category_slug(name),
            defaults={
                "name": f"Curriculum: {kind.title}",
                "order": CATEGORY_ORDER + order,
                "description": f"ClawGym's generated curriculum: {kind.title} (small file tasks).",
            },
        )
    return found


def import_curriculum(drawn: Curriculum, *, user, benchmark: str = ID_PREFIX, workers: int | None = None) -> dict:
    """Import every split of `drawn` and freeze each held-out split as a version of `<benchmark>-<split>`.

    `user` is the admin who accepts the candidates and freezes the versions. Returns {"seed", "sizes", "import":
    {imported, updated, unchanged}, "tasks": {split: ids}, "train_selection", "benchmarks": {split: {"name",
    "version", "number", "frozen_now", "tasks"}}}. Raises CurriculumError when a task fails to import or to pass
    its sanity check, or when a benchmark holds tasks of another seed (or ones changed since they were accepted).
    """
    categories = ensure_categories()
    counts = {"imported": 0, "updated": 0, "unchanged": 0}
    with tempfile.TemporaryDirectory(prefix="clawgym-curriculum-") as folder:
        write_curriculum(drawn, Path(folder))
        for split in drawn.splits:
            report = import_path(Path(folder) / split, user=user)
            if report.failed_count:
                first = report.failed[0]
                raise CurriculumError(
                    f"{report.failed_count} task(s) of {split} failed to import; first: "
                    f"{first['source']}: {first['error']}"
                )
            for key in counts:
                counts[key] += getattr(report, key)
    ids = drawn.task_ids()
    _link_categories(drawn, categories)
    benchmarks = {}
    for split, ending in BENCHMARK_SPLITS.items():
        version, frozen_now = freeze_split(
            f"{benchmark}-{ending}", ids[split], seed=drawn.seed, user=user, workers=workers
        )
        benchmarks[split] = {
            "name": version.benchmark.name,
            "version": version.pk,
            "number": version.number,
            "frozen_now": frozen_now,
            "tasks": version.pins.count(),
        }
    return {
        "seed": drawn.seed,
        "sizes": drawn.sizes,
        "import": counts,
        "tasks": ids,
        "train_selection": train_selection(drawn.seed),
        "benchmarks": benchmarks,
    }


def _link_categories(drawn: Curriculum, categories: dict[str, BenchmarkCategory]) -> None:
    """Give each task its kind's category where it has none: a task imported unchanged keeps the category it was
    saved with, which is none when it came in (import_tasks on a built folder) before the categories existed."""
    for kind, category in categories.items():
        ids = [item.task_id for items in drawn.splits.values() for item in items if item.kind == kind]
        Task.objects.filter(external_id__in=ids, benchmark_category__isnull=True).update(benchmark_category=category)


def freeze_split(name: str, task_ids: list[str], *, seed: int, user, workers: int | None = None):
    """(the latest version of benchmark `name`, whether this call froze it) once it pins the current revisions of
    `task_ids`, each accepted after a passing sanity check."""
    description = (
        f"ClawGym's generated curriculum (seed {seed}): {len(task_ids)} held-out tasks. Made by "
        "`manage.py curriculum import`."
    )
    bench, _ = get_or_create_benchmark(name, user=user, description=description)
    tasks = list(Task.objects.filter(external_id__in=task_ids).select_related("current_revision"))
    others = bench.candidates.exclude(task__in=tasks).select_related("task").order_by("task__external_id")
    if others.exists():
        shown = ", ".join(c.task.external_id for c in others[:3])
        raise CurriculumError(
            f"benchmark {name} holds tasks that are not this curriculum split ({shown}, ...): "
            "import into another --benchmark name"
        )
    propose_candidates(bench, tasks, user=user)
    candidates = list(bench.candidates.select_related("task__current_revision"))
    waiting = [c for c in candidates if c.status in BenchmarkCandidate.OPEN]
    _sanity_check([c.task.current_revision for c in waiting], workers=workers)
    for candidate in waiting:
        _accept(candidate, seed=seed, user=user)
    stale = [
        c.task.external_id
        for c in candidates
        if c.status == BenchmarkCandidate.Status.ACCEPTED and accepted_revision(c) != c.task.current_revision
    ]
    if stale:
        raise CurriculumError(
            f"{len(stale)} task(s) of {name} changed since they were accepted ({stale[0]}, ...): "
            "review them in the benchmark's queue, or import into another --benchmark name"
        )
    accepted = {accepted_revision(c).pk for c in bench.candidates.filter(status=BenchmarkCandidate.Status.ACCEPTED)}
    latest = bench.versions.order_by("-number").first()
    if latest is not None and set(latest.pins.values_list("revision_id", flat=True)) == accepted:
        return latest, False
    try:
        return freeze_version(bench, user=user, note=f"curriculum seed {seed}"), True
    except ReviewError as exc:
        raise CurriculumError(str(exc)) from None


def _sanity_check(revisions, *, workers: int | None) -> None:
    """Sanity-check the revisions that have no report yet, in this process (the sandbox the workers use)."""
    unchecked = [r for r in revisions if not SanityReport.latest_for(r).exists()]
    for revision, _report, error in check_here(unchecked, workers=workers or os.cpu_count() or 1):
        if error:
            raise CurriculumError(f"the sanity check of {revision.task.external_id} could not run: {error}")


def _accept(candidate: BenchmarkCandidate, *, seed: int, user) -> None:
    revision = candidate.task.current_revision
    report = SanityReport.latest_for(revision).first()
    if report is None or report.solvable is not True:
        raise CurriculumError(
            f"{candidate.task.external_id}: its reference solution does not score 1.0 "
            "(a bug of the curriculum generator)"
        )
    reason = f"generated curriculum task (seed {seed}); sanity check passed: lazy score 0, the solution scores 1"
    try:
        decide(candidate, "accept", user=user, reason=reason)
    except ReviewError as exc:  # AcceptBlocked: the checker pays a lazy agent; ClaimConflict: a reviewer holds it
        raise CurriculumError(f"{candidate.task.external_id}: {exc}") from None
