"""A rollout left "running" by a worker that died is failed (worker lost, retryable) when the lost job runs are
recovered (a worker starting, the periodic recovery, `reap_jobs`), not only when a later rollout job happens to start:
e.g. when the database went away mid-attempt and the job's end was recorded but not the rollout's. Also how
`evaluate` reports such a failed attempt on stderr."""

import socket

import pytest

from evaluation.models import Rollout
from evaluation.services.rollouts import start_rollouts
from jobs.models import JobRun
from jobs.runner import reap_stale, recover_lost
from llm.models import ModelEndpoint

pytestmark = pytest.mark.django_db

DEAD_PROCESS = f"{socket.gethostname()}:999999999:"  # no such pid on this host


@pytest.fixture
def orphaned(fruit_task):
    """A running rollout whose job run has ended and whose process is gone: no job of its own is left to end it."""
    endpoint = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    [rollout] = start_rollouts(fruit_task, endpoint, harness="builtin", user=None)
    JobRun.objects.filter(pk=rollout.job_run_id).update(status=JobRun.Status.FAILED, worker=DEAD_PROCESS)
    Rollout.objects.filter(pk=rollout.pk).update(status=Rollout.Status.RUNNING, attempt=1, worker=DEAD_PROCESS)
    return rollout


@pytest.mark.parametrize("recover", [recover_lost, reap_stale], ids=["a worker starting", "reap_jobs"])
def test_recovering_lost_job_runs_fails_the_rollout_a_dead_worker_left_running(orphaned, recover):
    recover()

    orphaned.refresh_from_db()
    assert (orphaned.status, orphaned.exit_reason) == (Rollout.Status.FAILED, "worker_lost")
    assert "exited before it finished" in orphaned.error and orphaned.retryable and orphaned.score is None


def test_evaluates_line_for_a_failed_attempt_says_infra_before_its_outcome_is_stored(fruit_task):
    from evaluation.management.commands.evaluate import rollout_line

    endpoint = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    [rollout] = start_rollouts(fruit_task, endpoint, harness="builtin", user=None)
    rollout.status, rollout.exit_reason, rollout.error = Rollout.Status.FAILED, "upstream_error", "unreachable\nmore"
    assert rollout.outcome == ""  # the hook writes it just after the status; a line read between said "failed"

    line = rollout_line(rollout, 2)

    assert line == f"fruit-summary repeat 1/2 (rollout #{rollout.pk}, attempt 0): infra: upstream_error: unreachable"
