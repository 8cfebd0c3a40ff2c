"""Rollouts of a task with a rubric: the judge (a scripted model through llm.client) scores the rules after the
checker, the task score is λ·code + (1−λ)·rubric; without a judge the rollout is incomplete until judged again."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, fruit_package, needs_bwrap
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply, scripted_endpoint
from tasks.services import save_package

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]

RULE = {
    "name": "clear_summary",
    "target_file": "summary.txt",
    "weight": 1.0,
    "scores": {level: f"clear at {level}" for level in ("0", "0.25", "0.5", "0.75", "1")},
}


@pytest.fixture
def rubric_task(db):
    package = fruit_package("fruit-rubric")
    package.rubric, package.code_weight = [RULE], 0.7
    return save_package(package).revision


def judge_endpoint(upstream) -> ModelEndpoint:
    return scripted_endpoint(upstream, "judge", model="judge-model", roles=["judge"], max_retries=0)


def verdict(score: float) -> Reply:
    return Reply.text(json.dumps({"score": score, "reason": "says it, tersely"}))


def agent_script():
    return [Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}), Reply.text("Done.")]


def test_the_judge_scores_the_rubric_after_the_checker(
    live_server_asgi, scripted_upstream, rubric_task, agent_endpoint
):
    judge_endpoint(scripted_upstream)
    scripted_upstream.push(*agent_script(), verdict(0.5))
    [rollout] = create_rollouts(rubric_task, agent_endpoint, harness="builtin", user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED, rollout.score_reason
    assert (rollout.code_score, rollout.rubric_score) == (1.0, 0.5)
    assert rollout.score == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)
    [judgement] = rollout.rubric_judgements
    assert (judgement["rule"], judgement["score"], judgement["failed"]) == ("clear_summary", 0.5, False)
    # The judge saw the file as the agent left it, and its call is labelled with the rollout, outside its session.
    judge_call = ModelCall.objects.get(pk=judgement["model_calls"][0])
    assert judge_call.purpose == "judge" and judge_call.subject == rollout.subject and judge_call.session is None
    assert "3 apples, 2 pears" in json.dumps(judge_call.request)
    assert rollout.model_calls == 2  # the agent's calls only
    assert rollout.trajectories.get().reward == pytest.approx(0.85)


def test_without_a_judge_the_rollout_is_incomplete_until_judged_again(
    live_server_asgi, scripted_upstream, rubric_task, agent_endpoint
):
    scripted_upstream.push(*agent_script())
    [rollout] = create_rollouts(rubric_task, agent_endpoint, harness="builtin", user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.INCOMPLETE and rollout.score is None
    assert rollout.code_score == 1.0 and "judge" in rollout.score_reason
    assert not rollout.retryable and rollout.rejudgeable  # the agent's run stands; only judging is missing
    with pytest.raises(CommandError, match="no enabled model endpoint serves the role 'judge'"):
        call_command("rollout", "--rejudge", str(rollout.pk), stdout=StringIO(), stderr=StringIO())

    judge_endpoint(scripted_upstream)
    scripted_upstream.push(verdict(1))
    out = StringIO()
    call_command("rollout", "--rejudge", str(rollout.pk), "--json", stdout=out, stderr=StringIO())
    [row] = json.loads(out.getvalue().strip().splitlines()[-1])
    assert (row["status"], row["score"], row["rubric_score"]) == ("scored", 1.0, 1.0)
    assert Rollout.objects.get(pk=rollout.pk).trajectories.get().reward == 1.0


def test_a_rollout_checked_under_the_retired_tampered_status_is_not_recombined_from_a_zero(
    live_server_asgi, scripted_upstream, rubric_task, agent_endpoint
):
    """Before checkers could write to the workspace, such a run was 'tampered' and its score dropped to 0: judging
    its rubric again must not combine that 0 as if the checker had given it."""
    scripted_upstream.push(*agent_script())
    [rollout] = create_rollouts(rubric_task, agent_endpoint, harness="builtin", user=None)
    rollout = execute_rollout(rollout.pk)
    Rollout.objects.filter(pk=rollout.pk).update(check_status="tampered", code_score=0.0)
    judge_endpoint(scripted_upstream)
    with pytest.raises(CommandError, match="retired checker status .'tampered'. and its code score was not kept"):
        call_command("rollout", "--rejudge", str(rollout.pk), stdout=StringIO(), stderr=StringIO())
    assert Rollout.objects.get(pk=rollout.pk).status == Rollout.Status.INCOMPLETE


@pytest.mark.django_db
def test_judging_a_rollout_of_a_task_without_a_rubric_says_that_is_why():
    from evaluation.testing import STRONG, endpoint, finished_run, freeze, make_tasks

    version = freeze(make_tasks().values())
    rollout = finished_run(endpoint("plain"), version, STRONG).rollouts.filter(status="scored").first()
    assert not rollout.revision.has_rubric
    with pytest.raises(CommandError, match=rf"rollout #{rollout.pk} cannot be judged: its task's revision r1 has no"):
        call_command("rollout", "--rejudge", str(rollout.pk), stdout=StringIO(), stderr=StringIO())
