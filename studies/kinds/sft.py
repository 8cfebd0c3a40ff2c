"""The kinds whose cells each make a dataset, train on it and evaluate the result: reward_threshold (one dataset a
minimum reward, from the same evaluation runs) and synthesis_routes (persona-driven tasks, skill-grounded tasks,
both: the rollouts whose task came from that route, of the given evaluation runs or of the runs that rolled out the
given synthesis batches' kept tasks).

A cell's steps, each started once, each looked at again on the next advance:
1. the dataset, built in the advance job itself (training_jobs.services.datasets.build_dataset); an empty or failed
   dataset fails the cell with the dataset's own reason;
2. an SFT run on it (training_jobs.services.runs.start_training_run; its gpu job trains);
3. once the run succeeded, its last checkpoint served and evaluated on the benchmark version (studies.kinds
   .checkpoints, through "evaluate every checkpoint"); the cell is that evaluation run's."""

from __future__ import annotations

from benchmarks.models import BenchmarkVersion
from evaluation.models import EvalRun, Rollout
from tasks.models import TaskRevision
from training_jobs.kinds import TrainingRunError
from training_jobs.models import BaseModel, TrainingDataset, TrainingRun
from training_jobs.services.datasets import DatasetError, build_dataset, empty_reason
from training_jobs.services.runs import start_training_run

from ..models import Study, StudyCell
from . import params as params_
from .base import StudyError, StudyKind, fail, mark
from .checkpoints import evaluate_checkpoint

ROUTES = {"persona": ["persona"], "skill": ["skill"], "both": ["persona", "skill"]}


class SftCells(StudyKind):
    """What reward_threshold and synthesis_routes share; each says which dataset a cell asks for (dataset_request)."""

    def dataset_request(self, params: dict, coordinates: dict) -> tuple[dict, dict]:
        """(selection, filters) of build_dataset for the cell."""
        raise NotImplementedError

    def training_params(self, params: dict, *, user) -> dict:
        value = params.get("base_model")
        if value in (None, ""):
            raise StudyError("a base model is needed (base_model: its name or id)")
        base = BaseModel.objects.filter(name=str(value)).first()
        if base is None and str(value).isdigit():
            base = BaseModel.objects.filter(pk=int(value)).first()
        if base is None:
            known = ", ".join(BaseModel.objects.values_list("name", flat=True)) or "none"
            raise StudyError(f"no base model {value!r} (registered: {known})")
        overrides = params.get("overrides") or {}
        if not isinstance(overrides, dict):
            raise StudyError("overrides must be an object of training settings")
        runs = params.get("eval_runs") or []
        if isinstance(runs, (str, int)):
            runs = [runs]
        runs = sorted({params_.an_id(r, "eval_runs") for r in runs})
        if not runs:
            raise StudyError(
                "at least one evaluation run is needed (eval_runs: the rollouts the datasets are built from)"
            )
        missing = sorted(set(runs) - set(EvalRun.objects.filter(pk__in=runs).values_list("pk", flat=True)))
        if missing:
            raise StudyError(f"no evaluation run {', '.join(f'#{pk}' for pk in missing)}")
        version = params_.version(params.get("benchmark_version"))
        return {
            "eval_runs": runs,
            "base_model": base.pk,
            "preset": str(params.get("preset") or "tiny-cpu"),
            "overrides": overrides,
            "cpu": bool(params.get("cpu", True)),
            "benchmark_version": version.pk,
            "harness": params_.harness(params.get("harness")),
        }

    def advance(self, study: Study, cell: StudyCell, *, user, here: bool = False) -> None:
        params = study.params
        if cell.dataset_id is None:
            self._build(study, cell, user=user)
            return
        dataset = TrainingDataset.objects.get(pk=cell.dataset_id)
        if dataset.status != TrainingDataset.Status.READY:
            reason = dataset.error or empty_reason(dataset) or dataset.status
            fail(cell, f"dataset #{dataset.pk} is {dataset.status}: {reason}")
            return
        if cell.training_run_id is None:
            try:
                run = start_training_run(
                    kind="sft",
                    user=user,
                    base_model=BaseModel.objects.get(pk=params["base_model"]),
                    preset=params["preset"],
                    overrides=params["overrides"],
                    cpu=params["cpu"],
                    dataset=dataset,
                    name=f"{study} · {cell.label}",
                )
            except TrainingRunError as exc:
                fail(cell, f"the SFT run could not be started: {exc}")
                return
            mark(cell, StudyCell.Status.RUNNING, training_run=run)
            return
        run = TrainingRun.objects.get(pk=cell.training_run_id)
        if run.status in (TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING):
            return
        if run.status != TrainingRun.Status.SUCCEEDED:
            fail(cell, f"SFT run #{run.pk} {run.status}: {(run.error or '').strip()[-300:] or 'see its page'}")
            return
        checkpoint = run.checkpoints.order_by("-step").first()
        if checkpoint is None:
            fail(cell, f"SFT run #{run.pk} succeeded without a checkpoint")
            return
        version = BenchmarkVersion.objects.get(pk=params["benchmark_version"])
        evaluate_checkpoint(study, cell, checkpoint, version=version, harness=params["harness"], user=user)

    def _build(self, study: Study, cell: StudyCell, *, user) -> None:
        selection, filters = self.dataset_request(study.params, cell.coordinates)
        base = BaseModel.objects.get(pk=study.params["base_model"])
        try:
            dataset = build_dataset(
                selection=selection, filters=filters, name=f"{study} · {cell.label}", user=user, base_model=base
            )
        except DatasetError as exc:
            fail(cell, f"the dataset could not be built: {exc}")
            return
        mark(cell, StudyCell.Status.RUNNING, dataset=dataset)
        if dataset.status != TrainingDataset.Status.READY:
            fail(cell, f"dataset #{dataset.pk} is {dataset.status}: {dataset.error or empty_reason(dataset)}")


