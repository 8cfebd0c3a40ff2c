"""The demo agents evaluated on the example tasks, end to end: the builtin harness in the sandbox, the recording proxy
(uvicorn), the demo server on loopback, the tasks' real checkers (and the demo judge for rubric rules). The good
agent scores, the weak one less, and the paired comparison says so."""

from pathlib import Path

import pytest

from evaluation.models import EvalRun
from evaluation.reports import compare_runs, run_json
from evaluation.services.runs import create_eval_run, run_here
from llm.models import ModelEndpoint
from tasks.importing import import_path
from tasks.models import Task

pytestmark = [pytest.mark.once, pytest.mark.usefixtures("bwrap")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def evaluate(name: str, revisions) -> EvalRun:
    run, _ = create_eval_run(
        endpoint=ModelEndpoint.objects.get(name=name), revisions=revisions, harness="builtin", inline=True, user=None
    )
    return run_here(run)


def test_the_good_demo_agent_scores_on_the_example_tasks_and_the_weak_one_less(live_server_asgi, demo_server):
    import_path(EXAMPLES)
    revisions = [task.current_revision for task in Task.objects.order_by("external_id")]
    assert len(revisions) == 6

    good, weak = evaluate("demo-agent-good", revisions), evaluate("demo-agent-weak", revisions)
    for run in (good, weak):
        assert run.status == EvalRun.Status.COMPLETE, run.summary
        assert run_json(run)["outcomes"]["scored"] == 6
    good_report, weak_report = run_json(good), run_json(weak)
    assert good_report["overall"]["mean"] > 0.9
    assert 0 < weak_report["overall"]["mean"] < good_report["overall"]["mean"]
    # One-file solutions: the weak agent writes nothing of them.
    assert good_report["tasks"]["expense-reconciliation-q1"]["mean"] == 1.0
    assert weak_report["tasks"]["expense-reconciliation-q1"]["mean"] < 1.0

    compared = compare_runs(good, weak)
    assert compared["mean_difference"] > 0


@pytest.mark.harness
@pytest.mark.usefixtures("harness_installed")
def test_the_good_demo_agent_works_a_task_through_openclaw_too(live_server_asgi, demo_server):
    import_path(EXAMPLES / "lease-terms-extraction")
    run, _ = create_eval_run(
        endpoint=ModelEndpoint.objects.get(name="demo-agent-good"),
        harness="openclaw",
        revisions=[Task.objects.get().current_revision],
        limits={"timeout": 300},
        inline=True,
        user=None,
    )
    run = run_here(run)
    [rollout] = run.rollouts.all()
    assert (rollout.status, rollout.score) == ("scored", 1.0), (rollout.exit_reason, rollout.error, rollout.log_tail)
    assert rollout.tools_used.get("write") == 2
