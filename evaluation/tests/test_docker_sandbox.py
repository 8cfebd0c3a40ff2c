"""CLAWGYM_SANDBOX_BACKEND=docker, end to end on a real engine: checkers (the protocol's hostile battery and the
example tasks' sanity checks) and rollouts with both harnesses, the model reached only through the recording proxy.

The route out is the one bubblewrap has: the rollout's run dir, holding the relay's Unix socket, is bound into a
container with network "none", and the driver inside forwards 127.0.0.1:BRIDGE_PORT to it. OpenClaw and node come
from the sandbox image, not from this host's .harness (the image's clawgym.provides label).
"""

import pytest

from evaluation.harnesses import get_harness
from evaluation.harnesses.sandboxed import _binds_not_in_image, sandbox_backend
from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, network_probe, probe_result
from llm.models import ModelCall
from llm.testing import Reply
from sandbox import Limits, runtime_version
from tasks.importing import import_path
from tasks.models import Task
from tasks.sanity import check_revision
from tasks.testing import EXAMPLES, HOSTILE, run, shell

pytestmark = [pytest.mark.docker, pytest.mark.once]


@pytest.fixture
def docker_backend_setting(settings, docker_sandbox):
    settings.CLAWGYM_SANDBOX_BACKEND = "docker"
    return docker_sandbox


# --- checkers ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_checkers_score_zero_with_a_reason_in_docker(docker_backend_setting, name):
    script, status, reason = HOSTILE[name]
    files = {"data.csv": b"a,b\n1,2\n", "notes.md": b"# notes\n"}
    checker = shell(script, check_py="import sys\nsys.exit('SystemExit: check.py cannot parse out.json')\n")
    limits = Limits(wall_seconds=2, cpu_seconds=2, max_output_bytes=64 * 1024)
    # backend=None: the checker's sandbox comes from the setting, as in production.
    result, _ = run(checker, files=files, backend=None, limits=limits)
    assert result.status is status, result
    assert result.score == 0.0 and result.subscores == {}
    assert reason in result.reason and result.backend == "docker"


@pytest.mark.django_db
def test_the_example_tasks_pass_their_sanity_checks_in_docker(docker_backend_setting):
    import_path(EXAMPLES)
    tasks = list(Task.objects.select_related("current_revision"))
    assert tasks
    for task in tasks:
        report = check_revision(task.current_revision)
        assert report.backend == "docker" and report.isolated, task.external_id
        assert report.runtime == runtime_version(), report.runtime
        assert not report.crashed and report.solvable is True, (task.external_id, report.problems)
        assert not report.over_lenient, (task.external_id, report.problems)


# --- rollouts ----------------------------------------------------------------------------------------------------


def run_one(revision, endpoint, harness, **options) -> Rollout:
    [rollout] = create_rollouts(revision, endpoint, harness=harness, options=options, user=None)
    return execute_rollout(rollout.pk)


@pytest.mark.django_db(transaction=True)
def test_builtin_rollout_in_docker_scores_one_through_the_proxy_only(
    docker_backend_setting, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    assert sandbox_backend().name == "docker"
    scripted_upstream.push(
        Reply.tool_call("exec", {"command": network_probe(live_server_asgi.port)}),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    rollout = run_one(fruit_task, agent_endpoint, "builtin")

    assert rollout.status == Rollout.Status.SCORED, (rollout.error, rollout.log_tail)
    assert rollout.exit_reason == "completed" and rollout.score == 1.0, rollout.sub_scores
    assert rollout.runtime == runtime_version()
    probe = probe_result(rollout.transcript[3]["content"])
    for name in ("web_app", "postgres", "redis", "host_web_app", "outside"):
        assert probe[name].startswith("refused"), (name, probe)
    assert probe["dns"].startswith("failed")
    assert probe["bridge_site_page"] == "HTTP 404" and probe["bridge_api"] == "HTTP 404"
    calls = ModelCall.objects.filter(session=rollout.proxy_session)
    assert rollout.model_calls == calls.count() == len(scripted_upstream.requests) == 3


@pytest.mark.harness
@pytest.mark.django_db(transaction=True)
def test_openclaw_rollout_in_docker_scores_one_with_the_images_harness(
    docker_backend_setting, harness_installed, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint
):
    probe = {"command": "ls /opt; readlink -f /opt/node/bin/node; " + network_probe(live_server_asgi.port)}
    scripted_upstream.push(
        Reply.tool_call("exec", probe),
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="openclaw", options={"timeout": 120}, user=None)
    rollout = execute_rollout(rollout.pk)

    assert rollout.status == Rollout.Status.SCORED, (rollout.error, rollout.log_tail)
    assert rollout.exit_reason == "completed" and rollout.score == 1.0, (rollout.sub_scores, rollout.log_tail)
    assert rollout.runtime == runtime_version()
    assert rollout.workspace_changes() == [{"path": "summary.txt", "change": "added", "size": 18, "kind": "file"}]
    output = next(m["content"] for m in rollout.transcript if m["role"] == "tool")
    probe = probe_result(output)
    for name in ("web_app", "postgres", "redis", "host_web_app", "outside"):
        assert probe[name].startswith("refused"), (name, probe)
    # The harness is the image's own: nothing of this host's .harness was bound in.
    assert "node\nopenclaw" in output and "/opt/node/bin/node" in output
    calls = list(ModelCall.objects.filter(session=rollout.proxy_session))
    assert len(calls) == rollout.model_calls == len(scripted_upstream.requests) == 3
    assert all(call.stream and call.status_code == 200 for call in calls)


def test_the_images_harness_is_not_bound_from_the_host(docker_sandbox):
    harness = get_harness("openclaw")
    assert {target for _, target in harness.ro_binds()} == {"/opt/node", "/opt/openclaw"}
    assert _binds_not_in_image(docker_sandbox, harness.ro_binds()) == []
