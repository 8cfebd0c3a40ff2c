"""In a real browser: an admin opens the Base models page, clicks "Serve as an agent" on a registered model, and its row
shows the server starting, then ready with the endpoint base-NAME and a link to start an evaluation, without a
reload; Stop (confirmed) stops it and the row offers Serve again. The click answers at once; a real django-q worker
starts `transformers serve` on the tiny model."""

import os

import pytest

from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, watch
from training_jobs.models import BaseModel, ModelServer
from training_jobs.server_processes import alive
from training_jobs.serving import stop_server

# once: a model server's start, nothing about the database engine (CI runs it in the PostgreSQL pass).
pytestmark = [pytest.mark.browser, pytest.mark.workers, pytest.mark.once, pytest.mark.django_db(transaction=True)]

READY_TIMEOUT = 180_000  # ms: transformers serve imports torch and loads the model on a busy CPU


@pytest.fixture(scope="module")
def gpu_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    # Its var folder a temporary one: the server's log and model link (training/served-base-models/) go there.
    saved = os.environ.get("CLAWGYM_VAR_DIR")
    os.environ["CLAWGYM_VAR_DIR"] = str(tmp_path_factory.mktemp("worker-var"))
    try:
        with django_db_blocker.unblock():
            worker = start_django_q_worker(workers=1)
    finally:
        if saved is None:
            os.environ.pop("CLAWGYM_VAR_DIR")
        else:
            os.environ["CLAWGYM_VAR_DIR"] = saved
    yield worker
    worker.stop()
    worker.cleanup()


def test_an_admin_serves_a_base_model_as_an_agent_and_the_row_turns_ready(
    page, live_server, admin_user, gpu_worker, tiny_model_path
):
    BaseModel.objects.create(name="tiny", path=tiny_model_path, architecture="Qwen3ForCausalLM")
    problems = watch(page)
    try:
        with use_engine("django_q"):
            log_in(page, live_server, admin_user)
            page.goto(f"{live_server.url}/training/base-models/")
            row = page.locator("#base-model-tiny")
            mark_document(page)
            row.get_by_role("button", name="Serve as an agent").click()
            row.locator("[data-server-status=starting]").wait_for()  # the click answered before the server is up
            row.locator("[data-server-status=ready]").wait_for(timeout=READY_TIMEOUT)
            assert_no_reload(page)
            assert row.locator(".endpoint-name").inner_text() == "base-tiny"
            link = row.get_by_role("link", name="Start an evaluation")
            assert link.get_attribute("href") == "/evaluations/start/?endpoint=base-tiny"
            server = ModelServer.objects.get(base_model__name="tiny")
            assert server.status == "ready" and server.endpoint.name == "base-tiny"
            assert server.job_run.status == "succeeded", server.job_run.error

            page.once("dialog", lambda dialog: dialog.accept())  # "Stop serving tiny? …"
            row.get_by_role("button", name="Stop").click()
            row.locator("[data-server-status=stopped]").wait_for()
            assert_no_reload(page)
            assert row.get_by_role("button", name="Serve again").is_visible()
        server.refresh_from_db()
        assert server.status == "stopped" and not server.endpoint.enabled and not alive(server.pid)
    finally:  # whatever happened: a server still starting is stopped too (its job kills what it started)
        for server in ModelServer.objects.filter(base_model__name="tiny").exclude(status="stopped"):
            stop_server(server)
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )
