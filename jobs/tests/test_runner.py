"""The runner in this process: claiming, running twice, failures, cancellation, lost workers, reaping."""

import socket
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone
from django_q.models import OrmQ

from jobs import runner
from jobs.models import JobRun
from jobs.registry import job
from jobs.runner import JobCancelled, JobContext, execute, reap_stale, recover_lost, worker_gone, worker_id

pytestmark = pytest.mark.django_db

DEAD_WORKER = f"{socket.gethostname()}:999999999:"  # no such pid on this host


@job("jobs.tests.unjsonable", title="Returns something that is not JSON")
def unjsonable(ctx):
    return {"when": timezone.now()}


@job("jobs.tests.cancels_itself", title="Cancels itself, then reports progress")
def cancels_itself(ctx):
    JobRun.objects.filter(pk=ctx.id).update(cancel_requested=True)
    ctx.flush()
    ctx.progress(1, 2)
    raise AssertionError("progress should have raised JobCancelled")


@job("jobs.tests.some_items_fail", title="Goes through items, of which some fail")
def some_items_fail(ctx, *, items: int, failing: int):
    ctx.progress(items, items)
    ctx.items_failed(failing, of=items)
    return {"failed": [f"item {n}" for n in range(failing)]}


def make_run(kind="jobs.ping", **fields):
    fields.setdefault("engine", "django_q")
    return JobRun.objects.create(kind=kind, **fields)


def test_execute_runs_a_queued_run_to_succeeded():
    run = make_run(params={"steps": 3})

    assert execute(run.pk) == JobRun.Status.SUCCEEDED

    run.refresh_from_db()
    assert (run.progress_done, run.progress_total, run.result) == (3, 3, {"steps": 3})
    assert run.log_tail.count("step ") == 3 and run.log_tail.endswith("step 3 of 3\n")
    assert run.attempts == 1 and run.worker == worker_id()
    assert run.started_at <= run.heartbeat_at <= run.finished_at


def test_execute_twice_runs_once():
    run = make_run(params={"steps": 2})

    assert execute(run.pk) == JobRun.Status.SUCCEEDED
    first = JobRun.objects.get(pk=run.pk)
    assert execute(run.pk) == JobRun.Status.SUCCEEDED  # a second delivery of the same message

    run.refresh_from_db()
    assert run.attempts == 1
    assert run.log_tail == first.log_tail and run.finished_at == first.finished_at


def test_a_run_held_by_a_live_worker_is_not_taken():
    # This test process is alive: a run it "holds" must not be claimed by a second delivery.
    run = make_run(status=JobRun.Status.RUNNING, worker=worker_id(), attempts=1, heartbeat_at=timezone.now())

    assert execute(run.pk) == JobRun.Status.RUNNING

    run.refresh_from_db()
    assert run.attempts == 1 and run.log_tail == ""


def test_execute_of_a_missing_run_does_nothing():
    assert execute(123456789) is None


def test_failing_job_is_failed_with_traceback():
    run = make_run(params={"steps": 1, "fail": True})

    assert execute(run.pk) == JobRun.Status.FAILED

    run.refresh_from_db()
    assert run.error.startswith("RuntimeError: asked to fail\n")
    assert "Traceback (most recent call last)" in run.error
    assert run.result is None and run.finished_at


def test_a_run_whose_every_item_failed_has_failed_and_keeps_its_report():
    run = make_run("jobs.tests.some_items_fail", params={"items": 51, "failing": 51})

    assert execute(run.pk) == JobRun.Status.FAILED

    run.refresh_from_db()
    assert run.error == "All 51 of its items failed: the log and the result say why."
    assert len(run.result["failed"]) == 51 and (run.failed_items, run.items_total) == (51, 51)
    assert run.outcome == JobRun.Status.FAILED and run.outcome_display == "Failed: all 51 items failed"


def test_a_run_with_some_failed_items_completed_with_failures():
    run = make_run("jobs.tests.some_items_fail", params={"items": 51, "failing": 3})

    assert execute(run.pk) == JobRun.Status.SUCCEEDED

    run.refresh_from_db()
    assert run.error == "" and (run.failed_items, run.items_total) == (3, 51)
    assert run.outcome == JobRun.PARTIAL and run.outcome_display == "Completed with 3 of 51 failed"


