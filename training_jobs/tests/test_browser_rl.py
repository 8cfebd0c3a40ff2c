"""In a real browser: an admin starts an RL run from the dashboard's panel, and the run page, opened before the first
step is logged, draws the reward curve while the run trains and follows it to the end without a reload; the step's
rollouts are linked to their pages. The run is real and tiny: the `training.rl_run` job on a django-q worker
(a subprocess on the test database) launches the GRPO trainer (accelerate launch, a tiny Qwen3, the live policy
server), whose rollout_func runs builtin-harness rollouts in bubblewrap on the same cluster's other workers, through
the recording proxy (this process's ASGI server), scored by a real checker."""

import re
import shutil

import pytest

from evaluation.testing import needs_bwrap
from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from training_jobs.models import RLRollout, TrainingMetric, TrainingRun
from training_jobs.run_jobs import run_dir
from training_jobs.testing.rl_tasks import task

pytestmark = [
    needs_bwrap,
    pytest.mark.browser,
    pytest.mark.workers,
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
]

RUN_TIMEOUT = 400_000  # ms: the trainer's start (imports) and the rollouts' sandboxes are slow on a busy CPU


@pytest.fixture(scope="module")
def cluster(_live_server_asgi_module, django_db_setup, django_db_blocker):
    """A django-q cluster of three workers: one runs the RL job (the trainer), two the step's rollouts side by side;
    the rollouts reach the proxy of this test process (the live ASGI server); the trainer never looks for the hub."""
    env = {"CLAWGYM_PROXY_PUBLIC_URL": _live_server_asgi_module.url, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=3, env=env)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def run_folders():
    """The worker writes its runs under the default training folder (its own settings): removed afterwards."""
    yield
    for run in TrainingRun.objects.all():
        shutil.rmtree(run_dir(run), ignore_errors=True)


def test_an_admin_starts_an_rl_run_from_the_dashboard_and_watches_the_reward_curve(
    page, live_server, live_server_asgi, admin_user, cluster, tiny_model_path, run_folders
):
    revision = task("rl-browser")
    problems = watch(page)
    with use_engine("django_q"):
        log_in(page, live_server, admin_user)
        panel = page.locator("#training-runs-panel")
        panel.locator("summary", has_text="Start an RL run").click()
        form = panel.locator("#rl-run-start-form")
        form.locator("input[name=base_model_path]").fill(tiny_model_path)
        form.locator("textarea[name=tasks]").fill("rl-browser")
        form.locator("select[name=harness]").select_option("builtin")
        form.locator("select[name=preset]").select_option("tiny-cpu")
        form.locator("textarea[name=overrides]").fill("max_steps=2\nprompts_per_step=1")
        form.locator("input[name=cpu]").check()
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"/training/runs/\d+/$"))
        run = TrainingRun.objects.get()
        assert run.kind == "rl" and run.config["tasks"] == [revision.pk] and run.config["max_steps"] == 2
        assert run.cpu and run.job_run.kind == "training.rl_run" and run.job_run.queue == "gpu"
        assert not TrainingMetric.objects.filter(run=run).exists()  # opened before the first step
        assert page.locator("#run-curves .empty").inner_text() == "No step logged yet."
        mark_document(page)

        # The first step's reward point appears while the run goes on (step 2 of 2 still to train).
        page.wait_for_selector(
            "canvas[data-chart='chart-reward'][data-drawn='true']", state="attached", timeout=RUN_TIMEOUT
        )
        status_when_drawn = page.locator("#run-status").inner_text()
        screenshot(page, "rl-run-reward-curve")
        page.wait_for_function("document.querySelector('#run-status').innerText === 'Succeeded'", timeout=RUN_TIMEOUT)
        assert_no_reload(page)
        run.refresh_from_db()
        assert run.status == "succeeded" and run.steps == 2, run.log_tail
        assert status_when_drawn == "Running", status_when_drawn
        # The curve drawn from the run's own metrics: a mean reward per step, the checker's score in [0, 1].
        # (Waited for: the last swap's canvas is drawn on htmx:load, a moment after its status text is in.)
        drawn = page.wait_for_function("""() => {
            const chart = Chart.getChart(document.querySelector("canvas[data-chart='chart-reward']"));
            return chart ? chart.data.datasets[0].data : null;
        }""").json_value()
        logged = [m.values.get("reward_mean") for m in TrainingMetric.objects.filter(run=run).order_by("step")]
        assert drawn == logged and len(drawn) == 2 and all(0 <= r <= 1 for r in drawn)
        assert page.locator("#rl-steps-table tbody tr").count() == 2
        # The last step's rollouts, each linked to its page.
        rows = RLRollout.objects.filter(run=run, step=2)
        links = page.locator("#rl-rollouts-table a")
        assert links.count() == rows.count() == 2
        screenshot(page, "rl-run-finished")
        # Another step's rollouts, swapped in by htmx (the address follows: a reload shows the same step).
        page.locator("#rl-rollouts .step-links a", has_text="1").click()
        page.wait_for_function("document.querySelector('#rl-rollouts h2').innerText === 'Rollouts of step 1'")
        assert page.url.endswith("?step=1")
        assert_no_reload(page)
        first_step = {r.rollout_id for r in RLRollout.objects.filter(run=run, step=1)}
        links.first.click()
        page.wait_for_url(re.compile(r"/rollouts/\d+/$"))
        assert int(page.url.rstrip("/").split("/")[-1]) in first_step
    assert not problems.console_errors, problems.console_errors
    assert not problems.failed_responses, problems.failed_responses
