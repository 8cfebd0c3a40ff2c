"""run_progress.recompute_run (one pass over a run's rollouts, batched writes) gives exactly the task rows and counters
the incremental path (run_progress.rollout_changed, one rollout at a time) kept, from counters left wrong."""

from decimal import Decimal

import pytest
from django.utils import timezone

from evaluation.harnesses.base import ExitReason
from evaluation.models import EvalRun, EvalRunTask, Outcome, Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import endpoint, freeze, make_tasks

pytestmark = pytest.mark.django_db

ENDS = [  # status, exit reason, score of the rollouts in order; the last two stay queued and running
    (Rollout.Status.SCORED, ExitReason.COMPLETED, 1.0),
    (Rollout.Status.SCORED, ExitReason.MAX_TURNS, 0.25),
    (Rollout.Status.FAILED, ExitReason.UPSTREAM_ERROR, None),
    (Rollout.Status.INCOMPLETE, ExitReason.COMPLETED, 0.5),
    (Rollout.Status.SCORED, ExitReason.ERROR, 0.0),
    (Rollout.Status.SCORED, ExitReason.COMPLETED, 0.75),
]


def figures(run):
    run = EvalRun.objects.get(pk=run.pk)
    counters = (
        run.rollouts_total,
        run.rollouts_finished,
        run.input_tokens,
        run.output_tokens,
        Decimal(run.cost),
        run.agent_seconds,
        run.outcome_counts,
    )
    rows = list(EvalRunTask.objects.filter(run=run).order_by("pk").values(*run_progress.TASK_ROW_FIGURES))
    return counters, rows


def test_recompute_gives_what_the_incremental_path_kept(settings):
    settings.CLAWGYM_EVAL_MAX_ATTEMPTS = 1  # the infra failure is not retried: it stays failed
    run, _ = runs.create_eval_run(
        endpoint=endpoint("m"), benchmark_version=freeze(make_tasks().values()), repeats=2, inline=True, user=None
    )
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING)
    rollouts = list(run.rollouts.order_by("revision_id", "repeat_index"))
    for n, (rollout, (status, reason, score)) in enumerate(zip(rollouts, ENDS, strict=False)):
        Rollout.objects.filter(pk=rollout.pk).update(
            status=status,
            exit_reason=reason,
            score=score,
            attempt=1,
            finished_at=timezone.now(),
            input_tokens=100 * (n + 1),
            output_tokens=7,
            cost="0.0125",
            agent_seconds=1.2345 * (n + 1),
        )
        run_progress.rollout_changed(rollout.pk)
    Rollout.objects.filter(pk=rollouts[-1].pk).update(status=Rollout.Status.RUNNING)
    run_progress.rollout_changed(rollouts[-1].pk)
    kept = figures(run)
    assert kept[0][1] == 6 and kept[0][6][Outcome.INFRA] == 1 and kept[0][6][Outcome.SCORED] == 2

    outcomes = dict(run.rollouts.values_list("pk", "outcome"))
    run.rollouts.update(outcome="")  # rows written without their outcome class (bulk, or by an older version)
    EvalRun.objects.filter(pk=run.pk).update(rollouts_finished=0, input_tokens=3, cost=9, outcome_counts={})
    EvalRunTask.objects.filter(run=run).update(finished=0, scores=[None, None], mean=None, outcome_counts={})
    run_progress.recompute_run(EvalRun.objects.get(pk=run.pk))

    assert figures(run) == kept
    assert dict(run.rollouts.values_list("pk", "outcome")) == outcomes
