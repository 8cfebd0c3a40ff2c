"""A new diagnosis when a saved revision changes the checker: the diagnosed revision's checker (its files and entry
command) against the new one's, and an endpoint serving the diagnosis role. tasks.services.save_package calls
`after_checker_change` for every revision that changes the checker, whatever path made it (the review's editors, the
task API, an import): the task's open candidates get a sanity check of it and a new diagnosis once it commits."""

from __future__ import annotations

import logging

from django.db import transaction

import jobs
from accounts.roles import REVIEWER
from jobs.engine import JobEngineError
from jobs.models import JobRun
from llm.client import EndpointUnavailable, get_endpoint
from tasks.job_kinds import SANITY_JOB
from tasks.models import TaskRevision
from tasks.services import checker_state

from . import services
from .diagnosis import DIAGNOSIS_ROLE
from .job_kinds import DIAGNOSE_JOB
from .models import BenchmarkCandidate

log = logging.getLogger(__name__)


def diagnosis_endpoint_missing() -> str:
    """Why no diagnosis can be started ("" when an enabled endpoint serves the diagnosis role)."""
    try:
        get_endpoint(role=DIAGNOSIS_ROLE)
    except EndpointUnavailable:
        return "no model endpoint serves the diagnosis role: an admin adds one under Models"
    return ""


class DiagnosisUnavailable(services.ReviewError):
    """No enabled endpoint serves the diagnosis role: a diagnosis started now could only fail."""


def diagnose_again(candidate, *, user) -> JobRun:
    """A reviewer's "Re-diagnose" (the candidate page's button and `d` key, POST /api/candidates/ID/diagnose/): the
    candidate's diagnosis run, the one already under way if any. Refused without the reviewer role (NotAllowed) or
    without an endpoint serving the diagnosis role (DiagnosisUnavailable); the engine's refusal is JobEngineError."""
    services._require(user, REVIEWER, "diagnosing a candidate")
    missing = diagnosis_endpoint_missing()
    if missing:
        raise DiagnosisUnavailable(f"Cannot diagnose: {missing}.")
    (run,) = services.start_diagnosis([candidate], user=user)
    return run


def rediagnose_if_checker_changed(candidate, revision: TaskRevision, *, user) -> JobRun | None:
    """Start a diagnosis of the candidate when `revision` changed the checker since the diagnosed revision and an
    endpoint serves the diagnosis role: the run (the one already under way, if any), or None (the checker is the
    same, the candidate was never diagnosed, or no endpoint serves the role)."""
    diagnosis = candidate.diagnoses.select_related("revision").first()
    if diagnosis is None or diagnosis.revision_id == revision.pk:
        return None
    if checker_state(diagnosis.revision) == checker_state(revision) or diagnosis_endpoint_missing():
        return None
    active = JobRun.objects.filter(kind=DIAGNOSE_JOB, status__in=JobRun.ACTIVE, params__candidate_id=candidate.pk)
    return active.first() or jobs.enqueue(DIAGNOSE_JOB, created_by=user, candidate_id=candidate.pk)


def after_checker_change(revision: TaskRevision, *, user) -> None:
    """tasks.services' checker-change hook (registered in ReviewConfig.ready): once the transaction that made
    `revision` commits, and when its task is an open candidate, a sanity check of the revision (unless its save
    queued one already, as the review's editors do) and a diagnosis of each open candidate diagnosed at another
    checker. So the proof and the diagnosis never go stale silently, whichever path changed the checker. An engine
    that refuses the jobs costs the save nothing (the pages offer both again); it is logged."""
    candidates = list(BenchmarkCandidate.objects.filter(task_id=revision.task_id, status__in=BenchmarkCandidate.OPEN))
    if not candidates:
        return

    def start():
        try:
            if not JobRun.objects.filter(kind=SANITY_JOB, params__revision_id=revision.pk).exists():
                jobs.enqueue(SANITY_JOB, created_by=user, revision_id=revision.pk)
            for candidate in candidates:
                rediagnose_if_checker_changed(candidate, revision, user=user)
        except JobEngineError:
            log.exception("could not start the checks of r%s of task %s", revision.number, revision.task_id)

    transaction.on_commit(start)
