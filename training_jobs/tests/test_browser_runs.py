"""In a real browser: an admin starts an SFT run from the dashboard's panel and the run page, opened while the run
is queued, follows it to the end without a reload: the loss curve appears and fills as the steps come in. The run
trains on a real django-q worker (a subprocess on the test database) through accelerate launch with a tiny Qwen3."""

import re

import pytest

from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, watch
from training_jobs.models import TrainingMetric, TrainingRun

pytestmark = [pytest.mark.browser, pytest.mark.workers, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT = 400_000  # ms: the trainer's start (imports, tokenizing) is slow on a busy CPU; a bounded wait


@pytest.fixture(scope="module")
def gpu_worker(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=1)
    yield worker
    worker.stop()
    worker.cleanup()


def test_an_admin_starts_a_run_from_the_dashboard_and_watches_the_loss_curve(
    page, live_server, admin_user, gpu_worker, dataset, tiny_model_path
):
    problems = watch(page)
    with use_engine("django_q"):
        log_in(page, live_server, admin_user)
        panel = page.locator("#training-runs-panel")
        details = panel.locator("details#run-start")
        if details.get_attribute("open") is None:
            panel.locator("summary", has_text="Start a training run").click()
        form = panel.locator("form#run-start-form")  # the SFT form (the RL run's form is beside it)
        form.locator("select[name=dataset]").select_option(str(dataset.pk))
        form.locator("input[name=base_model_path]").fill(tiny_model_path)
        form.locator("select[name=preset]").select_option("tiny-cpu")
        form.locator("textarea[name=overrides]").fill("max_steps=4\nsave_steps=2")
        form.locator("input[name=cpu]").check()
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"/training/runs/\d+/$"))
        run = TrainingRun.objects.get()
        assert run.config["max_steps"] == 4 and run.cpu and run.job_run.queue == "gpu"
        assert not TrainingMetric.objects.filter(run=run).exists()  # opened before the first step
        mark_document(page)
        page.wait_for_selector(
            "canvas[data-chart='chart-loss'][data-drawn='true']", state="attached", timeout=RUN_TIMEOUT
        )
        page.wait_for_function("document.querySelector('#run-status').innerText === 'Succeeded'", timeout=RUN_TIMEOUT)
        assert_no_reload(page)
        run.refresh_from_db()
        assert run.status == "succeeded" and run.steps == 4, run.log_tail
        assert page.locator("#metrics-table tbody tr").count() == 4
        assert page.locator("#run-checkpoints tbody tr").count() == 2
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )
