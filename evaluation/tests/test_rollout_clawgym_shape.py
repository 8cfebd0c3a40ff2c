"""A rollout of a task in the published ClawGym shape, end to end with the builtin harness: the shared reward.sh that
prints only the mean of check.py's checks, and a check.py that runs the agent's own script (which rewrites its output).

The checks check.py printed reach the rollout, its page and the API; the checker's write into the workspace is a
warning beside a score that stands; the workspace stored as the agent left it is the one before the checker ran.
"""

import pytest
from django.urls import reverse

from evaluation.models import Rollout, RolloutFile
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import needs_bwrap
from llm.testing import Reply
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package
from tasks.testing import (
    AVERAGING_REWARD_SH,
    PLANIFY_CHECK_PY,
    PLANIFY_FIXED,
    PLANIFY_INPUTS,
    PLANIFY_INSTRUCTION,
)

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def planify_task(db):
    files = [PackageFile(path, data, "input") for path, data in PLANIFY_INPUTS.items()]
    files += [
        PackageFile("reward.sh", AVERAGING_REWARD_SH.encode(), "reward"),
        PackageFile("check.py", PLANIFY_CHECK_PY.encode(), "reward"),
    ]
    package = TaskPackage(external_id="planify", instruction=PLANIFY_INSTRUCTION, files=files)
    return save_package(package).revision


def test_a_rollout_keeps_check_py_subscores_and_the_checkers_writes_are_a_warning(
    live_server_asgi, scripted_upstream, planify_task, agent_endpoint, viewer_client, api_as, viewer
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "scripts/planify.py", "content": PLANIFY_FIXED}),
        Reply.text("Fixed scripts/planify.py."),
    )
    [rollout] = create_rollouts(planify_task, agent_endpoint, harness="builtin", user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED, rollout.error
    assert rollout.score == 1.0 and rollout.check_status == "ok"
    assert rollout.sub_scores == {"script_runs": 1.0, "plan_written": 1.0, "plan_in_priority_order": 1.0}
    assert "the checker wrote to the workspace while judging (modified plan/plan.csv)" in rollout.check_reason
    # The final workspace is the agent's: its fixed script, and the stale plan it never touched.
    assert list(RolloutFile.objects.filter(rollout=rollout).values_list("path", "change")) == [
        ("scripts/planify.py", "modified")
    ]

    page = viewer_client.get(reverse("evaluation:detail", args=[rollout.pk])).content.decode()
    assert "plan_in_priority_order" in page and "modified plan/plan.csv" in page
    body = api_as(viewer).get(f"/api/rollouts/{rollout.pk}/").json()
    assert body["sub_scores"]["script_runs"] == 1.0 and "modified plan/plan.csv" in body["check_reason"]