class RewardThreshold(SftCells):
    name = "reward_threshold"
    title = "Reward threshold: SFT datasets at each minimum reward, trained and evaluated"
    axis = "threshold"

    def prepare(self, params: dict, *, user) -> dict:
        values = params.get("values") or []
        if isinstance(values, str):
            values = [v for v in values.split(",") if v.strip()]
        thresholds = []
        for value in values:
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise StudyError(f"a threshold must be a number in [0, 1], got {value!r}") from None
            if not 0.0 <= number <= 1.0:
                raise StudyError(f"a threshold must be a number in [0, 1], got {number:g}")
            thresholds.append(number)
        thresholds = sorted(set(thresholds))
        if not thresholds:
            raise StudyError("at least one threshold is needed (values: e.g. 0.5,0.75,1.0)")
        return {"values": thresholds, **self.training_params(params, user=user)}

    def cells(self, params: dict) -> list[dict]:
        return [{"threshold": value} for value in params["values"]]

    def dataset_request(self, params: dict, coordinates: dict) -> tuple[dict, dict]:
        return {"eval_runs": params["eval_runs"]}, {"min_reward": coordinates["threshold"]}


class SynthesisRoutes(SftCells):
    name = "synthesis_routes"
    title = "Synthesis routes: persona-driven, skill-grounded and both, trained and evaluated"
    axis = "route"

    def prepare(self, params: dict, *, user) -> dict:
        routes = params.get("routes") or list(ROUTES)
        if isinstance(routes, str):
            routes = [r.strip() for r in routes.split(",") if r.strip()]
        unknown = sorted(set(routes) - set(ROUTES))
        if unknown:
            raise StudyError(f"unknown route(s) {', '.join(unknown)}; known: {', '.join(ROUTES)}")
        min_reward = params.get("min_reward", 0.5)
        try:
            min_reward = float(min_reward)
        except (TypeError, ValueError):
            raise StudyError(f"min_reward must be a number in [0, 1], got {min_reward!r}") from None
        if not 0.0 <= min_reward <= 1.0:
            raise StudyError(f"min_reward must be a number in [0, 1], got {min_reward:g}")
        routes = [r for r in ROUTES if r in routes]
        batches, revisions = self._batches(params.get("batches"), routes)
        if batches and not params.get("eval_runs"):
            # The evaluation runs that rolled out the batches' kept tasks.
            runs = Rollout.objects.filter(revision__task__in=revisions.values("task"), eval_run__isnull=False)
            params = {**params, "eval_runs": sorted(set(runs.values_list("eval_run", flat=True)))}
            if not params["eval_runs"]:
                raise StudyError("no evaluation run has rolled out a task the batches kept: evaluate them first")
        return {
            "routes": routes,
            "min_reward": min_reward,
            "batches": batches,
            **self.training_params(params, user=user),
        }

    def _batches(self, value, routes: list[str]):
        """The synthesis batches asked for (ids) and their kept tasks' revisions (found by the provenance the catalog
        stage writes: metadata["synthesis"]["batch"]), each route asked having tasks of its own among them."""
        if not value:
            return [], TaskRevision.objects.none()
        if isinstance(value, (str, int)):
            value = [v for v in str(value).split(",") if v.strip()]
        ids = sorted({params_.an_id(v, "batches") for v in value})
        revisions = TaskRevision.objects.filter(metadata__synthesis__batch__in=ids)
        found = {r.metadata["synthesis"]["batch"] for r in revisions.only("metadata")}
        missing = sorted(set(ids) - found)
        if missing:
            raise StudyError(f"no kept task of synthesis batch {', '.join(f'#{pk}' for pk in missing)}")
        have = set(revisions.values_list("task__source", flat=True))
        lacking = [r for r in routes if not set(ROUTES[r]) <= have]
        if lacking:
            raise StudyError(f"route(s) {', '.join(lacking)} need kept tasks of each of their routes in the batches")
        return ids, revisions

    def cells(self, params: dict) -> list[dict]:
        return [{"route": route} for route in params["routes"]]

    def label(self, coordinates: dict) -> str:
        return coordinates["route"]

    def dataset_request(self, params: dict, coordinates: dict) -> tuple[dict, dict]:
        # The rollouts of the given runs whose task came from the route's synthesis (Task.source).
        return (
            {"eval_runs": params["eval_runs"], "sources": ROUTES[coordinates["route"]]},
            {"min_reward": params["min_reward"]},
        )
