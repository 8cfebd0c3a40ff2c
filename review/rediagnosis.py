"""A new diagnosis when a saved revision changes the checker: the diagnosed revision's checker (its files and entry
command) against the new one's, and an endpoint serving the diagnosis role. Every save path of the review calls
`rediagnose_after_save` once its transaction commits (review.services, review.solving)."""

from __future__ import annotations

import logging

from django.db import transaction

import jobs
from accounts.roles import REVIEWER
from jobs.engine import JobEngineError
from jobs.models import JobRun
from llm.client import EndpointUnavailable, get_endpoint
from tasks.models import TaskRevision

from . import services
from .diagnosis import DIAGNOSIS_ROLE
from .job_kinds import DIAGNOSE_JOB

log = logging.getLogger(__name__)


def checker_state(revision: TaskRevision) -> tuple:
    """What makes a revision's checker: its entry command and its reward files' contents (comparable)."""
    return revision.checker_entry, sorted(revision.files.filter(role="reward").values_list("path", "blob_id"))


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


def rediagnose_after_save(candidate, revision: TaskRevision, *, user) -> None:
    """rediagnose_if_checker_changed once the current transaction commits. An engine that refuses the job costs the
    save nothing (the candidate page offers "Re-diagnose"); it is logged."""

    def start():
        try:
            rediagnose_if_checker_changed(candidate, revision, user=user)
        except JobEngineError:
            log.exception("could not start the diagnosis of candidate %s after r%s", candidate.pk, revision.number)

    transaction.on_commit(start)
