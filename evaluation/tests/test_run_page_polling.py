"""The run page of a running run as it is polled: its figures are those of an exact recomputation from the task
rows after each rollout that finishes (lib.polled_figures, keyed on the run's counters), and its tasks table is
shown a page at a time (TASKS_PAGE_SIZE rows), the polled partial keeping the page and the sort."""

import itertools
import re

import pytest
from django.core.cache import cache
from django.utils import timezone

from evaluation import reports
from evaluation.figures import run_figures
from evaluation.harnesses import ExitReason
from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress
from evaluation.testing import STRONG, endpoint, finished_run, freeze, make_tasks, text, url
from evaluation.views import runs as run_views
from lib import polled_figures

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def running(db):
    cache.clear()
    run = finished_run(endpoint("strong"), freeze(make_tasks().values()), STRONG, finish=False)
    assert run.status == EvalRun.Status.RUNNING
    yield run
    cache.clear()


def exact(run: EvalRun) -> dict:
    run.refresh_from_db()
    return without_tasks(run_figures(reports.task_rows(run), repeats=run.repeats, pass_threshold=run.pass_threshold))


def without_tasks(summary: dict) -> dict:
    """The figures the page shows: per task it reads the task rows themselves."""
    return {k: v for k, v in summary.items() if k != "tasks"}


def finish(rollout: Rollout, score: float) -> None:
    Rollout.objects.filter(pk=rollout.pk).update(
        status=Rollout.Status.SCORED,
        exit_reason=ExitReason.COMPLETED,
        score=score,
        attempt=1,
        input_tokens=50,
        output_tokens=5,
        finished_at=timezone.now(),
    )
    run_progress.rollout_changed(rollout.pk)


def test_each_poll_after_a_rollout_finishes_shows_the_exact_figures(running, viewer_client, monkeypatch):
    monkeypatch.setattr(polled_figures, "REUSE_FACTOR", 0)  # recompute on every change, however quick the polls
    assert without_tasks(viewer_client.get(url("detail", running.pk)).context["summary"]) == exact(running)
    queued = list(running.rollouts.filter(status=Rollout.Status.QUEUED).order_by("pk"))
    assert len(queued) == 4
    for rollout, score in zip(queued, [0.0, 0.25, 1.0, 0.5]):
        before = viewer_client.get(url("detail", running.pk), **HTMX).context["summary"]
        finish(rollout, score)
        shown = without_tasks(viewer_client.get(url("detail", running.pk), **HTMX).context["summary"])
        assert shown == exact(running)
        assert shown["repeat_means"] != before["repeat_means"]
    partial = text(viewer_client.get(url("detail", running.pk), **HTMX))
    # The last one finished the run.
    assert partial.startswith(f'<div id="run-live" data-status="complete" data-finished="run-{running.pk}">')


def test_a_slow_running_run_reuses_its_figures_for_a_while(running, viewer_client, monkeypatch):
    ticks = itertools.count(1000.0)  # a second passes between two readings of the clock: computing takes 1 s
    monkeypatch.setattr(polled_figures.time, "time", lambda: next(ticks))
    first = viewer_client.get(url("detail", running.pk), **HTMX)
    finish(running.rollouts.filter(status=Rollout.Status.QUEUED).first(), 0.0)
    second = viewer_client.get(url("detail", running.pk), **HTMX)
    assert second.context["summary"] == first.context["summary"] != exact(running)
    assert "5/8 rollouts" in text(second)  # the counters are the run's own: up to date on every poll


def test_the_tasks_table_is_shown_a_page_at_a_time(running, viewer_client, monkeypatch):
    monkeypatch.setattr(run_views, "TASKS_PAGE_SIZE", 3)
    shown = lambda response: re.findall(r'<tr data-task="([\w-]+)">', text(response))  # noqa: E731
    first = viewer_client.get(url("detail", running.pk, sort="-score"))
    assert shown(first) == ["eval-a", "eval-b", "eval-c"] and "Tasks 1–3 of 4 · page 1 of 2" in text(first)
    second = viewer_client.get(url("detail", running.pk, sort="-score", page=2), **HTMX)
    assert shown(second) == ["eval-d"] and "Tasks 4–4 of 4 · page 2 of 2" in text(second)
    assert 'hx-get="/evaluations/runs/' in text(second) or "page=2" in text(second)
    live = re.search(r'<div id="run-live"[^>]*>', text(second)).group(0)
    assert "sort=-score" in live and "page=2" in live and 'hx-trigger="every 2s"' in live
    assert "?sort=-score&amp;page=1" in text(second)  # back to the first page, keeping the sort
