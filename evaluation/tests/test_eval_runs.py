"""Evaluation runs through their service layer, end to end with the builtin harness: a run's rollouts, their
outcome classes, the per-task / per-category / overall figures against hand-computed values, resume and reuse,
infra retries that never count as a 0, and regrade."""

import pytest

from evaluation.models import EvalRun, Outcome, Rollout, RolloutScore
from evaluation.reports import run_json
from evaluation.services.regrade import regrade_rollouts
from evaluation.services.runs import EvalRunError, create_eval_run, resume_eval_run, run_here
from evaluation.testing import RIGHT, WRONG, endpoints, expected_scores, make_tasks, needs_bwrap, respond
from llm.testing import Reply
from tasks.models import RevisionFile
from tasks.services import revise_task

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(live_server_asgi, scripted_upstream, settings):
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    scripted_upstream.responder = respond
    revisions = make_tasks()
    strong, weak = endpoints(scripted_upstream)
    return revisions, strong, weak, scripted_upstream


def test_a_run_scores_every_task_and_repeat_and_its_figures_are_the_hand_computed_ones(world):
    revisions, strong, _weak, _upstream = world
    run, reused = create_eval_run(
        endpoint=strong, revisions=list(revisions.values()), harness="builtin", repeats=2, inline=True, user=None
    )
    assert not reused and run.rollouts.count() == 8
    run = run_here(run)

    assert run.status == EvalRun.Status.COMPLETE, run.summary
    assert set(run.rollouts.values_list("outcome", flat=True)) == {Outcome.SCORED}
    report = run_json(run)
    expected = expected_scores("strong-model")
    assert {t: f["mean"] for t, f in report["tasks"].items()} == expected
    assert all(f["n"] == 2 and f["std"] == 0.0 for f in report["tasks"].values())
    assert report["overall"]["mean"] == pytest.approx((RIGHT * 3 + WRONG) / 4)
    assert report["categories"]["analysis-reasoning"]["mean"] == RIGHT
    assert report["categories"]["systems-automation"]["mean"] == RIGHT
    assert report["categories"]["uncategorized"] == {"mean": WRONG, "ci": [WRONG, WRONG], "tasks": 1}
    assert report["pass_at_k"] == {"1": 0.75, "2": 0.75}
    assert report["outcomes"] == {"scored": 8, "agent_limit": 0, "agent_error": 0, "judge_incomplete": 0, "infra": 0}
    lo, hi = report["overall"]["ci"]
    assert lo <= report["overall"]["mean"] <= hi and lo >= WRONG and hi <= RIGHT
    assert report["overall"]["std_across_repeats"] == 0.0
    assert report["tokens"] > 0 and report["tokens"] == run.input_tokens + run.output_tokens
    # Every rollout's first scoring is kept as a record.
    assert RolloutScore.objects.filter(rollout__eval_run=run, kind="run").count() == 8


def test_the_same_configuration_reuses_the_run_and_a_changed_one_is_refused_on_resume(world):
    revisions, strong, _weak, upstream = world
    run, _ = create_eval_run(
        endpoint=strong, revisions=[revisions["eval-a"]], harness="builtin", inline=True, user=None
    )
    run_here(run)
    calls = len(upstream.requests)
    again, reused = create_eval_run(
        endpoint=strong, revisions=[revisions["eval-a"]], harness="builtin", inline=True, user=None
    )
    assert reused and again.pk == run.pk
    resume_eval_run(again, user=None)
    assert len(upstream.requests) == calls  # nothing ran again
    other = dict(run.config, repeats=3)
    with pytest.raises(EvalRunError, match="repeats"):
        resume_eval_run(run, config=other, user=None)


def test_an_upstream_failure_is_retried_and_never_counted_as_a_zero(world, settings):
    revisions, strong, _weak, upstream = world
    # The builtin agent tries a failing call 3 times (2 s, then 4 s apart) before it gives up: the first attempt
    # fails for the infrastructure, the second finds the model back.
    failures = {"left": 3}

    def flaky(body):
        if failures["left"]:
            failures["left"] -= 1
            return Reply.error(503, "upstream down")
        return respond(body)

    upstream.responder = flaky
    run, _ = create_eval_run(
        endpoint=strong, revisions=[revisions["eval-a"]], harness="builtin", inline=True, user=None
    )
    run = run_here(run)
    [rollout] = run.rollouts.all()
    assert rollout.attempt == 2 and rollout.previous_attempts[0]["status"] == "failed"
    assert run.status == EvalRun.Status.COMPLETE and run_json(run)["tasks"]["eval-a"]["mean"] == RIGHT


def test_an_infra_failure_that_persists_leaves_the_run_incomplete_with_no_score(world, settings):
    revisions, strong, _weak, upstream = world
    settings.CLAWGYM_EVAL_MAX_ATTEMPTS = 2
    upstream.responder = lambda body: Reply.error(503, "down for good")
    run, _ = create_eval_run(
        endpoint=strong, revisions=[revisions["eval-a"], revisions["eval-b"]], harness="builtin", inline=True, user=None
    )
    run = run_here(run)
    report = run_json(run)
    assert run.status == EvalRun.Status.INCOMPLETE
    assert report["tasks"]["eval-a"] == {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    assert report["overall"]["mean"] is None
    assert report["outcomes"]["infra"] == 2 and report["missing"] == ["eval-a", "eval-b"]
    assert all(r.attempt == 2 for r in run.rollouts.all())
    assert set(run.rollouts.values_list("status", flat=True)) == {Rollout.Status.FAILED}


def test_regrade_rescores_stored_workspaces_with_the_current_checker(world):
    revisions, strong, _weak, _upstream = world
    run, _ = create_eval_run(
        endpoint=strong, revisions=[revisions["eval-d"]], harness="builtin", inline=True, user=None
    )
    run = run_here(run)
    assert run_json(run)["tasks"]["eval-d"]["mean"] == WRONG
    # A reviewer decides the order of the fruit does not matter: the fixed checker accepts both.
    task = revisions["eval-d"].task
    check = task.current_revision.files.get(role=RevisionFile.Role.REWARD, path="check.py").blob.content.decode()
    fixed = check.replace(
        'text.strip() == "3 apples, 2 pears"', 'sorted(text.strip().split(", ")) == sorted(["3 apples", "2 pears"])'
    )
    assert fixed != check
    revise_task(task, user=None, message="order does not matter", file_changes={("reward", "check.py"): fixed.encode()})
    result = regrade_rollouts(run.rollouts.all(), user=None)
    assert result["changed"] == 1 and result["tasks"]["eval-d"] == {
        "revision": 2,
        "before": WRONG,
        "after": RIGHT,
        "rollouts": 1,
    }
    run.refresh_from_db()
    assert run_json(run)["tasks"]["eval-d"]["mean"] == RIGHT and run.overall_mean == RIGHT
    assert list(RolloutScore.objects.filter(rollout__eval_run=run).values_list("kind", "score")) == [
        ("run", WRONG),
        ("regrade", RIGHT),
    ]
    assert str(result["runs"][str(run.pk)]) == str({"before": WRONG, "after": RIGHT})