def test_a_result_that_is_not_json_fails_the_run_instead_of_leaving_it_running():
    run = make_run("jobs.tests.unjsonable")

    assert execute(run.pk) == JobRun.Status.FAILED
    assert "not JSON serializable" in JobRun.objects.get(pk=run.pk).error


def test_a_kind_no_longer_registered_fails_the_run():
    run = make_run("jobs.no_such_kind")

    assert execute(run.pk) == JobRun.Status.FAILED
    assert "UnknownJobKind" in JobRun.objects.get(pk=run.pk).error


def test_progress_raises_job_cancelled_once_a_cancel_is_requested():
    run = make_run("jobs.tests.cancels_itself")

    assert execute(run.pk) == JobRun.Status.CANCELLED

    run.refresh_from_db()
    assert run.error == "" and "stopped: cancel requested" in run.log_tail


def test_log_never_raises_for_a_cancel_request():
    run = make_run(status=JobRun.Status.RUNNING, worker="w", cancel_requested=True)
    ctx = JobContext(run)

    ctx.log("still cleaning up")  # cleanup code may log after a cancel; only progress() stops the job

    with pytest.raises(JobCancelled):
        ctx.progress(1)
    assert "still cleaning up" in JobRun.objects.get(pk=run.pk).log_tail


def test_log_tail_keeps_only_the_end():
    run = make_run(status=JobRun.Status.RUNNING, worker="w")
    ctx = JobContext(run)
    for i in range(3):
        ctx.log("x" * (JobRun.LOG_TAIL_CHARS // 2) + f" line {i}")
        ctx.flush()

    tail = JobRun.objects.get(pk=run.pk).log_tail
    assert len(tail) == JobRun.LOG_TAIL_CHARS
    assert tail.endswith(" line 2\n") and " line 0" not in tail


def test_worker_gone_tells_a_dead_process_from_a_live_one():
    assert not worker_gone(worker_id())
    assert worker_gone(DEAD_WORKER)
    # A reused pid: the same pid with another start time is another process.
    host, pid, _ = worker_id().split(":")
    assert worker_gone(f"{host}:{pid}:1")
    assert not worker_gone("some-other-host:1:1")  # unknown on another host: only heartbeats tell


def test_a_run_whose_worker_died_is_claimed_again_with_a_log_line():
    run = make_run(params={"steps": 1}, status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=1)

    assert execute(run.pk) == JobRun.Status.SUCCEEDED

    run.refresh_from_db()
    assert run.attempts == 2 and run.worker == worker_id()
    assert "attempt 2 of 3: a previous worker was lost" in run.log_tail


def test_a_lost_run_out_of_attempts_is_failed_with_the_reason():
    run = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=runner.MAX_ATTEMPTS)

    assert execute(run.pk) == JobRun.Status.FAILED

    run.refresh_from_db()
    assert run.error.startswith("Worker lost: its worker") and "gave up after 3 attempts" in run.error


def test_reap_stale_fails_runs_without_heartbeat_and_leaves_live_ones():
    old = timezone.now() - timedelta(hours=1)
    stale = make_run(status=JobRun.Status.RUNNING, worker="elsewhere:7:7", heartbeat_at=old, started_at=old)
    dead = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, heartbeat_at=timezone.now())
    live = make_run(status=JobRun.Status.RUNNING, worker="elsewhere:8:8", heartbeat_at=timezone.now())
    queued = make_run()

    assert reap_stale() == 2

    stale.refresh_from_db()
    assert stale.status == JobRun.Status.FAILED and "sent no heartbeat since" in stale.error
    assert stale.finished_at and "Worker lost" in stale.log_tail
    assert JobRun.objects.get(pk=dead.pk).error.startswith("Worker lost: its worker")
    assert JobRun.objects.get(pk=live.pk).status == JobRun.Status.RUNNING
    assert JobRun.objects.get(pk=queued.pk).status == JobRun.Status.QUEUED
    assert reap_stale() == 0


def test_reap_stale_handles_a_run_that_never_beat():
    run = make_run(status=JobRun.Status.RUNNING, worker="elsewhere:1:1")
    JobRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=1))

    assert reap_stale() == 1


