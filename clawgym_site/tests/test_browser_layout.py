"""The pages' layout in a real browser (issue 24 item 21): at 390 px no main page is wider than the screen (a wide
table scrolls inside its card); at laptop widths the leaderboard's and the dashboard's tables show their last column
(Repeats) and a connection test's message stays in its card; the comparison chart's axis has 0 whatever its height;
a flat loss of 0 is drawn from 0; number inputs look like text inputs; input files are named in words.

The evaluation runs are made directly (rollouts given scores, figures recomputed), on tasks in each of the six
benchmark categories: the widest leaderboard a fresh install shows.
"""

import dataclasses

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import endpoint, freeze, fruit_package
from lib.browser_testing import log_in, screenshot, watch
from tasks.models import BenchmarkCategory
from tasks.services import save_package
from training_jobs.kinds.sft import build_config
from training_jobs.models import TrainingMetric, TrainingRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("taxonomy")]

PHONE, LAPTOP, SMALL_LAPTOP = 390, 1280, 1024


def scored_run(model, version, score: float) -> EvalRun:
    """A complete run of `model` whose rollouts scored around `score`."""
    run, _ = runs.create_eval_run(
        endpoint=model, benchmark_version=version, harness="builtin", repeats=2, fresh=True, user=None
    )
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    for i, rollout in enumerate(run.rollouts.order_by("pk")):
        Rollout.objects.filter(pk=rollout.pk).update(
            status=Rollout.Status.SCORED,
            exit_reason="completed",
            score=score * (0.5 + (i % 3) / 4),
            attempt=1,
            finished_at=timezone.now(),
            input_tokens=123_456,
            output_tokens=1_000,
            cost="1.2345",
            agent_seconds=2.0,
        )
    run_progress.recompute_run(run)
    run_progress.rollout_changed(run.rollouts.order_by("pk").last().pk)  # as the last rollout's worker would
    run.refresh_from_db()
    return run


@pytest.fixture
def world():
    revisions = []
    for category in BenchmarkCategory.objects.order_by("order"):
        package = fruit_package(f"task-{category.slug}")
        package = dataclasses.replace(package, metadata={**package.metadata, "category": category.slug})
        revisions.append(save_package(package).revision)
    version = freeze(revisions)
    a = scored_run(endpoint("qwen3-8b-sft-step-1200"), version, 1.0)
    b = scored_run(endpoint("weak"), version, 0.5)
    # A loss that is 0 at every step (an SFT run that trained on nothing, as issue 24 saw it).
    flat = TrainingRun.objects.create(
        name="flat",
        base_model_path="/models/tiny",
        config=build_config("tiny-cpu"),
        preset="tiny-cpu",
        cpu=True,
        status="succeeded",
        steps=3,
        total_steps=3,
    )
    for step in (1, 2, 3):
        TrainingMetric.objects.create(run=flat, step=step, values={"loss": 0.0, "learning_rate": 1e-3})
    return {"a": a, "b": b, "task": revisions[0].task, "flat": flat}


def pages(world) -> list[str]:
    a, b = world["a"], world["b"]
    return [
        reverse("dashboard"),
        reverse("tasks:list"),
        reverse("tasks:detail", args=[world["task"].external_id]),
        reverse("review:queue"),
        reverse("evaluation:list"),
        reverse("evaluations:list"),
        reverse("evaluations:detail", args=[a.pk]),
        reverse("evaluations:leaderboard"),
        reverse("evaluations:compare") + f"?a={a.pk}&b={b.pk}",
        reverse("synthesis:list"),
        reverse("training:datasets"),
        reverse("training:runs"),
        reverse("training:run", args=[world["flat"].pk]),
        reverse("jobs:list"),
        reverse("llm:endpoints"),
    ]


def box(page, selector: str) -> dict:
    return page.locator(selector).first.bounding_box()


def y_ticks(page, chart: str) -> list[float]:
    page.wait_for_selector(f"canvas[data-chart='{chart}'][data-drawn='true']", state="attached")
    return page.evaluate(
        f"Chart.getChart(document.querySelector(\"canvas[data-chart='{chart}']\"))"
        ".scales.y.ticks.map((tick) => tick.value)"
    )


