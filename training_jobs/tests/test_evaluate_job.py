"""Evaluating every checkpoint from the API or the run page: the request queues the `training.evaluate_checkpoints`
job (gpu queue) and answers at once; a real django-q worker (listening on CLAWGYM_SERVE_HOST=0.0.0.0, see
test_serving_job) serves the base model and the checkpoint detached, its endpoints naming the machine, and starts an
evaluation run for each. Run again, nothing already evaluated on the version is served or started twice. The run
page polls while the job is queued or running, a finished run's page included."""

import socket
import time
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation.testing import freeze
from jobs.models import JobRun
from jobs.testing import use_engine
from llm.models import ModelEndpoint
from training_jobs.evaluations import evaluate_checkpoints
from training_jobs.models import CheckpointEvaluation, ModelServer, TrainingRun
from training_jobs.testing.runs import served_run

JOB_TIMEOUT = 300.0  # s: two `transformers serve` start-ups, each importing torch and loading the model on a busy CPU


def wait_finished(job_run: JobRun, timeout: float = JOB_TIMEOUT) -> JobRun:
    deadline = time.monotonic() + timeout
    while not job_run.is_finished:
        assert time.monotonic() < deadline, f"job #{job_run.pk} still {job_run.status} after {timeout} s"
        time.sleep(0.5)
        job_run.refresh_from_db()
    return job_run


@pytest.mark.workers
@pytest.mark.once
@pytest.mark.django_db(transaction=True)
def test_the_api_queues_the_evaluate_job_and_the_worker_serves_and_starts_each(
    gpu_worker, admin_user, viewer, api_as, tiny_model_path, tmp_path, fruit_task
):
    checkpoint = served_run(tiny_model_path, tmp_path)
    run, version = checkpoint.run, freeze([fruit_task])
    url = f"/api/training/runs/{run.pk}/evaluate/"
    body = {"benchmark_version": version.pk, "harness": "builtin"}
    assert api_as(viewer).post(url, body).status_code == 403
    names = [f"base-{run.pk}", f"ckpt-{run.pk}-2"]
    try:
        with use_engine("django_q"):
            answer = api_as(admin_user).post(url, body)
            assert answer.status_code == 202, answer.content
            job_run = JobRun.objects.get(pk=answer.json()["job_run"])
            assert answer["Location"] == answer.json()["url"] and answer.json()["url"].endswith(
                f"/api/jobs/{job_run.pk}/"
            )
            assert (job_run.kind, job_run.queue, job_run.params["run_id"]) == (
                "training.evaluate_checkpoints",
                "gpu",
                run.pk,
            )
            wait_finished(job_run)
        assert job_run.status == "succeeded", (job_run.error, job_run.log_tail, gpu_worker.log_tail())
        assert [row["endpoint"] for row in job_run.result["evaluations"]] == names
        # Served by the worker on every interface, the endpoints naming the machine.
        for server in ModelServer.objects.filter(status="ready"):
            assert server.command[server.command.index("--host") + 1] == "0.0.0.0"
            assert server.endpoint.base_url == f"http://{socket.getfqdn()}:{server.port}/v1"
        assert sorted(ModelServer.objects.filter(status="ready").values_list("endpoint__name", flat=True)) == names
        run.refresh_from_db()
        evaluation = CheckpointEvaluation.objects.get(checkpoint=checkpoint)
        ids = [row["eval_run"] for row in job_run.result["evaluations"]]
        assert [run.base_eval_run_id, evaluation.eval_run_id] == ids
        assert evaluation.eval_run.benchmark_version == version and evaluation.eval_run.harness == "builtin"

        # Again: everything is evaluated on the version already, so nothing is served or started.
        again = evaluate_checkpoints(run, version, harness="builtin", user=None)
        assert [e.pk for e in again] == ids and ModelServer.objects.count() == 2
        assert CheckpointEvaluation.objects.count() == 1
    finally:
        for name in names:
            if ModelEndpoint.objects.filter(name=name).exists():
                call_command("serve_checkpoint", "--stop", name, stdout=StringIO())


@pytest.mark.django_db
def test_the_page_queues_the_job_links_it_and_polls_while_it_runs(
    admin_client, viewer_client, api_as, admin_user, fruit_task, tmp_path
):
    # No worker: the job is only recorded (this test's transaction never commits); its end is written by hand.
    checkpoint = served_run(str(tmp_path), tmp_path)
    run, version = checkpoint.run, freeze([fruit_task])
    evaluate_url, page_url = f"/training/runs/{run.pk}/evaluate/", f"/training/runs/{run.pk}/"
    assert viewer_client.post(evaluate_url, {"version": version.pk}).status_code == 403
    assert admin_client.post(evaluate_url, {"version": "x"}).status_code == 404
    assert 'hx-trigger="every 2s"' not in viewer_client.get(page_url).content.decode()  # finished, nothing running

    page = admin_client.post(evaluate_url, {"version": version.pk}, follow=True).content.decode()
    job_run = JobRun.objects.get(kind="training.evaluate_checkpoints")
    assert job_run.queue == "gpu" and job_run.params["version_id"] == version.pk and job_run.status == "queued"
    assert f'<a href="/jobs/{job_run.pk}/">job #{job_run.pk}</a>' in page and "on a gpu worker" in page
    assert 'hx-trigger="every 2s"' in page  # the finished run's page polls while its evaluation job is queued
    admin_client.post(evaluate_url, {"version": version.pk})  # a second click while it is queued: the same job
    assert JobRun.objects.filter(kind="training.evaluate_checkpoints").count() == 1
    assert not ModelServer.objects.exists()  # nothing served by the web process

    JobRun.objects.filter(pk=job_run.pk).update(status="succeeded")
    assert 'hx-trigger="every 2s"' not in viewer_client.get(page_url).content.decode()

    empty = TrainingRun.objects.create(
        name="empty", base_model_path=str(tmp_path), config=run.config, preset="tiny-cpu", cpu=True, status="succeeded"
    )
    page = admin_client.post(f"/training/runs/{empty.pk}/evaluate/", {"version": version.pk}, follow=True)
    assert f"run #{empty.pk} has no checkpoint yet" in page.content.decode()
    refused = api_as(admin_user).post(f"/api/training/runs/{empty.pk}/evaluate/", {"benchmark_version": version.pk})
    assert refused.status_code == 400 and "has no checkpoint yet" in refused.json()["detail"]
    assert JobRun.objects.filter(kind="training.evaluate_checkpoints").count() == 1
