"""The study-kind interface. A kind turns what was asked into cells (prepare, cells) and moves one cell on
(advance): it looks at the objects the cell made so far and starts what is next, or records why the cell failed.
advance() is called again and again (each time the study's advance job runs): it must start nothing twice."""

from __future__ import annotations

from django.db import transaction

from evaluation.models import EvalRun
from evaluation.services.runs import EvalRunError, create_eval_run, start_eval_run

from ..job_kinds import ADVANCE_JOB
from ..models import Study, StudyCell


class StudyError(ValueError):
    """A study cannot be started as asked; the message says what to change."""


class StudyKind:
    name: str = ""
    title: str = ""
    axis: str = ""  # the parameter the cells vary, as the page and the JSON name it
    # Whether every step is an evaluation run (the command's --here can run it in its own process).
    evaluation_only: bool = False

    def prepare(self, params: dict, *, user) -> dict:
        """The parameters, checked and normalised (ids, not names; the stored form); StudyError says what is wrong."""
        raise NotImplementedError

    def cells(self, params: dict) -> list[dict]:
        """The coordinates of each cell, in order: [{"threshold": 0.5}, ...]."""
        raise NotImplementedError

    def label(self, coordinates: dict) -> str:
        value = coordinates[self.axis]
        return f"{self.axis} {value:g}" if isinstance(value, float) else f"{self.axis} {value}"

    def advance(self, study: Study, cell: StudyCell, *, user, here: bool = False) -> None:
        """Look at the cell's objects and start what is next (or fail the cell, saying why)."""
        raise NotImplementedError

    def extra_summary(self, study: Study, rows: list[dict]) -> dict:
        """Figures of the whole study beyond the per-cell ones (stability: the spread of the run means)."""
        return {}


# --- what every kind's cells do ------------------------------------------------------------------------------------


def fail(cell: StudyCell, error: str) -> None:
    StudyCell.objects.filter(pk=cell.pk).update(status=StudyCell.Status.FAILED, error=error[:4000])
    cell.status, cell.error = StudyCell.Status.FAILED, error


def mark(cell: StudyCell, status: str, **links) -> None:
    fields = {"status": status, "error": "", **links}
    StudyCell.objects.filter(pk=cell.pk).update(**fields)
    for key, value in fields.items():
        setattr(cell, key, value)


def evaluate(study: Study, cell: StudyCell, *, user, here: bool, name: str, **settings_) -> EvalRun | None:
    """Start the cell's evaluation run (fresh: a study's runs are its own, never an earlier run resumed) with this
    study's advance job as its on_finish hook; with `here`, only created, without the hook (the command's process
    runs it and advances the study itself: no job is queued that no worker may take). None, and the cell failed,
    when the run cannot be started."""
    hook = {"on_finish": ADVANCE_JOB, "on_finish_params": {"study_id": study.pk}}
    try:
        with transaction.atomic():
            if here:
                run, _ = create_eval_run(user=user, inline=True, fresh=True, name=name, **settings_)
            else:
                run, _ = start_eval_run(user=user, fresh=True, name=name, **hook, **settings_)
            mark(cell, StudyCell.Status.RUNNING, eval_run=run)
    except EvalRunError as exc:
        fail(cell, f"the evaluation run could not be started: {exc}")
        return None
    return run


def follow_evaluation(cell: StudyCell) -> None:
    """The cell is where its evaluation run is: complete with it, failed when it finished without every score."""
    run = EvalRun.objects.only("status", "summary").get(pk=cell.eval_run_id)
    if run.status == EvalRun.Status.COMPLETE:
        mark(cell, StudyCell.Status.COMPLETE)
    elif run.status == EvalRun.Status.INCOMPLETE:
        missing = (run.summary or {}).get("missing") or []
        names = ", ".join(str(m) for m in missing[:5]) + (" …" if len(missing) > 5 else "")
        fail(cell, f"evaluation run #{run.pk} finished incomplete: no score for {names or 'some repeats'}")
    elif run.status == EvalRun.Status.CANCELLED:
        fail(cell, f"evaluation run #{run.pk} was cancelled")
    elif cell.status != StudyCell.Status.RUNNING:
        mark(cell, StudyCell.Status.RUNNING)
