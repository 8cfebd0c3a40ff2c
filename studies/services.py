"""Studies: start one (its cells made at once, nothing run yet), advance it (a job: each cell looks at its objects and
starts what is next), and its figures (per cell mean and CI, the best cell, every other cell compared with the best).

A study's life: running -> complete (every cell complete) | incomplete (nothing left to run, some cells failed; each
says why and the figures name them as missing) | cancelled (what it started is cancelled too). The advance job runs when the
study starts, when one of its evaluation runs finishes (their on_finish hook), and every minute for every running
study (studies.advance_running, for what has no hook: a training run, a checkpoint being served)."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

import jobs
from accounts.roles import ADMIN, has_role
from evaluation.models import EvalRun
from evaluation.reports import RunsNotComparable, compare_runs
from evaluation.services.runs import cancel_eval_run, run_here
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job

from .job_kinds import ADVANCE_JOB
from .kinds import StudyError, get_kind
from .models import Study, StudyCell

log = logging.getLogger(__name__)

MAX_CELLS = 50


def check_starter(user) -> None:
    """Starting a study starts jobs: admins only (a command, user None, runs as the operator)."""
    if user is not None and not has_role(user, ADMIN):
        raise PermissionDenied("starting a study needs the admin role")


def create_study(*, kind: str, params: dict, user, name: str = "") -> Study:
    """The study and its cells, all pending; nothing is started. StudyError says what is wrong with the ask."""
    check_starter(user)
    study_kind = get_kind(kind)
    if not isinstance(params, dict):
        raise StudyError("params must be an object")
    normal = study_kind.prepare(params, user=user)
    coordinates = study_kind.cells(normal)
    if len(coordinates) > MAX_CELLS:
        raise StudyError(f"a study has at most {MAX_CELLS} cells, this one would have {len(coordinates)}")
    creator = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        study = Study.objects.create(
            kind=study_kind.name,
            name=(name.strip() or f"{study_kind.name} study")[:200],
            params=normal,
            created_by=creator,
        )
        StudyCell.objects.bulk_create(
            StudyCell(study=study, index=i, coordinates=c, label=study_kind.label(c)[:100])
            for i, c in enumerate(coordinates)
        )
    return study


def start_study(*, kind: str, params: dict, user, name: str = "", queue: bool = True) -> Study:
    """Create the study and queue its first advance (raises jobs.engine.JobEngineError when the engine refuses);
    queue=False: the caller advances it itself (run_study_here)."""
    study = create_study(kind=kind, params=params, user=user, name=name)
    if not queue:
        return study
    try:
        jobs.enqueue(
            ADVANCE_JOB, created_by=user if user is not None and user.is_authenticated else None, study_id=study.pk
        )
    except JobEngineError as exc:  # nothing was started: the study says so rather than waiting for the periodic step
        Study.objects.filter(pk=study.pk).update(
            status=Study.Status.CANCELLED, finished_at=timezone.now(), error=f"the job engine did not take it: {exc}"
        )
        raise
    return study


def advance_study(study_id: int, *, here: bool = False) -> Study:
    """One step: every unfinished cell starts what is next (or fails, saying why); the study finishes when every
    cell has. The study's row is locked meanwhile: two steps at once (two runs finishing together) start nothing
    twice."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study_id)
        if study.is_finished:
            return study
        kind = get_kind(study.kind)
        for cell in study.cells.exclude(status__in=StudyCell.FINISHED).order_by("index"):
            try:
                with transaction.atomic():
                    kind.advance(study, cell, user=study.created_by, here=here)
            except Exception as exc:  # one cell's failure is that cell's, said on it; the others go on
                log.exception("study %s, cell %s", study.pk, cell.label)
                StudyCell.objects.filter(pk=cell.pk).update(
                    status=StudyCell.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000]
                )
        if not study.cells.exclude(status__in=StudyCell.FINISHED).exists():
            failed = study.cells.filter(status=StudyCell.Status.FAILED).exists()
            study.status = Study.Status.INCOMPLETE if failed else Study.Status.COMPLETE
            study.finished_at = timezone.now()
            study.summary = figures(study)
            study.save(update_fields=["status", "finished_at", "summary", "updated_at"])
    return study


def cancel_study(study: Study, *, user) -> Study:
    """Cancel a running study: its queued advance jobs and its cells' unfinished evaluation runs too (what is
    training goes on: cancel it on its page). A finished study is left as it is."""
    check_starter(user)
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.is_finished:
            return study
        study.status = Study.Status.CANCELLED
        study.finished_at = timezone.now()
        study.save(update_fields=["status", "finished_at", "updated_at"])
        StudyCell.objects.filter(study=study).exclude(status__in=StudyCell.FINISHED).update(
            status=StudyCell.Status.FAILED, error="the study was cancelled"
        )
    for job_run in JobRun.objects.filter(kind=ADVANCE_JOB, params__study_id=study.pk, status=JobRun.Status.QUEUED):
        cancel_job(job_run, user=user)
    for run in EvalRun.objects.filter(pk__in=study.cells.exclude(eval_run=None).values("eval_run")):
        if not run.is_finished:
            cancel_eval_run(run, user=user)
    study.summary = figures(study)
    Study.objects.filter(pk=study.pk).update(summary=study.summary)
    return study


