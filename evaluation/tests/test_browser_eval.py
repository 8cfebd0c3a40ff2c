"""The evaluation pages in a real browser, with real work behind them: an admin starts an evaluation from its form and
watches the run page, the runs list and the dashboard follow it to its end without a reload, then reads the figures, the dashboard, the leaderboard
and the comparison with a second run; a reviewer fixes a checker and regrades the task from the run page, which
follows the regrade job until the task's new score shows.

The rollouts and the regrade run on a real django-q worker (a subprocess on the test database) through the real proxy
(uvicorn, in this process) and bubblewrap, against the scripted strong and weak models of evaluation.testing, which take
their time answering (Reply.delay) so that the pages are open while the work goes on. The checker is fixed with
tasks.services.revise_task (what the review pages' editor calls): the task pages have no editor of their own.
"""

import dataclasses
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.urls import reverse

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun, EvalRunTask
from evaluation.services import runs
from evaluation.testing import RIGHT, WRONG, endpoints, make_tasks, needs_bwrap, respond
from jobs.models import JobRun
from jobs.testing import start_django_q_worker, use_engine
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot, watch
from lib.testing import wait_until
from tasks.models import RevisionFile
from tasks.services import revise_task

pytestmark = [
    needs_bwrap,
    pytest.mark.browser,
    pytest.mark.workers,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("taxonomy"),
]

MODEL_DELAY = 1.5  # seconds each model answer takes: a rollout lasts a few seconds, the run a dozen or more
RUN_TIMEOUT = 180_000  # ms the pages may take to see a run (or a regrade) through: bounded waits, not timings


@pytest.fixture(scope="module")
def eval_worker_process(_live_server_asgi_module, django_db_setup, django_db_blocker):
    """A django-q cluster whose workers reach the proxy of this test process (the live ASGI server)."""
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=2, proxy_url=_live_server_asgi_module.url)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def eval_worker(eval_worker_process, live_server_asgi, settings):
    if not eval_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{eval_worker_process.log_tail()}")
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    with use_engine("django_q"):
        yield eval_worker_process


def slow(body):
    return dataclasses.replace(respond(body), delay=MODEL_DELAY)


def wait_run(run: EvalRun, worker, timeout: float = 180.0) -> EvalRun:
    def finished():
        run.refresh_from_db()
        return run.is_finished

    wait_until(
        finished,
        lambda: f"run #{run.pk} to finish: it is {run.status}; worker log:\n{worker.log_tail()}",
        timeout=timeout,
    )
    return run


