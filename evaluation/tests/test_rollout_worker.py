"""Rollouts on a real job worker (django-q2 on the test database): the `rollout` command waits for the job; a worker
killed mid-rollout leaves the rollout failed with a reason and retryable; a retry is the next attempt on the same row
and counts once."""

import json
import os
import signal
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.models import Rollout
from evaluation.services.rollouts import retry_rollout, start_rollouts
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap, wait_rollout
from evaluation.workspaces import attempt_folders
from jobs.testing import wait_for_job_run
from lib.testing import wait_until
from llm.models import ModelCall
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.workers, pytest.mark.django_db(transaction=True)]


def test_the_rollout_command_waits_for_the_worker(
    proxied_django_q_worker, scripted_upstream, fruit_task, agent_endpoint
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}), Reply.text("Done.")
    )
    out = StringIO()
    call_command(
        "rollout",
        "--task",
        "fruit-summary",
        "--endpoint",
        "scripted",
        "--harness",
        "builtin",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )

    [row] = json.loads(out.getvalue().strip().splitlines()[-1])
    assert (row["status"], row["score"], row["attempt"]) == ("scored", 1.0, 1)
    rollout = Rollout.objects.get(pk=row["id"])
    # The command returns once the rollout is scored; the worker marks its job succeeded just after (once the run's
    # sandbox is put away), so that is waited for, briefly.
    job_run = rollout.job_run

    def job_ended():
        job_run.refresh_from_db()
        return job_run.status != "running"

    wait_until(job_ended, "the rollout's job to end", timeout=30)
    assert job_run.queue == "sandbox" and job_run.status == "succeeded"
    assert rollout.worker.split(":")[1] != str(os.getpid())  # it ran in the worker, not here


def test_a_killed_worker_leaves_the_rollout_failed_and_a_retry_counts_once(
    proxied_django_q_worker, scripted_upstream, fruit_task, agent_endpoint
):
    # The model takes its time on the first call: the worker is killed while the agent waits for it.
    scripted_upstream.push(Reply.text("never seen", delay=30))
    [rollout] = start_rollouts(fruit_task, agent_endpoint, harness="builtin", user=None)
    wait_rollout(rollout, [Rollout.Status.RUNNING])
    wait_until(lambda: scripted_upstream.in_flight, "the agent's call to the model", timeout=30)
    assert scripted_upstream.in_flight == 1
    rollout.refresh_from_db()  # seen running before its proxy session was stored; the agent's call comes after that
    first_session = rollout.proxy_session_id
    assert first_session is not None
    [folder] = attempt_folders(rollout)  # held by the worker while its agent waits for the model
    assert any(folder.glob("clawgym-ws-*")) and any(folder.glob("clawgym-run-*"))

    os.kill(int(rollout.worker.split(":")[1]), signal.SIGKILL)  # the pool process running the rollout
    # The cluster starts a new worker process, which runs the lost job again: it finds the attempt lost. Whoever
    # finds it lost removes its folder first, so the rollout is never seen failed with its workspace still there.
    wait_rollout(rollout, [Rollout.Status.FAILED])
    assert rollout.exit_reason == "worker_lost" and "exited before it finished" in rollout.error
    assert not folder.exists() and attempt_folders(rollout) == []
    assert rollout.retryable and rollout.attempt == 1 and rollout.score is None
    job_run = wait_for_job_run(rollout.job_run, timeout=30)
    assert job_run.status == "failed" and job_run.error.startswith(f"Rollout #{rollout.pk} failed (worker_lost): ")

    scripted_upstream.script.clear()
    scripted_upstream.push(
        Reply.tool_call("read", {"path": "fruit.csv"}),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done."),
    )
    retry_rollout(rollout, user=None)
    wait_rollout(rollout, Rollout.FINISHED)

    assert (rollout.status, rollout.score, rollout.attempt) == ("scored", 1.0, 2)
    assert attempt_folders(rollout) == []  # the retry's folder went before its results were stored
    assert rollout.previous_attempts == [
        {
            "attempt": 1,
            "status": "failed",
            "exit_reason": "worker_lost",
            "error": rollout.previous_attempts[0]["error"],
            "finished_at": rollout.previous_attempts[0]["finished_at"],
            "proxy_session": first_session,
        }
    ]
    # One row, one score: the retry replaced the lost attempt's results; only its own calls are counted.
    assert Rollout.objects.count() == 1
    assert rollout.proxy_session_id != first_session
    assert rollout.model_calls == ModelCall.objects.filter(session=rollout.proxy_session).count() == 3
    assert rollout.trajectories.count() == 1
