"""A trained checkpoint served (our transformers server on CPU), registered as an agent endpoint, and a builtin-harness
rollout run against it through the recording proxy; stopped by the command and when idle. The score is whatever the
tiny model earns: the test proves the path."""

import json
import os
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.models import Rollout
from evaluation.services import create_rollouts, execute_rollout
from evaluation.tests.conftest import fruit_task, needs_bwrap  # noqa: F401  (fixture)
from llm.models import ModelCall, ModelEndpoint
from training_jobs.models import Checkpoint, ModelServer
from training_jobs.run_jobs import execute_training
from training_jobs.runs import start_training_run
from training_jobs.serving import stop_idle_servers
from training_jobs.tests.test_sft_runs import dataset, tiny_model_path, training_dir  # noqa: F401  (fixtures)

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_served_checkpoint_runs_a_rollout_through_the_proxy(live_server_asgi, fruit_task, dataset, tiny_model_path):  # noqa: F811
    run = start_training_run(dataset=dataset, base_model_path=tiny_model_path, preset="tiny-cpu", cpu=True,
                             overrides={"max_steps": 1}, enqueue=False)  # fmt: skip
    execute_training(run.pk)
    checkpoint = Checkpoint.objects.get(run=run)

    out = StringIO()
    call_command("serve_checkpoint", str(checkpoint.pk), "--backend", "transformers", "--json", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["endpoint"] == f"ckpt-{run.pk}-1" and report["base_url"].startswith("http://127.0.0.1:")
    server = ModelServer.objects.get(checkpoint=checkpoint)
    endpoint = ModelEndpoint.objects.get(name=report["endpoint"])
    assert server.status == "ready" and server.endpoint == endpoint and endpoint.roles == ["agent"]
    assert server.command[1:3] == ["-m", "training_jobs.serving_cpu"] and alive(server.pid)
    try:
        [rollout] = create_rollouts(fruit_task, endpoint, harness="builtin", options={"max_turns": 2})
        rollout = execute_rollout(rollout.pk)
        assert rollout.is_finished and (rollout.status == Rollout.Status.SCORED or rollout.exit_reason == "agent_error"), (
            rollout.status, rollout.exit_reason, rollout.error)  # fmt: skip
        calls = ModelCall.objects.filter(session=rollout.proxy_session, endpoint=endpoint)
        assert calls.exists() and all(call.status_code == 200 for call in calls)
        assert rollout.model_calls == calls.count()

        assert stop_idle_servers(idle_seconds=3600) == []  # just used: kept
    finally:
        call_command("serve_checkpoint", "--stop", endpoint.name, stdout=StringIO())
    server.refresh_from_db()
    endpoint.refresh_from_db()
    assert server.status == "stopped" and not endpoint.enabled and not alive(server.pid)


def test_idle_servers_are_stopped(dataset, tiny_model_path):  # noqa: F811
    run = start_training_run(dataset=dataset, base_model_path=tiny_model_path, preset="tiny-cpu", cpu=True,
                             overrides={"max_steps": 1}, enqueue=False)  # fmt: skip
    execute_training(run.pk)
    checkpoint = Checkpoint.objects.get(run=run)
    out = StringIO()
    call_command("serve_checkpoint", str(checkpoint.pk), "--backend", "transformers", "--json", stdout=out)
    server = ModelServer.objects.get(checkpoint=checkpoint)
    assert stop_idle_servers(idle_seconds=0) == [server.pk]
    server.refresh_from_db()
    assert server.status == "stopped" and not server.endpoint.enabled and not alive(server.pid)


def test_evaluate_checkpoints_serves_each_and_the_base_and_charts_them(admin_client, fruit_task, dataset,  # noqa: F811
                                                                       tiny_model_path):  # noqa: F811
    from django.urls import reverse

    from evaluation.models import EvalRun
    from review.models import Benchmark, BenchmarkVersion, PinnedRevision
    from training_jobs.models import CheckpointEvaluation, TrainingRun

    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="fruit-bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=fruit_task)
    run = start_training_run(dataset=dataset, base_model_path=tiny_model_path, preset="tiny-cpu", cpu=True,
                             enqueue=False)  # fmt: skip
    execute_training(run.pk)
    out = StringIO()
    try:
        call_command("evaluate_checkpoints", str(run.pk), "--benchmark", "fruit-bench", "--harness", "builtin",
                     "--json", stdout=out, stderr=StringIO())  # fmt: skip
        report = json.loads(out.getvalue().strip().splitlines()[-1])
        assert [row["endpoint"] for row in report["evaluations"]] == [f"base-{run.pk}", f"ckpt-{run.pk}-1",
                                                                      f"ckpt-{run.pk}-2"]  # fmt: skip
        run.refresh_from_db()
        assert run.base_eval_run_id == report["evaluations"][0]["eval_run"]
        evaluations = CheckpointEvaluation.objects.filter(checkpoint__run=run).order_by("checkpoint__step")
        assert [e.eval_run_id for e in evaluations] == [row["eval_run"] for row in report["evaluations"][1:]]
        assert all(e.eval_run.benchmark_version == version for e in evaluations)
        # As the finished evaluations would leave them: the run page charts score per checkpoint against the base.
        for eval_run, mean in zip(EvalRun.objects.filter(pk__in=[r["eval_run"] for r in report["evaluations"]])
                                  .order_by("pk"), [0.25, 0.5, 0.75]):  # fmt: skip
            EvalRun.objects.filter(pk=eval_run.pk).update(overall_mean=mean)
        html = admin_client.get(reverse("training:run", args=[run.pk])).content.decode()
        chart = json.loads(html.split('id="chart-scores" type="application/json">')[1].split("</script>")[0])
        assert chart["labels"] == ["step 1", "step 2"]
        assert chart["datasets"][0]["data"] == [0.5, 0.75] and chart["datasets"][1] == {"label": "base model",
                                                                                        "data": [0.25, 0.25]}
    finally:
        for name in [f"base-{run.pk}", f"ckpt-{run.pk}-1", f"ckpt-{run.pk}-2"]:
            if ModelEndpoint.objects.filter(name=name).exists():
                call_command("serve_checkpoint", "--stop", name, stdout=StringIO())
    assert not ModelServer.objects.filter(status="ready").exists()
    assert TrainingRun.objects.get(pk=run.pk).status == "succeeded"
