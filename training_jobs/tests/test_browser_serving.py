"""In a real browser: an admin opens a finished run's page, clicks Serve on a checkpoint, and the row shows its server
starting, then ready with the endpoint's name and a link to start an evaluation, without a reload. The click
answers at once; a real django-q worker starts `transformers serve` on the tiny model."""

import pytest

from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, watch
from training_jobs.models import ModelServer
from training_jobs.serving import stop_server
from training_jobs.testing.runs import served_run

# once: a model server's start, nothing about the database engine (CI runs it in the PostgreSQL pass).
pytestmark = [pytest.mark.browser, pytest.mark.workers, pytest.mark.once, pytest.mark.django_db(transaction=True)]

READY_TIMEOUT = 180_000  # ms: transformers serve imports torch and loads the model on a busy CPU


@pytest.fixture(scope="module")
def gpu_worker(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=1)
    yield worker
    worker.stop()
    worker.cleanup()


def test_an_admin_serves_a_checkpoint_and_the_row_turns_ready(
    page, live_server, admin_user, gpu_worker, tiny_model_path, tmp_path
):
    checkpoint = served_run(tiny_model_path, tmp_path)
    problems = watch(page)
    name = f"ckpt-{checkpoint.run_id}-2"
    try:
        with use_engine("django_q"):
            log_in(page, live_server, admin_user)
            page.goto(f"{live_server.url}/training/runs/{checkpoint.run_id}/")
            row = page.locator(f"#checkpoint-{checkpoint.pk}")
            mark_document(page)
            row.get_by_role("button", name="Serve").click()
            row.locator("[data-server-status=starting]").wait_for()  # the click answered before the server is up
            row.locator("[data-server-status=ready]").wait_for(timeout=READY_TIMEOUT)
            assert_no_reload(page)
            assert row.locator(".endpoint-name").inner_text() == name
            link = row.get_by_role("link", name="Start an evaluation")
            assert link.get_attribute("href") == f"/evaluations/start/?endpoint={name}"
        server = ModelServer.objects.get(checkpoint=checkpoint)
        assert server.status == "ready" and server.endpoint.name == name and server.job_run.status == "succeeded"
        link.click()  # the evaluation form opens with the endpoint chosen
        page.wait_for_url("**/evaluations/start/**")
        assert page.locator("select[name=endpoint]").input_value() == name
    finally:  # whatever happened: a server still starting is stopped too (its job kills what it started)
        for server in ModelServer.objects.filter(checkpoint=checkpoint).exclude(status="stopped"):
            stop_server(server)
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )
