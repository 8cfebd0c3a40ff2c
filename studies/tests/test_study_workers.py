"""Studies through the workers: `manage.py study start --json` waits for a stability study whose steps (the advance job)
and rollouts run on a real django-q cluster, through the live proxy and bubblewrap with the builtin harness and
evaluation.testing's scripted strong model; and in a browser an admin starts one from the form and watches its page,
opened before the first cell can end (the scripted model holds every answer until the test lets it go), follow it to its
end without a reload."""

import json
import re
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from evaluation.models import EvalRun
from evaluation.testing import needs_bwrap, respond
from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, watch
from studies.models import Study

pytestmark = [needs_bwrap, pytest.mark.workers, pytest.mark.django_db(transaction=True)]

WAIT_MS = 240_000  # how long the page may take to see the study through: a bound, not a timing


@pytest.fixture(scope="module")
def study_worker_process(_live_server_asgi_module, django_db_setup, django_db_blocker):
    """A django-q cluster whose workers reach the proxy of this test process (the live ASGI server)."""
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=2, proxy_url=_live_server_asgi_module.url)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def study_worker(study_worker_process, world):
    if not study_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{study_worker_process.log_tail()}")
    with use_engine("django_q"):
        yield study_worker_process


def test_the_command_waits_for_a_stability_study_run_by_the_workers(study_worker, world):
    out, err = StringIO(), StringIO()
    args = ["--kind", "stability", "--benchmark", "eval-bench", "--endpoint", "strong", "--runs", "2"]
    call_command("study", "start", *args, "--harness", "builtin", "--timeout", "400", "--json", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["status"] == "complete", f"{report}\n{err.getvalue()}\n{study_worker.log_tail()}"
    runs = [EvalRun.objects.get(pk=row["eval_run"]) for row in report["cells"]]
    assert [r.status for r in runs] == ["complete", "complete"] and not any(r.inline for r in runs)
    assert all(r.on_finish == "studies.advance" and r.on_finish_params == {"study_id": report["study"]} for r in runs)
    # All four tasks (subset 0): strong solves three of them (1.0) and not eval-d (0.75).
    assert [row["mean"] for row in report["cells"]] == [0.9375, 0.9375]
    assert report["best"]["label"] == "run 1" and report["comparisons"][0]["mean_difference"] == 0.0
    assert report["stability"]["std"] == 0.0


@pytest.mark.browser
@pytest.mark.usefixtures("taxonomy")
def test_the_study_page_opened_before_the_first_cell_ends_follows_it_to_the_end(
    browser, page, live_server, study_worker, world, admin_user
):
    gate = threading.Event()

    def held(body):
        gate.wait(timeout=WAIT_MS / 1000)  # no answer, so no rollout and no cell, ends before the page is open
        return respond(body)

    world["upstream"].responder = held
    problems = watch(page)
    log_in(page, live_server, admin_user)
    page.click("nav.mainnav >> text=Studies")
    page.click("text=Start a study")
    page.select_option("select[name=kind]", "stability")
    page.select_option("select[name=benchmark_version]", str(world["version"].pk))
    page.select_option("select[name=endpoint]", str(world["strong"].pk))
    page.fill("input[name=harness]", "builtin")
    page.fill("input[name=runs]", "2")
    page.fill("input[name=subset]", "2")
    page.fill("input[name=name]", "two runs")
    page.click("form.card button[type=submit]")
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    study = Study.objects.get(name="two runs")
    assert study.status == "running" and "Study #" in page.inner_text("h1")
    mark_document(page)
    # The advance job starts both cells' runs; their rollouts wait on the model: the cells show as running.
    expect(page.locator("section[data-cell-status='running'] tr[data-cell]")).to_have_count(2, timeout=WAIT_MS)
    assert page.locator("#best").count() == 0 and not Study.objects.get(pk=study.pk).is_finished

    gate.set()
    expect(page.locator("#study-live")).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
    expect(page.locator("section[data-cell-status='complete'] tr[data-cell]")).to_have_count(2)
    assert page.inner_text("#best").startswith("Best: run 1")
    page.wait_for_selector("canvas[data-chart='chart-study'][data-drawn='true']", state="attached")
    assert "std 0.0000" in page.inner_text("#spread")
    assert_no_reload(page)
    assert not problems.console_errors and not problems.failed_responses