def test_recover_lost_requeues_on_the_runs_engine_and_fails_the_exhausted():
    lost = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=1)
    exhausted = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=runner.MAX_ATTEMPTS)
    cancelled = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=1, cancel_requested=True)

    done = recover_lost()

    assert done == {"requeued": [lost.pk], "failed": [exhausted.pk], "cancelled": [cancelled.pk], "redelivered": []}
    lost.refresh_from_db()
    assert lost.status == JobRun.Status.QUEUED and lost.worker == ""
    assert "queued again" in lost.log_tail
    assert OrmQ.objects.count() == 1  # handed to django-q again (the run's engine)
    assert JobRun.objects.get(pk=exhausted.pk).error.endswith("gave up after 3 attempts.")
    cancelled.refresh_from_db()
    assert cancelled.finished_at and "not run again: cancel was requested" in cancelled.log_tail


def test_a_lost_run_with_a_cancel_request_is_not_run_again():
    run = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=1, cancel_requested=True)

    assert execute(run.pk) == JobRun.Status.CANCELLED
    assert JobRun.objects.get(pk=run.pk).attempts == 1


def test_fan_out_queues_one_child_per_value_and_a_second_delivery_only_the_missing_ones(
    django_capture_on_commit_callbacks,
):
    parent = make_run(status=JobRun.Status.RUNNING, worker=worker_id())
    make_run(parent=parent, params={"steps": 1})  # the first delivery got this far before it died
    ctx = JobContext(parent)

    with django_capture_on_commit_callbacks(execute=False):
        assert ctx.fan_out("jobs.ping", "steps", [1, 2, 3], "pings") == 3
    ctx.flush()

    children = JobRun.objects.filter(parent=parent).order_by("id")
    assert [c.params for c in children] == [{"steps": 1}, {"steps": 2}, {"steps": 3}]
    parent.refresh_from_db()
    assert (parent.progress_done, parent.progress_total) == (2, 2)
    assert parent.log_tail.endswith(
        "queued 2 pings (1 were queued before); 2 handed to the workers now, the rest as those finish\n"
    )
    assert parent.batch().total == 3 and parent.batch().done == 0


@job("jobs.tests.loses_its_connection", title="Its database connection is cut, then it fails")
def loses_its_connection(ctx):
    ctx.log("before the cut")
    try:
        with connection.cursor() as cursor:  # as a database restart does to every open connection
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    except OperationalError:
        pass  # the cut answers with an error of its own
    raise RuntimeError("the step after the cut failed")


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="cuts its own connection with pg_terminate_backend (PostgreSQL's)",
)


@postgresql_only
@pytest.mark.django_db(transaction=True)  # execute() as a worker runs it: outside any transaction
def test_a_run_whose_connection_was_cut_is_recorded_failed_once_the_database_answers():
    run = make_run()
    JobRun.objects.filter(pk=run.pk).update(kind="jobs.tests.loses_its_connection")

    assert execute(run.pk) == JobRun.Status.FAILED  # the record of its end took a new connection

    run.refresh_from_db()
    assert run.finished_at and "RuntimeError: the step after the cut failed" in run.error
    assert "before the cut" in run.log_tail  # a line the dropped connection did not write is written on the next try


def test_when_reachable_tries_again_on_a_new_connection_and_gives_up_after_its_time(monkeypatch):
    closed, sleeps = [], []

    class Connection:  # a worker's: outside any transaction
        in_atomic_block = False

        def close(self):
            closed.append(1)

    monkeypatch.setattr(runner, "connection", Connection())
    monkeypatch.setattr(runner.time, "sleep", sleeps.append)
    answers = iter([OperationalError("server closed the connection"), OperationalError("refused"), "written"])

    def write():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert runner.when_reachable(write, "a write", seconds=60) == "written"
    assert (len(closed), sleeps) == (2, [1.0, 1.0])

    def never():
        raise OperationalError("refused")

    with pytest.raises(OperationalError):
        runner.when_reachable(never, "a write", seconds=0)


def test_recovering_lost_runs_also_runs_the_other_apps_sweeps(monkeypatch):
    swept = []
    monkeypatch.setattr(runner, "_RECOVERIES", [])
    runner.register_recovery(lambda: swept.append("first"))
    runner.register_recovery(lambda: 1 / 0)  # a failing sweep is logged; the others and the recovery go on
    runner.register_recovery(lambda: swept.append("last"))

    lost = make_run(status=JobRun.Status.RUNNING, worker=DEAD_WORKER, attempts=1)
    assert recover_lost()["requeued"] == [lost.pk]
    assert reap_stale() == 0

    assert swept == ["first", "last", "first", "last"]