def advance_running() -> list[int]:
    """One step of every running study (the periodic job). Returns their ids."""
    advanced = []
    for study_id in Study.objects.filter(status=Study.Status.RUNNING).values_list("pk", flat=True):
        try:
            advance_study(study_id)
        except Exception:  # one study's trouble does not stop the others
            log.exception("advancing study %s failed", study_id)
            continue
        advanced.append(study_id)
    return advanced


def run_study_here(study: Study, *, on_run=None) -> Study:
    """Run an evaluation-only study in this process (`study start --here`): advance, run each cell's evaluation
    run here, until every cell has finished."""
    if not get_kind(study.kind).evaluation_only:
        raise StudyError(f"a {study.kind} study trains on gpu workers: it cannot run here (leave out --here)")
    while True:
        study = advance_study(study.pk, here=True)
        if study.is_finished:
            return study
        pending = EvalRun.objects.filter(
            pk__in=study.cells.exclude(eval_run=None).values("eval_run"),
            status__in=(EvalRun.Status.QUEUED, EvalRun.Status.RUNNING),
        ).order_by("pk")
        if not pending.exists():
            return study  # nothing this process can run: the study waits for what it cannot do here
        for run in pending:
            run = run_here(run)
            if on_run:
                on_run(run)


# --- figures -------------------------------------------------------------------------------------------------------


def figures(study: Study) -> dict:
    """Per cell: its objects, status, error, and its evaluation run's mean and CI once finished; the best complete
    cell (highest mean, the first on a tie); every other complete cell's paired comparison with the best; the cells
    missing (not complete); and what the kind adds of the whole study."""
    cells = list(study.cells.select_related("eval_run").order_by("index"))
    rows = []
    for cell in cells:
        run = cell.eval_run
        overall = (run.summary or {}).get("overall") if run is not None and run.is_finished else None
        rows.append(
            {
                "cell": cell.index,
                "label": cell.label,
                "coordinates": cell.coordinates,
                "status": cell.status,
                "error": cell.error,
                "dataset": cell.dataset_id,
                "training_run": cell.training_run_id,
                "eval_run": cell.eval_run_id,
                "mean": overall["mean"] if overall else None,
                "ci": overall["ci"] if overall else None,
            }
        )
    complete = [
        (row, cell) for row, cell in zip(rows, cells, strict=True) if row["status"] == StudyCell.Status.COMPLETE
    ]
    complete = [(row, cell) for row, cell in complete if row["mean"] is not None]
    best = max(complete, key=lambda pair: (pair[0]["mean"], -pair[0]["cell"]), default=None)
    comparisons = []
    if best is not None:
        for row, cell in complete:
            if cell.pk == best[1].pk:
                continue
            try:
                paired = compare_runs(best[1].eval_run, cell.eval_run)
            except RunsNotComparable as exc:
                comparisons.append({"cell": row["cell"], "label": row["label"], "error": str(exc)})
                continue
            comparisons.append(
                {
                    "cell": row["cell"],
                    "label": row["label"],
                    "eval_run": cell.eval_run_id,
                    "mean_difference": paired["mean_difference"],
                    "ci": paired["ci"],
                    "p_value": paired["p_value"],
                }
            )
    return {
        "cells": rows,
        "best": {key: best[0][key] for key in ("cell", "label", "eval_run", "mean", "ci")} if best else None,
        "comparisons": comparisons,
        "missing": [row["label"] for row in rows if row["status"] != StudyCell.Status.COMPLETE],
        **get_kind(study.kind).extra_summary(study, rows),
    }


def study_json(study: Study) -> dict:
    """The `study start --json` and `study show --json` shape."""
    summary = study.summary if study.is_finished and study.summary else figures(study)
    return {
        "study": study.pk,
        "kind": study.kind,
        "name": study.name,
        "status": study.status,
        "error": study.error,
        "params": study.params,
        **summary,
    }


def chart(summary: dict, kind: str) -> dict:
    """The page's chart (static/js/charts.js): each cell's mean with its 95% interval as whiskers."""
    rows = summary["cells"]
    return {
        "type": "line" if kind == "training_exposure" else "bar",
        "labels": [row["label"] for row in rows],
        "datasets": [
            {
                "label": "mean score",
                "data": [row["mean"] for row in rows],
                "low": [row["ci"][0] if row["ci"] else None for row in rows],
                "high": [row["ci"][1] if row["ci"] else None for row in rows],
            }
        ],
        "y": {"min": 0, "max": 1, "title": "mean score"},
        "x": {"title": get_kind(kind).axis},
    }