def three(value: float) -> str:
    """As the pages print a figure (floatformat:3 rounds half up)."""
    return str(Decimal(str(value)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def cell(page, task: str) -> str:
    return page.inner_text(f"#tasks-table tr[data-task='{task}'] td.mean")


def chart_drawn(page, name: str) -> None:
    page.wait_for_selector(f"canvas[data-chart='{name}'][data-drawn='true']", state="attached")
    assert page.evaluate(f"Boolean(Chart.getChart(document.querySelector(\"canvas[data-chart='{name}']\")))")


def test_an_admin_runs_an_evaluation_from_the_pages_and_a_reviewer_regrades_a_fixed_checker(
    browser, page, live_server, eval_worker, scripted_upstream, admin_user, reviewer
):
    scripted_upstream.responder = slow
    revisions = make_tasks()
    benchmark = Benchmark.objects.create(name="eval-bench")
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions.values())
    strong, weak = endpoints(scripted_upstream)
    problems = watch(page)

    # The admin starts the strong model on the version from the form, and lands on the run's page.
    log_in(page, live_server, admin_user)
    page.click("nav.mainnav >> text=Evaluations")
    page.click("text=Start an evaluation")
    page.select_option("select[name=benchmark_version]", label=str(version))
    page.select_option("select[name=endpoint]", "strong")
    page.select_option("select[name=harness]", "builtin")
    page.fill("input[name=name]", "strong on v1")
    page.click("#start-eval button[type=submit]")
    page.wait_for_url(re.compile(r"/evaluations/\d+/$"))
    run = EvalRun.objects.get(name="strong on v1")
    assert page.url.endswith(reverse("evaluations:detail", args=[run.pk]))
    assert "Started strong on v1: 4 rollouts queued." in page.inner_text(".messages")
    assert page.inner_text("#run-status") in ("Running", "Queued")
    assert page.locator("#partial-figures").count() == 1
    mark_document(page)
    # The runs list and the dashboard's recent evaluations, opened while the run runs, follow it too.
    listing = page.context.new_page()
    listing.goto(live_server.url + reverse("evaluations:list"))
    row = f"#runs tr[data-run='{run.pk}']"
    assert listing.inner_text(f"{row} .badge") in ("Running", "Queued")
    assert listing.locator(f"{row} [role=progressbar]").count() == 1
    mark_document(listing)
    dashboard = page.context.new_page()
    dashboard.goto(live_server.url + reverse("dashboard"))
    recent = f"#recent-runs tr[data-run='{run.pk}']"
    assert dashboard.inner_text(f"{recent} .badge") in ("Running", "Queued")
    mark_document(dashboard)

    # The page follows the run by itself: its progress moves while it runs, then its figures show.
    page.wait_for_function(
        "Number(document.querySelector('#run-progress [role=progressbar]').getAttribute('aria-valuenow')) > 0"
        " && document.querySelector('#run-status').innerText === 'Running'",
        timeout=RUN_TIMEOUT,
    )
    screenshot(page, "eval-run-running")
    page.wait_for_function("document.querySelector('#run-status').innerText === 'Complete'", timeout=RUN_TIMEOUT)
    assert_no_reload(page)
    for other_page, selector in ((listing, row), (dashboard, recent)):
        other_page.wait_for_function(
            f"document.querySelector(\"{selector} .badge\").innerText === 'Complete'", timeout=RUN_TIMEOUT
        )
        assert other_page.locator(f"{selector} [role=progressbar]").count() == 0
        # The page's other parts follow work of their own on their own cycles (the dashboard's panels; a job queued
        # before this test's run): each must stop polling once nothing it shows runs, within the bound, not at once.
        other_page.wait_for_function(
            "document.querySelectorAll('[hx-trigger^=every]').length === 0", timeout=RUN_TIMEOUT
        )
        assert_no_reload(other_page)
    assert listing.inner_text(f"{row} td.overall .mean") == three((3 * RIGHT + WRONG) / 4)
    listing.close()
    dashboard.close()
    expected = (3 * RIGHT + WRONG) / 4
    assert page.inner_text("#overall-mean") == three(expected)
    assert page.locator("#partial-figures").count() == 0
    # The run's part stops polling at once; the findings card polls on until the scan the run's end
    # started has read the transcripts, then stops too.
    assert page.locator("#run-live[hx-trigger]").count() == 0
    page.wait_for_function("!document.querySelector('[hx-trigger^=every]')", timeout=RUN_TIMEOUT)
    assert page.inner_text("#run-progress .run-count") == "4/4 rollouts"
    assert cell(page, "eval-a") == three(RIGHT) and cell(page, "eval-d") == three(WRONG)
    assert page.inner_text("#outcomes tr[data-outcome=scored] td.num") == "4"
    chart_drawn(page, "chart-categories")
    chart_drawn(page, "chart-distribution")
    screenshot(page, "eval-run-complete")

    # A task's row opens its repeats, with links to their rollouts.
    page.click("#tasks-table tr[data-task='eval-a'] details summary")
    link = page.locator("#tasks-table tr[data-task='eval-a'] .repeats-table a[href^='/rollouts/']")
    link.wait_for()
    rollout = run.rollouts.get(revision=revisions["eval-a"])
    assert link.get_attribute("href") == f"/rollouts/{rollout.pk}/"
    # Sorted by score, the hardest first (htmx swaps the table, the address follows).
    page.click("#tasks .sorts >> text=score ↑")
    page.wait_for_url(re.compile(r"sort=score$"))
    page.wait_for_function("document.querySelector('#tasks-table tbody tr').dataset.task === 'eval-d'")

    # A second run, of the weak model, for the leaderboard and the comparison.
    other, _ = runs.start_eval_run(endpoint=weak, benchmark_version=version, harness="builtin", user=admin_user)
    other = wait_run(other, eval_worker)
    assert other.status == EvalRun.Status.COMPLETE, list(
        other.rollouts.values_list(
            "revision__task__external_id", "attempt", "status", "exit_reason", "error", "previous_attempts"
        )
    )

    page.goto(live_server.url + reverse("dashboard"))
    panel = page.locator("#evaluation-panel")
    assert panel.locator("tr[data-endpoint]").all_inner_texts()[0].startswith("1\tstrong")
    assert panel.locator("tr[data-endpoint='weak']").count() == 1
    chart_drawn(page, "chart-panel")

    page.goto(live_server.url + reverse("evaluations:leaderboard"))
    assert page.locator("#board tr[data-endpoint]").evaluate_all("rows => rows.map(r => r.dataset.endpoint)") == [
        "strong",
        "weak",
    ]
    weak_overall = (RIGHT + 3 * WRONG) / 4
    assert page.inner_text("#board tr[data-endpoint='weak'] td.overall .mean") == three(weak_overall)
    chart_drawn(page, "chart-leaderboard")
    screenshot(page, "eval-leaderboard")

    page.goto(live_server.url + reverse("evaluations:compare"))
    page.select_option("select[name=a]", str(run.pk))
    page.select_option("select[name=b]", str(other.pk))
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#mean-difference")
    assert page.inner_text("#mean-difference") == three(expected - weak_overall)
    assert page.locator("#a-only a").all_inner_texts() == ["eval-b", "eval-c"]
    assert page.inner_text("#b-only") == "none"
    chart_drawn(page, "chart-compare")
    screenshot(page, "eval-compare")
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )

    # A reviewer decides the order of the fruit does not matter for eval-d: the fixed checker accepts both answers.
    task = revisions["eval-d"].task
    check = task.current_revision.files.get(role=RevisionFile.Role.REWARD, path="check.py").blob.content.decode()
    fixed = check.replace(
        'text.strip() == "3 apples, 2 pears"', 'sorted(text.strip().split(", ")) == sorted(["3 apples", "2 pears"])'
    )
    assert fixed != check
    revise_task(
        task, user=reviewer, message="order does not matter", file_changes={("reward", "check.py"): fixed.encode()}
    )
    reviewing = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
    reviewing.set_default_timeout(15_000)
    log_in(reviewing, live_server, reviewer)
    reviewing.goto(live_server.url + reverse("evaluations:detail", args=[run.pk]))
    assert cell(reviewing, "eval-d") == three(WRONG)
    assert reviewing.locator("form[action$='/cancel/'], form[action$='/resume/']").count() == 0  # admins only
    reviewing.click("#tasks-table tr[data-task='eval-d'] button:has-text('Regrade')")
    reviewing.wait_for_url(re.compile(r"\?regrade=\d+$"))
    job = JobRun.objects.get(kind="evaluation.regrade")
    assert job.params == {"task_id": "eval-d"}
    mark_document(reviewing)
    reviewing.wait_for_function(
        "document.querySelector(\"#tasks-table tr[data-task='eval-d'] td.mean\").innerText === '1.000'",
        timeout=RUN_TIMEOUT,
    )
    assert_no_reload(reviewing)
    assert reviewing.inner_text("#overall-mean") == three(RIGHT)
    reviewing.wait_for_function("!document.querySelector('[hx-trigger^=every]')", timeout=RUN_TIMEOUT)
    assert reviewing.inner_text(f"#job-progress-{job.pk} [data-testid=job-outcome]") == "Succeeded"
    screenshot(reviewing, "eval-regraded")
    # Every model's score on the task changed: the weak run's too.
    assert EvalRunTask.objects.get(run=other, task=task).mean == RIGHT
    reviewing.context.close()
