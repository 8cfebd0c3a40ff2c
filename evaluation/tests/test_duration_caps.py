"""A rollout's durations are capped (CLAWGYM_MAX_ROLLOUT_TIMEOUT): `timeout` and the builtin harness's `tool_timeout`
and `request_timeout` over the cap are refused on every way in (service, run form, API, commands), and the refusal
names the cap and its setting. A rollout holds a sandbox slot and a worker until its deadline, so without the cap a
reviewer could hold the workers for years with one run."""

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import EvalRun, Rollout
from evaluation.services import runs
from evaluation.services.rollouts import RolloutError, create_rollouts, rollout_timeout
from evaluation.testing import endpoint, make_tasks, text, url

pytestmark = pytest.mark.django_db

HUGE = 1_000_000_000
REFUSED = f"timeout must be at most 3600 s (CLAWGYM_MAX_ROLLOUT_TIMEOUT), got {HUGE}"


@pytest.fixture
def world(db):
    return make_tasks(), endpoint("weak")


def test_the_services_refuse_each_duration_over_the_cap_and_take_the_cap_itself(world):
    revisions, weak = world
    revision = revisions["eval-a"]
    for name in ("timeout", "tool_timeout", "request_timeout"):
        with pytest.raises(RolloutError) as refused:
            create_rollouts(revision, weak, harness="builtin", options={name: HUGE}, user=None)
        assert str(refused.value) == f"{name} must be at most 3600 s (CLAWGYM_MAX_ROLLOUT_TIMEOUT), got {HUGE}"
    with pytest.raises(RolloutError, match=r"the request_timeout option must be a whole number of seconds, got '9'"):
        create_rollouts(revision, weak, harness="builtin", options={"request_timeout": "9"}, user=None)
    assert not Rollout.objects.exists()

    at_cap = {"timeout": 3600, "tool_timeout": 3600, "request_timeout": 3600}
    (rollout,) = create_rollouts(revision, weak, harness="builtin", options=at_cap, user=None)
    assert rollout.harness_options == at_cap and rollout_timeout(rollout) == 3600

    with pytest.raises(runs.EvalRunError, match=rf"^{re.escape(REFUSED)}$"):
        runs.create_eval_run(
            endpoint=weak, revisions=[revision], harness="builtin", limits={"timeout": HUGE}, user=None
        )
    with pytest.raises(runs.EvalRunError, match=r"^tool_timeout must be at most 3600 s"):
        runs.create_eval_run(
            endpoint=weak, revisions=[revision], harness="builtin", options={"tool_timeout": HUGE}, user=None
        )
    assert not EvalRun.objects.exists()


def test_the_cap_is_the_setting_and_a_rollout_stored_over_it_runs_within_it(world, settings):
    revisions, weak = world
    (stored,) = create_rollouts(revisions["eval-a"], weak, harness="builtin", options={"timeout": 1800}, user=None)
    settings.CLAWGYM_MAX_ROLLOUT_TIMEOUT = 600
    with pytest.raises(RolloutError, match=r"^timeout must be at most 600 s \(CLAWGYM_MAX_ROLLOUT_TIMEOUT\), got 601$"):
        create_rollouts(revisions["eval-a"], weak, harness="builtin", options={"timeout": 601}, user=None)
    # Stored under a larger cap (a retry, a resumed run): its deadline is today's cap, not what it asked.
    assert rollout_timeout(stored) == 600


def test_the_run_form_refuses_a_time_limit_over_the_cap(world, admin_client):
    base = {"endpoint": "weak", "harness": "builtin", "repeats": 1, "pass_threshold": 1.0, "tasks": "eval-a"}
    response = admin_client.post(url("start"), {**base, "options": "", "timeout": HUGE})
    assert response.status_code == 400 and REFUSED in text(response)
    options = admin_client.post(url("start"), {**base, "options": json.dumps({"request_timeout": HUGE})})
    assert options.status_code == 400 and "request_timeout must be at most 3600 s" in text(options)
    assert not EvalRun.objects.exists()


def test_the_api_refuses_a_duration_over_the_cap(world, admin_client):
    run = {"endpoint": "weak", "harness": "builtin", "tasks": ["eval-a"], "limits": {"timeout": HUGE}}
    response = admin_client.post("/api/eval-runs/", run, content_type="application/json")
    assert response.status_code == 400 and REFUSED in json.dumps(response.json())
    rollouts = {"task": "eval-a", "endpoint": "weak", "harness": "builtin", "options": {"tool_timeout": HUGE}}
    response = admin_client.post("/api/rollouts/", rollouts, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"tool_timeout must be at most 3600 s (CLAWGYM_MAX_ROLLOUT_TIMEOUT), got {HUGE}"
    }
    assert not EvalRun.objects.exists() and not Rollout.objects.exists()


def test_the_commands_refuse_a_duration_over_the_cap(world):
    task = ["--task", "eval-a", "--endpoint", "weak", "--harness", "builtin", "--here"]
    for command, flags in (("evaluate", ["--time-limit", str(HUGE)]), ("rollout", ["--option", f"timeout={HUGE}"])):
        with pytest.raises(CommandError) as refused:
            call_command(command, *task, *flags, stdout=StringIO(), stderr=StringIO())
        assert str(refused.value) == REFUSED and refused.value.returncode == 2
    assert not EvalRun.objects.exists() and not Rollout.objects.exists()
