"""Evaluation runs end to end through the real OpenClaw CLI (unmodified, in the bubblewrap sandbox, behind the recording
proxy): the scripted strong and weak models of evaluation.testing over two tasks, one in a category and one
uncategorized, one repeat each (~15 s a rollout). The per-task, per-category and overall figures are the
hand-computed ones, every rollout falls in the `scored` class, and the comparison names exactly the flipped task.
(The figures over more tasks, categories and repeats are test_eval_runs' with the builtin harness: the same code.)

What OpenClaw sends the model (see test_rollout_openclaw): streamed chat completions whose user message holds the
instruction (so the "(task ID)" mark evaluation.testing's responder reads), and the write tool's result as a `tool`
message.
"""

import pytest

from evaluation.models import EvalRun, Outcome
from evaluation.reports import compare_runs, run_json
from evaluation.services.runs import create_eval_run, run_here
from evaluation.testing import RIGHT, TASK_MARK, WRONG, endpoints, expected_scores, make_tasks, needs_bwrap, respond

pytestmark = [needs_bwrap, pytest.mark.harness, pytest.mark.django_db(transaction=True)]

# Only the strong model solves eval-c, neither eval-d (uncategorized): each model's right and wrong answer once.
TASKS = ["eval-c", "eval-d"]


def test_strong_and_weak_models_through_openclaw_give_the_hand_computed_figures_and_comparison(
    harness_installed, live_server_asgi, scripted_upstream, settings
):
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    seen = []  # (model, task named in the conversation, whether a tool result was in it) per request

    def recording(body):
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        mark = TASK_MARK.search(" ".join(str(m.get("content")) for m in messages))
        seen.append(
            (body.get("model"), mark.group(1) if mark else None, any(m.get("role") == "tool" for m in messages))
        )
        return respond(body)

    scripted_upstream.responder = recording
    revisions = make_tasks()
    strong, weak = endpoints(scripted_upstream)
    chosen = [revisions[task] for task in TASKS]

    reports = {}
    for endpoint in (strong, weak):
        run, _ = create_eval_run(
            endpoint=endpoint, revisions=chosen, harness="openclaw", limits={"timeout": 120}, inline=True, user=None
        )
        run = run_here(run)
        rollouts = list(run.rollouts.all())
        assert run.status == EvalRun.Status.COMPLETE, [(r.status, r.exit_reason, r.error[:300]) for r in rollouts]
        assert [r.outcome for r in rollouts] == [Outcome.SCORED] * 2, [(r.exit_reason, r.error) for r in rollouts]
        assert all(r.harness == "openclaw" and r.model_calls == 2 for r in rollouts), [r.model_calls for r in rollouts]
        reports[endpoint.model] = (run, run_json(run))

    # Every request named its task and came from the endpoint's model: the responder could tell them apart.
    assert len(seen) == 8 and {task for _, task, _ in seen} == set(TASKS), seen
    assert sorted((model, task, acted) for model, task, acted in seen) == sorted(
        (model, task, acted) for model in ("strong-model", "weak-model") for task in TASKS for acted in (False, True)
    )

    strong_run, strong_report = reports["strong-model"]
    weak_run, weak_report = reports["weak-model"]
    for model, report in (("strong-model", strong_report), ("weak-model", weak_report)):
        expected = {task: score for task, score in expected_scores(model).items() if task in TASKS}
        assert report["tasks"] == {
            task: {"mean": score, "std": 0.0, "min": score, "max": score, "n": 1} for task, score in expected.items()
        }
        assert report["overall"]["mean"] == pytest.approx(sum(expected.values()) / 2)
        assert report["outcomes"] == {
            "scored": 2,
            "agent_limit": 0,
            "agent_error": 0,
            "judge_incomplete": 0,
            "infra": 0,
        }
        assert report["pass_at_k"] == {"1": pytest.approx(sum(s == RIGHT for s in expected.values()) / 2)}
        assert report["tokens"] > 0
    assert {name: c["mean"] for name, c in strong_report["categories"].items()} == {
        "systems-automation": RIGHT,
        "uncategorized": WRONG,
    }
    assert {name: c["mean"] for name, c in weak_report["categories"].items()} == {
        "systems-automation": WRONG,
        "uncategorized": WRONG,
    }

    comparison = compare_runs(strong_run, weak_run)
    assert comparison["flipped"] == {"a_only": ["eval-c"], "b_only": []}
    assert comparison["mean_difference"] == pytest.approx((RIGHT - WRONG) / 2)
    assert comparison["categories"] == {
        "systems-automation": RIGHT - WRONG,
        "uncategorized": 0.0,
    }
    # Two paired differences (0.25, 0): every sign pattern has the same |mean|, so the exact p-value is 1.
    assert comparison["p_value"] == 1.0 and comparison["tasks_compared"] == 2
    lo, hi = comparison["ci"]
    assert 0.0 <= lo <= comparison["mean_difference"] <= hi <= RIGHT - WRONG
