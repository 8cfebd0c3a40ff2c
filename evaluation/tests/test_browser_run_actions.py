"""The run page's Cancel in a real browser: it asks first (static/js/confirm.js), and only a confirmed cancel reaches
the server; the cancelled run then offers Resume and shows no score in the runs list."""

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun
from evaluation.services import runs
from evaluation.testing import make_tasks
from lib.browser_testing import log_in, screenshot
from llm.models import ModelEndpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]


def test_cancel_asks_first_and_a_cancelled_run_offers_resume(page, live_server, admin_user):
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="b"), number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in make_tasks().values())
    model = ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    run, _ = runs.create_eval_run(endpoint=model, benchmark_version=version, harness="builtin", fresh=True, user=None)
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    asked = []
    log_in(page, live_server, admin_user)
    page.goto(live_server.url + reverse("evaluations:detail", args=[run.pk]))
    assert page.locator("text=Resume").count() == 0  # running: nothing to resume

    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#cancel-run button")
    page.wait_for_timeout(500)  # a dismissed dialog sends nothing: give a wrong POST the time to land
    assert asked and asked[0].startswith(f"Cancel {run.name}?")
    assert EvalRun.objects.get(pk=run.pk).status == EvalRun.Status.RUNNING

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-run button")
    page.wait_for_selector("text=is cancelled")
    assert EvalRun.objects.get(pk=run.pk).status == EvalRun.Status.CANCELLED
    assert page.locator("form[action$='/resume/'] button").inner_text() == "Resume"
    screenshot(page, "eval-run-cancelled")
    page.goto(live_server.url + reverse("evaluations:list"))
    assert page.inner_text(f"tr[data-run='{run.pk}'] td.overall").strip() == "—"
