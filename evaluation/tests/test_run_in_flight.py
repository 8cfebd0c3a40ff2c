"""An evaluation run keeps only so many rollouts on the job engine (jobs.fanout.limit of the sandbox queue): the
first repeat of every task goes first, each rollout that finishes hands over the next, a retry takes its failed
attempt's place, a job the engine lost is replaced, and a cancelled run hands over nothing more."""

import pytest
from django.utils import timezone

from evaluation.harnesses.base import ExitReason
from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import endpoint, freeze, make_tasks
from jobs.models import JobRun

pytestmark = pytest.mark.django_db


def with_job(run):
    return run.rollouts.filter(job_run__status__in=JobRun.ACTIVE)


def finish(rollout, **fields):
    fields = {"status": Rollout.Status.SCORED, "exit_reason": ExitReason.COMPLETED, "score": 1.0, **fields}
    Rollout.objects.filter(pk=rollout.pk).update(attempt=rollout.attempt + 1, finished_at=timezone.now(), **fields)
    JobRun.objects.filter(pk=rollout.job_run_id).update(status=JobRun.Status.SUCCEEDED)
    run_progress.rollout_changed(rollout.pk)


@pytest.fixture
def run(settings, django_capture_on_commit_callbacks):
    settings.CLAWGYM_IN_FLIGHT = 4
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    version = freeze(make_tasks().values())  # 4 tasks
    with django_capture_on_commit_callbacks(execute=False) as submitted:
        run, _ = runs.start_eval_run(
            endpoint=endpoint("m"), benchmark_version=version, harness="builtin", repeats=3, user=None
        )
    run.submitted = submitted
    return run


def test_the_first_four_go_first_repeat_first_and_each_finished_one_hands_over_the_next(run):
    assert run.rollouts.count() == 12 and len(run.submitted) == 4
    first = list(with_job(run).order_by("pk"))
    assert {r.repeat_index for r in first} == {0} and len({r.revision_id for r in first}) == 4

    finish(first[0])
    assert with_job(run).count() == 4 and run.rollouts.filter(job_run__isnull=True).count() == 7
    assert with_job(run).exclude(repeat_index=0).count() == 1  # the second repeat starts once the first is out

    # An infrastructure failure's next attempt takes its place: no more on the engine than before.
    finish(first[1], status=Rollout.Status.FAILED, exit_reason=ExitReason.UPSTREAM_ERROR, score=None)
    retried = Rollout.objects.get(pk=first[1].pk)
    assert retried.status == Rollout.Status.QUEUED and retried.job_run.status == JobRun.Status.QUEUED
    assert with_job(run).count() == 4

    # A job the engine lost (refused, or failed with its worker) leaves its rollout queued: the next top-up
    # gives it a new job, as many as there is room for.
    lost = with_job(run).filter(status=Rollout.Status.QUEUED).order_by("pk").last()
    JobRun.objects.filter(pk=lost.job_run_id).update(status=JobRun.Status.FAILED)
    assert run_progress.top_up_runs() == {run.pk: 1}
    lost.refresh_from_db()
    assert lost.job_run.status == JobRun.Status.QUEUED and with_job(run).count() == 4
    assert run_progress.top_up(run.pk) == 0


def test_a_cancelled_run_hands_over_nothing_more_and_a_resume_goes_on_within_the_limit(run):
    runs.cancel_eval_run(run, user=None)
    assert run.rollouts.filter(status=Rollout.Status.CANCELLED).count() == 12
    assert run_progress.top_up(run.pk) == 0

    runs.resume_eval_run(EvalRun.objects.get(pk=run.pk), user=None)
    assert run.rollouts.filter(status=Rollout.Status.QUEUED).count() == 12 and with_job(run).count() == 4
