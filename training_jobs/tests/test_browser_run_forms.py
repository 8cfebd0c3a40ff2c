"""Training pages in a real browser (issue 24 items 14, 18, 19): the dataset form names its rollout groups by what
made them and offers no evaluation run's rollouts as a group; a queued run's page says why it waits (no worker on the
gpu queue, its place in line) and follows the queue without a reload; "Clone…" opens the run's config to edit, with a
label, refuses a bad edit on the form and queues the clone with the edits.

Nothing trains here: runs, job rows and worker beats are rows as the pages and the workers write them.
"""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluation.models import Rollout
from jobs.models import JobRun, Worker
from jobs.testing import use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from tasks.testing import make_task
from training_jobs.kinds.sft import build_config
from training_jobs.models import TrainingDataset, TrainingRun
from training_jobs.services.runs import start_training_run
from training_jobs.testing.corpus import make_corpus
from training_jobs.testing.rl_tasks import distinct_instruction

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def no_problems(problems) -> None:
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )


def test_the_dataset_form_names_rollout_groups_and_offers_no_evaluation_run_as_one(page, live_server, admin_user):
    corpus = make_corpus()
    # As evaluation.services.runs starts them: an evaluation run's rollouts share the group "run<id>".
    Rollout.objects.filter(eval_run=corpus.run).update(group=f"run{corpus.run.pk}")
    problems = watch(page)
    log_in(page, live_server, admin_user)
    options = page.locator("#dataset-build-form select[name=groups] option")
    assert options.evaluate_all("os => os.map(o => o.value)") == [corpus.group]
    label = options.first.inner_text()
    when = timezone.localtime(Rollout.objects.filter(group=corpus.group).latest("created_at").created_at)
    assert label == f"g-1 +4 tasks · agent-m · builtin · 5 rollouts · {when:%Y-%m-%d %H:%M}"
    assert "outside evaluation runs" in page.inner_text("#dataset-build-form")

    with use_engine("django_q"):  # the build is queued (no worker needed to see the dataset's page)
        form = page.locator("#dataset-build-form")
        form.locator("select[name=groups]").select_option(label=label)
        form.locator("input[name=name]").fill("from the group")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"/training/datasets/\d+/$"))
    dataset = TrainingDataset.objects.get(name="from the group")
    assert dataset.selection["groups"] == [corpus.group]
    # Its page names the group the same way (the id stays in the title).
    assert page.inner_text(f"[data-group='{corpus.group}']") == label
    no_problems(problems)


def test_a_queued_run_says_why_it_waits_and_follows_the_queue(page, live_server, admin_user):
    before = JobRun.objects.create(kind="training.serve_checkpoint", queue="gpu", engine="django_q")
    job = JobRun.objects.create(kind="training.sft_run", queue="gpu", engine="django_q")
    run = TrainingRun.objects.create(
        name="waits",
        base_model_path="/models/tiny",
        config=build_config("tiny-cpu"),
        preset="tiny-cpu",
        cpu=True,
        job_run=job,
    )
    problems = watch(page)
    log_in(page, live_server, admin_user)
    page.goto(live_server.url + reverse("training:run", args=[run.pk]))
    wait = page.locator("#run-wait")
    assert "Waiting for a worker: none has taken the gpu queue in the last 60 s" in wait.inner_text()
    assert "manage.py qcluster" in wait.inner_text()
    position = page.inner_text("#run-queue-position")
    assert position == "2nd in line on the gpu queue (1 job before it); 0 running there now."
    screenshot(page, "run-waits-for-a-worker")
    mark_document(page)

    # A worker comes up and takes the job before it: the page (polling while the run is queued) says so.
    Worker.objects.create(
        name="gpu-box:1",
        host="gpu-box",
        engine="django_q",
        queues="gpu",
        started_at=timezone.now(),
        seen_at=timezone.now(),
    )
    JobRun.objects.filter(pk=before.pk).update(status=JobRun.Status.RUNNING)
    page.wait_for_function("document.querySelector('#run-queue-position').innerText.startsWith('1st in line')")
    assert page.inner_text("#run-queue-position") == "1st in line on the gpu queue; 1 running there now."
    assert page.locator("#run-wait").inner_text().startswith("Waiting its turn: 1 worker takes the gpu queue.")

    # Its turn: once it runs, the page says nothing of waiting.
    JobRun.objects.filter(pk=job.pk).update(status=JobRun.Status.RUNNING)
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.RUNNING)
    page.wait_for_function("document.querySelector('#run-status').innerText === 'Running'")
    assert page.locator("#run-wait").count() == 0
    assert_no_reload(page)
    no_problems(problems)


def test_clone_opens_the_config_to_edit_and_queues_the_clone_with_the_edits(page, live_server, admin_user):
    revisions = [
        make_task("rl-a", distinct_instruction("rl-a")).current_revision,
        make_task("rl-b", distinct_instruction("rl-b")).current_revision,
    ]
    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path="/models/tiny",
        tasks=[r.pk for r in revisions],
        harness="builtin",
        preset="tiny-cpu",
        cpu=True,
        enqueue=False,
    )
    problems = watch(page)
    log_in(page, live_server, admin_user)
    page.goto(live_server.url + reverse("training:run", args=[run.pk]))
    page.click("#run-clone")
    page.wait_for_url(live_server.url + reverse("training:run-clone", args=[run.pk]))
    # The edits box is found by its label, and holds the run's config, a key=value a line.
    box = page.get_by_label("Config (one key=value a line)")
    lines = box.input_value().splitlines()
    assert f"max_steps={run.config['max_steps']}" in lines and "harness=builtin" in lines
    assert f"learning_rate={run.config['learning_rate']}" in lines and not any(x.startswith("tasks=") for x in lines)
    screenshot(page, "run-clone-form")

    # A key the config lacks is refused on the form, nothing queued; what was typed stays.
    edited = [("max_steps=7" if line.startswith("max_steps=") else line) for line in lines]
    box.fill("\n".join([*edited, "max_stepz=7"]))
    page.click("#run-clone-form button[type=submit]")
    page.wait_for_selector("#run-clone-form .error")
    assert "unknown config key 'max_stepz'" in page.inner_text("#run-clone-form .error")
    assert TrainingRun.objects.count() == 1 and "max_stepz=7" in box.input_value()

    with use_engine("django_q"):
        box.fill("\n".join(edited))
        page.click("#run-clone-form button[type=submit]")
        page.wait_for_url(re.compile(r"/training/runs/\d+/$"))
    clone = TrainingRun.objects.get(cloned_from=run)
    assert page.url.endswith(reverse("training:run", args=[clone.pk]))
    assert f"Run #{clone.pk} queued: a clone of #{run.pk} with max_steps edited." in page.inner_text(".messages")
    assert clone.config == {**run.config, "max_steps": 7} and clone.kind == "rl" and clone.cpu
    assert clone.job_run.queue == "gpu" and clone.job_run.status == JobRun.Status.QUEUED
    # The refused edit's 400, and nothing else.
    refused = f"400 {live_server.url}{reverse('training:run-clone', args=[run.pk])}"
    assert problems.failed_responses == [refused], problems.failed_responses
    assert all("status of 400" in error for error in problems.console_errors), problems.console_errors
