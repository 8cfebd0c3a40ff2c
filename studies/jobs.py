"""The studies' background jobs; the work is the services'."""

from jobs.registry import job

from .job_kinds import ADVANCE_JOB, ADVANCE_RUNNING_JOB
from .models import Study
from .services import advance_running, advance_study


def _subject(params: dict) -> tuple[str, str]:
    study = Study.objects.filter(pk=params.get("study_id")).only("name").first()
    return (str(study) if study else f"study #{params.get('study_id')}"), f"/studies/{params.get('study_id')}/"


@job(ADVANCE_JOB, title="Advance a study", subject=_subject)
def advance(ctx, *, study_id: int) -> dict:
    """One step of the study: each cell starts what is next; queued when it starts and as its runs finish."""
    study = advance_study(study_id)
    counts = {}
    for status in study.cells.values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    ctx.log(f"study #{study_id}: {study.status}; cells {counts}")
    return {"study": study_id, "status": study.status, "cells": counts}


@job(ADVANCE_RUNNING_JOB, title="Advance running studies")
def advance_all(ctx) -> dict:
    """Periodic: every running study one step (training runs and served checkpoints have no hook of their own)."""
    return {"advanced": advance_running()}
