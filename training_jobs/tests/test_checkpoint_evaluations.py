"""A checkpoint's evaluations on the run page and the runs list, however they were started (here: the checkpoint
row's "Start an evaluation", the evaluation start form with the checkpoint's endpoint), and what the "Evaluate
every checkpoint" form says to expect of each harness against the run's servers (their measured speed, or the
documented estimate) before anything is queued. No worker: the jobs are only recorded, their ends written by hand."""

import pytest

from evaluation.models import EvalRun
from evaluation.testing import freeze
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint
from training_jobs.models import ModelServer
from training_jobs.testing.runs import served_run

pytestmark = pytest.mark.django_db


def ready_server(checkpoint, backend: str = "transformers") -> ModelServer:
    """The checkpoint served (as serving.register_endpoint leaves it): an agent endpoint ckpt-RUN-STEP."""
    name = f"ckpt-{checkpoint.run_id}-{checkpoint.step}"
    endpoint = ModelEndpoint.objects.create(
        name=name, base_url="http://127.0.0.1:9/v1", model=name, roles=["agent"], max_concurrent=1
    )
    return ModelServer.objects.create(
        checkpoint=checkpoint, backend=backend, endpoint=endpoint, status="ready", host="127.0.0.1", port=9
    )


def test_an_evaluation_started_from_a_checkpoint_is_shown_on_the_run_page_and_the_list(
    admin_client, fruit_task, tmp_path
):
    checkpoint = served_run(str(tmp_path), tmp_path)
    run, version, server = checkpoint.run, freeze([fruit_task]), ready_server(checkpoint)
    page = admin_client.get(f"/training/runs/{run.pk}/").content.decode()
    assert f'href="/evaluations/start/?endpoint={server.endpoint.name}">Start an evaluation</a>' in page

    answer = admin_client.post(
        "/evaluations/start/",
        {
            "benchmark_version": version.pk,
            "endpoint": server.endpoint.name,
            "harness": "builtin",
            "repeats": 1,
            "pass_threshold": 1.0,
            "options": "{}",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    eval_run = EvalRun.objects.get(endpoint=server.endpoint)
    EvalRun.objects.filter(pk=eval_run.pk).update(status="complete", overall_mean=0.625)  # its rollouts finished

    page = admin_client.get(f"/training/runs/{run.pk}/").content.decode()
    row = page[page.index(f'<tr id="checkpoint-{checkpoint.pk}"') :]
    row = row[: row.index("</tr>")]
    assert f'<a href="/evaluations/{eval_run.pk}/">#{eval_run.pk}</a> 0.625' in row
    listing = admin_client.get("/training/runs/").content.decode()
    assert "0.625" in listing

    # A cancelled evaluation has no score in the list; the checkpoint row says it was cancelled.
    EvalRun.objects.filter(pk=eval_run.pk).update(status="cancelled")
    assert "0.625" not in admin_client.get("/training/runs/").content.decode()
    page = admin_client.get(f"/training/runs/{run.pk}/").content.decode()
    assert f'<a href="/evaluations/{eval_run.pk}/">#{eval_run.pk}</a> Cancelled' in page


def expected(page: str, harness: str) -> str:
    row = page[page.index(f'<tr data-harness="{harness}">') :]
    return row[row.index('data-verdict="') + len('data-verdict="') :].split('"')[0]


def test_the_evaluate_form_says_what_to_expect_and_offers_the_builtin_harness(
    admin_client, viewer_client, fruit_task, tmp_path
):
    checkpoint = served_run(str(tmp_path), tmp_path)
    run, version, server = checkpoint.run, freeze([fruit_task]), ready_server(checkpoint)
    url = f"/training/runs/{run.pk}/"

    # Served on CPU, nothing measured yet: the documented estimates (20,000 prompt tokens at 100 tokens/s).
    page = admin_client.get(url).content.decode()
    assert "transformers servers at about 100 prompt tokens/s" in page and "a documented estimate" in page
    assert expected(page, "openclaw") == "times out" and expected(page, "builtin") == "fits"
    assert "each model call takes about 200 s, over the endpoint&#x27;s 120 s timeout" in page
    assert '<option value="builtin" selected>' in page
    assert '<details class="evaluate-expect" id="evaluate-expect" open>' in page
    assert 'id="evaluate-form"' not in viewer_client.get(url).content.decode()  # admins only

    admin_client.post(f"/training/runs/{run.pk}/evaluate/", {"version": version.pk, "harness": "builtin"})
    job_run = JobRun.objects.get(kind="training.evaluate_checkpoints")
    assert job_run.params["harness"] == "builtin"
    JobRun.objects.filter(pk=job_run.pk).update(status="succeeded")
    page = admin_client.post(
        f"/training/runs/{run.pk}/evaluate/", {"version": version.pk, "harness": "nope"}, follow=True
    ).content.decode()
    assert "unknown harness &#x27;nope&#x27;" in page
    assert JobRun.objects.filter(kind="training.evaluate_checkpoints").count() == 1

    # The server's own calls measured: 40,000 characters (10,000 tokens) answered in 2 s, 5,000 tokens/s.
    ModelCall.objects.create(
        endpoint=server.endpoint,
        endpoint_name=server.endpoint.name,
        purpose="proxy",
        request={"messages": [{"role": "user", "content": "x" * 39_970}]},
        latency_ms=2000,
    )
    page = admin_client.get(url).content.decode()
    assert "measured over the last 1 calls of this run&#x27;s servers" in page
    assert expected(page, "openclaw") == "fits" and '<option value="openclaw" selected>' in page
