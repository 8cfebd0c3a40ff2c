"""stability: how much a benchmark score moves between runs. A category-stratified subset of a benchmark version,
drawn once with a fixed seed, is evaluated k times with one endpoint; each run is a cell, and the study adds the
spread of the run means (their standard deviation and the 95% interval of their mean)."""

from __future__ import annotations

import random
from statistics import pstdev

from benchmarks.models import BenchmarkVersion
from evaluation.stats import mean_with_ci
from llm.models import ModelEndpoint
from tasks.models import TaskRevision

from ..models import Study, StudyCell
from . import params as params_
from .base import StudyError, StudyKind, evaluate, follow_evaluation

MAX_RUNS = 20
UNCATEGORIZED = "uncategorized"


def stratified_subset(revisions: list[TaskRevision], size: int, *, seed: int) -> list[TaskRevision]:
    """`size` of the revisions (all when size is 0 or not smaller), each category keeping its share of the version
    (largest remainder; every category at least one while size allows), drawn within each category with
    random.Random(seed) from the revisions in task order, so the same version, size and seed give the same subset."""
    if not size or size >= len(revisions):
        return sorted(revisions, key=lambda r: r.task.external_id)
    groups: dict[str, list[TaskRevision]] = {}
    for revision in sorted(revisions, key=lambda r: r.task.external_id):
        category = revision.task.benchmark_category
        groups.setdefault(category.slug if category else UNCATEGORIZED, []).append(revision)
    names = sorted(groups)
    quotas = {name: size * len(groups[name]) / len(revisions) for name in names}
    counts = {name: int(quotas[name]) for name in names}
    if size >= len(names):
        for name in names:
            counts[name] = max(counts[name], 1)
    by_remainder = sorted(names, key=lambda n: (-(quotas[n] - int(quotas[n])), n))
    while sum(counts.values()) < size:  # the largest remainders get the seats left
        for name in by_remainder:
            if sum(counts.values()) < size and counts[name] < len(groups[name]):
                counts[name] += 1
    while sum(counts.values()) > size:  # the minimum of one overshot: the largest categories give back
        largest = max(names, key=lambda n: (counts[n], n))
        counts[largest] -= 1
    draw = random.Random(seed)
    chosen = []
    for name in names:
        chosen.extend(draw.sample(groups[name], counts[name]))
    return sorted(chosen, key=lambda r: r.task.external_id)


class Stability(StudyKind):
    name = "stability"
    title = "Stability: k runs of one endpoint on a stratified subset"
    axis = "run"
    evaluation_only = True

    def prepare(self, params: dict, *, user) -> dict:
        version = params_.version(params.get("benchmark_version"))
        endpoint = params_.endpoint(params.get("endpoint"))
        runs = params_.whole(params.get("runs", 5), "runs", low=2, high=MAX_RUNS)
        subset = params_.whole(params.get("subset", 0), "subset", low=0, high=100000)
        seed = params_.whole(params.get("seed", 0), "seed", low=0, high=2**31)
        harness = params_.harness(params.get("harness"))
        revisions = list(version.revisions.select_related("task__benchmark_category"))
        if not revisions:
            raise StudyError(f"{version} pins no task")
        chosen = stratified_subset(revisions, subset, seed=seed)
        return {
            "benchmark_version": version.pk,
            "endpoint": endpoint.pk,
            "runs": runs,
            "subset": subset,
            "seed": seed,
            "harness": harness,
            "revisions": [r.pk for r in chosen],
            "tasks": [r.task.external_id for r in chosen],
        }

    def cells(self, params: dict) -> list[dict]:
        return [{"run": index + 1} for index in range(params["runs"])]

    def advance(self, study: Study, cell: StudyCell, *, user, here: bool = False) -> None:
        if cell.eval_run_id is None:
            params = study.params
            revisions = list(TaskRevision.objects.filter(pk__in=params["revisions"]).select_related("task"))
            evaluate(
                study,
                cell,
                user=user,
                here=here,
                name=f"{study} · {self.label(cell.coordinates)}",
                endpoint=ModelEndpoint.objects.get(pk=params["endpoint"]),
                benchmark_version=BenchmarkVersion.objects.get(pk=params["benchmark_version"]),
                revisions=revisions,
                harness=params["harness"],
            )
            return
        follow_evaluation(cell)

    def extra_summary(self, study: Study, rows: list[dict]) -> dict:
        means = [row["mean"] for row in rows if row["mean"] is not None]
        if not means:
            return {"stability": {"means": [], "mean": None, "std": None, "ci": None}}
        spread = mean_with_ci(means)
        return {
            "stability": {
                "means": means,
                "mean": spread["mean"],
                "std": round(pstdev(means), 6) if len(means) > 1 else 0.0,
                "ci": spread["ci"],
            }
        }
