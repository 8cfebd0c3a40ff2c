"""Evaluation runs on a real job worker (a django-q2 cluster on the test database): `evaluate` waits for the
worker's rollouts, and a worker killed mid-run is resumed by `evaluate --resume RUN --here` without running the
finished rollouts again (the issue's proof). ~60 s: the cluster starts once for both tests."""

import dataclasses
import json
import os
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.models import EvalRun, Rollout, RolloutScore
from evaluation.services.runs import start_eval_run
from evaluation.testing import RIGHT, WRONG, endpoints, expected_scores, make_tasks, needs_bwrap, respond
from jobs.testing import use_engine, wait_for_job_run
from lib.testing import wait_until
from llm.testing import Reply

pytestmark = [needs_bwrap, pytest.mark.workers, pytest.mark.django_db(transaction=True)]

TASK_MARK = re.compile(r"\(task ([a-z0-9-]+)\)")


@pytest.fixture
def world(proxied_django_q_worker_process, live_server_asgi, scripted_upstream, settings):
    if not proxied_django_q_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{proxied_django_q_worker_process.log_tail()}")
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    scripted_upstream.responder = respond
    revisions = make_tasks()
    strong, _weak = endpoints(scripted_upstream)
    with use_engine("django_q"):
        yield proxied_django_q_worker_process, revisions, strong, scripted_upstream


def task_of(body: dict) -> str:
    mark = TASK_MARK.search(json.dumps(body))
    return mark.group(1) if mark else ""


def calls_per_task(upstream) -> dict:
    counts: dict = {}
    for received in upstream.requests:
        counts[task_of(received.json)] = counts.get(task_of(received.json), 0) + 1
    return counts


def test_evaluate_waits_for_the_worker_and_takes_over_a_run_started_here(world, settings):
    worker, _revisions, _strong, upstream = world
    # Started --here with eval-d's model down: eval-a is scored in this process, eval-d fails (infra) for good.
    settings.CLAWGYM_EVAL_MAX_ATTEMPTS = 1
    upstream.responder = lambda body: Reply.error(503, "down") if task_of(body) == "eval-d" else respond(body)
    args = ("evaluate", "--task", "eval-a", "eval-d", "--endpoint", "strong", "--harness", "builtin", "--json")
    out = StringIO()
    with pytest.raises(CommandError, match="eval-d"):
        call_command(*args, "--here", stdout=out, stderr=StringIO())
    first = json.loads(out.getvalue().strip().splitlines()[-1])
    assert first["status"] == "incomplete" and first["outcomes"]["infra"] == 1

    # The same configuration without --here: the run is resumed on the worker, which runs only what is left.
    upstream.responder = respond
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["run"] == first["run"] and report["status"] == "complete"
    assert report["overall"]["mean"] == (RIGHT + WRONG) / 2
    assert {t: f["mean"] for t, f in report["tasks"].items()} == {"eval-a": RIGHT, "eval-d": WRONG}
    here, there = (
        Rollout.objects.select_related("job_run").get(eval_run_id=report["run"], revision__task__external_id=t)
        for t in ("eval-a", "eval-d")
    )
    assert (here.attempt, here.worker.split(":")[1]) == (1, str(os.getpid()))
    assert there.attempt == 2 and there.worker.split(":")[1] != str(os.getpid())  # it ran in the worker
    assert there.job_run.queue == "sandbox"
    assert wait_for_job_run(there.job_run, timeout=30).status == "succeeded"  # it ends just after its rollout
    assert [line.split(" (rollout")[0] for line in err.getvalue().splitlines() if " repeat " in line] == [
        "eval-d repeat 1/1"
    ]


def test_a_worker_killed_mid_run_is_resumed_without_running_the_finished_rollouts_again(world):
    worker, revisions, strong, upstream = world
    # The worker runs one rollout at a time; the third task it starts gets a slow model, and the worker is killed
    # while that rollout's agent waits for the answer. The model is quick again for the rerun.
    started: list[str] = []

    def slow_third(body: dict):
        reply = respond(body)
        task = task_of(body)
        if task not in started:
            started.append(task)
            if len(started) == 3:
                return dataclasses.replace(reply, delay=25)
        return reply

    upstream.responder = slow_third
    run, reused = start_eval_run(endpoint=strong, revisions=list(revisions.values()), harness="builtin", user=None)
    assert not reused and run.rollouts.count() == 4

    def there():
        assert worker.alive(), worker.log_tail()
        return run.rollouts.filter(status=Rollout.Status.SCORED).count() == 2 and upstream.in_flight == 1

    wait_until(there, lambda: f"the run to get there: {list(run.rollouts.values('status'))}", timeout=120)
    [killed] = run.rollouts.filter(status=Rollout.Status.RUNNING)
    assert task_of(upstream.requests[-1].json) == started[2] == killed.revision.task.external_id
    worker.kill()  # the cluster and its worker process at once, as a crash would

    kept = {r.pk: r for r in run.rollouts.filter(status=Rollout.Status.SCORED)}
    [waiting] = run.rollouts.filter(status=Rollout.Status.QUEUED)
    calls_before = calls_per_task(upstream)
    assert run.rollouts.get(pk=killed.pk).status == Rollout.Status.RUNNING  # nobody has noticed yet

    out, err = StringIO(), StringIO()
    call_command("evaluate", "--resume", str(run.pk), "--here", "--json", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])

    assert report["run"] == run.pk and report["status"] == "complete"
    assert {t: f["mean"] for t, f in report["tasks"].items()} == expected_scores("strong-model")
    assert report["overall"]["mean"] == 0.9375 and report["overall"]["ci"] == [0.8125, 1.0]
    assert report["outcomes"] == {"scored": 4, "agent_limit": 0, "agent_error": 0, "judge_incomplete": 0, "infra": 0}
    # The rollouts scored before the kill were kept as they were: attempt 1, one scoring, no model call since.
    for pk, before in kept.items():
        after = Rollout.objects.get(pk=pk)
        assert (after.attempt, after.status, after.score, after.finished_at) == (
            1,
            Rollout.Status.SCORED,
            before.score,
            before.finished_at,
        )
        assert RolloutScore.objects.filter(rollout=after).count() == 1
        task = after.revision.task.external_id
        assert calls_per_task(upstream)[task] == calls_before[task]
    # The killed one ran again, here, as its second attempt; the first is recorded as lost with its worker.
    killed.refresh_from_db()
    assert (killed.status, killed.attempt, killed.score) == (
        Rollout.Status.SCORED,
        2,
        RIGHT if killed.revision.task.external_id != "eval-d" else WRONG,
    )
    assert [(a["attempt"], a["status"], a["exit_reason"]) for a in killed.previous_attempts] == [
        (1, "failed", "worker_lost")
    ]
    assert "exited before it finished" in killed.previous_attempts[0]["error"]
    assert killed.worker.split(":")[1] == str(os.getpid())
    # The one the worker never started ran here, once.
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempt, waiting.worker.split(":")[1]) == ("scored", 1, str(os.getpid()))
    run.refresh_from_db()
    assert run.status == EvalRun.Status.COMPLETE and len(run.resumes) == 1 and run.rollouts_finished == 4