def test_at_390_px_no_main_page_is_wider_than_the_screen(page, live_server, admin_user, world):
    problems = watch(page)
    page.set_viewport_size({"width": PHONE, "height": 844})
    log_in(page, live_server, admin_user)
    wider = {}
    for path in pages(world):
        page.goto(live_server.url + path)
        width = page.evaluate("document.scrollingElement.scrollWidth")
        if width > PHONE:
            wider[path] = width
    assert not wider, wider
    page.goto(live_server.url + reverse("dashboard"))
    screenshot(page, "layout-dashboard-390")
    # The top bar's links wrap onto more lines instead of running off the screen.
    assert box(page, ".mainnav a:last-child")["x"] + box(page, ".mainnav a:last-child")["width"] <= PHONE
    assert not problems.console_errors and not problems.failed_responses, (
        problems.console_errors,
        problems.failed_responses,
    )


def test_tables_and_results_stay_in_their_cards(page, live_server, admin_user, world):
    page.set_viewport_size({"width": LAPTOP, "height": 900})
    log_in(page, live_server, admin_user)
    for path, width in ((reverse("evaluations:leaderboard"), LAPTOP), (reverse("dashboard"), SMALL_LAPTOP)):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + path)
        scroll = page.locator(".table-scroll:has(.leaderboard-table)")
        assert scroll.evaluate("(el) => el.scrollWidth <= el.clientWidth"), (path, width)
        repeats = box(page, ".leaderboard-table th:last-child")
        assert page.inner_text(".leaderboard-table th:last-child") == "Repeats"
        assert repeats["x"] + repeats["width"] <= scroll.bounding_box()["x"] + scroll.bounding_box()["width"], path

    # A failed connection test's message (long: four attempts, the error) wraps inside the Models page's card.
    page.set_viewport_size({"width": LAPTOP, "height": 900})
    endpoint("unreachable")  # 127.0.0.1:9: refused, retried, then the error
    page.goto(live_server.url + reverse("llm:endpoints"))
    page.click("#endpoint-unreachable button:has-text('Test connection')")
    page.wait_for_selector("#check-unreachable .error", timeout=60_000)
    screenshot(page, "layout-endpoint-test")
    card = page.locator("section.card:has(.endpoint-table)")
    assert card.evaluate("(el) => el.querySelector('table').scrollWidth <= el.clientWidth")
    result, card_box = box(page, "#check-unreachable"), card.bounding_box()
    assert result["x"] + result["width"] <= card_box["x"] + card_box["width"]


def test_chart_axes_start_where_their_figures_do(page, live_server, admin_user, world):
    log_in(page, live_server, admin_user)
    compare = reverse("evaluations:compare") + f"?a={world['a'].pk}&b={world['b'].pk}"
    for width in (SMALL_LAPTOP, LAPTOP):  # at 1024 px Chart.js thinned -1…1 by 0.2 to -1, -0.6, -0.2, 0.2, …
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live_server.url + compare)
        assert 0 in y_ticks(page, "chart-compare"), width
    # A flat loss of 0 on an axis from 0 (not from -1).
    page.goto(live_server.url + reverse("training:run", args=[world["flat"].pk]))
    ticks = y_ticks(page, "chart-loss")
    assert min(ticks) == 0 and max(ticks) > 0


def test_number_inputs_look_like_text_inputs_and_input_files_are_named_in_words(page, live_server, admin_user, world):
    log_in(page, live_server, admin_user)
    style = "(el) => ['height', 'padding', 'border', 'borderRadius', 'font'].map((key) => getComputedStyle(el)[key])"
    form = page.locator("#dataset-build-form")
    number, text = form.locator("input[name=min_reward]"), form.locator("input[name=name]")
    assert number.get_attribute("type") == "number" and text.get_attribute("type") == "text"
    assert number.evaluate(style) == text.evaluate(style)
    page.goto(live_server.url + reverse("tasks:detail", args=[world["task"].external_id]))
    assert "Input file (starting workspace)" in page.inner_text("main")
    assert "(s0)" not in page.inner_text("main")
