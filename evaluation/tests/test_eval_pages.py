"""The evaluation pages: who may read and act, what the run page, the leaderboard, the comparison and the dashboard
panel show, the tasks table's sorts, a task's repeats, the exports. Runs are built quickly, without the sandbox: their
rollouts are given outcomes and scores directly and the figures recomputed (run_progress.recompute_run), as when they
ran.
"""

import csv
import io
import json
import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from evaluation import reports
from evaluation.models import EvalRun, EvalRunTask, Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import FLAKY, STRONG, WEAK, endpoint, finished_run, freeze, make_tasks, text, url
from jobs.models import JobRun
from llm.models import ModelEndpoint
from tasks.models import BenchmarkCategory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(db):
    revisions = make_tasks()
    version = freeze(revisions.values())
    strong, weak, flaky = endpoint("strong"), endpoint("weak"), endpoint("flaky")
    return {
        "version": version,
        "strong": finished_run(strong, version, STRONG),
        "weak": finished_run(weak, version, WEAK),
        "flaky": finished_run(flaky, version, FLAKY),
        "revisions": revisions,
    }


def category(slug: str) -> str:
    return escape(BenchmarkCategory.objects.get(slug=slug).name)


def task_order(response) -> list[str]:
    table = response.content.decode().split('id="tasks-table"')[1].split("</table>")[0]
    return re.findall(r'<tr data-task="([^"]+)"', table)


# --- roles ---------------------------------------------------------------------------------------------------------


def test_the_runs_are_what_the_scores_make_them(world):
    assert world["strong"].status == world["weak"].status == EvalRun.Status.COMPLETE
    assert world["flaky"].status == EvalRun.Status.INCOMPLETE
    assert world["strong"].overall_mean == pytest.approx(0.875)
    assert world["weak"].overall_mean == pytest.approx((1.0 + 0.75 + 0.625 + 0.25) / 4)


def test_viewers_read_every_page_and_outsiders_none(world, viewer_client, outsider_client):
    run = world["strong"]
    row = EvalRunTask.objects.filter(run=run).first()
    pages = [
        url("list"),
        url("detail", run.pk),
        url("repeats", run.pk, row.pk),
        url("leaderboard"),
        url("compare", a=run.pk, b=world["weak"].pk),
        url("export-json", run.pk),
        url("export-csv", run.pk),
        url("recent"),
        url("panel"),
        reverse("dashboard"),
    ]
    for page in pages:
        assert viewer_client.get(page).status_code == 200, page
        assert outsider_client.get(page).status_code == 403, page
    assert viewer_client.get(url("start")).status_code == 403


def test_reviewers_cannot_start_cancel_resume_or_regrade_a_run_but_may_regrade_a_task(
    world, reviewer_client, viewer_client
):
    run = world["strong"]
    version = world["version"]
    assert reviewer_client.get(url("start")).status_code == 403
    assert reviewer_client.post(url("start"), {"benchmark_version": version.pk}).status_code == 403
    for action in ("cancel", "resume", "threshold"):
        assert reviewer_client.post(url(action, run.pk), {"pass_threshold": 0.5}).status_code == 403, action
    assert reviewer_client.post(url("regrade", run.pk)).status_code == 403
    assert viewer_client.post(url("regrade", run.pk), {"task": "eval-b"}).status_code == 403
    assert not JobRun.objects.filter(kind="evaluation.regrade").exists()

    response = reviewer_client.post(url("regrade", run.pk), {"task": "eval-b"})
    job = JobRun.objects.get(kind="evaluation.regrade")
    assert job.params == {"task_id": "eval-b"}
    assert response.status_code == 302 and response.url == url("detail", run.pk, regrade=job.pk)
    # The run page follows the regrade: it shows the job and polls until the job has finished.
    page = reviewer_client.get(response.url)
    assert f'id="job-progress-{job.pk}"' in text(page) and 'hx-trigger="every 2s"' in text(page)
    JobRun.objects.filter(pk=job.pk).update(status=JobRun.Status.SUCCEEDED, finished_at=timezone.now())
    assert 'hx-trigger="every 2s"' not in text(reviewer_client.get(response.url))


def test_posts_need_the_csrf_token(world, admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(url("cancel", world["strong"].pk)).status_code == 403
    assert client.post(url("regrade", world["strong"].pk), {"task": "eval-a"}).status_code == 403


# --- starting ------------------------------------------------------------------------------------------------------


def test_an_admin_starts_a_run_and_the_same_settings_resume_it(world, admin_client):
    version = world["version"]
    form = {
        "benchmark_version": version.pk,
        "tasks": "",
        "endpoint": "weak",
        "harness": "builtin",
        "repeats": 3,
        "options": '{"tool_timeout": 60}',
        "timeout": 120,
        "max_turns": "",
        "token_limit": 5000,
        "pass_threshold": 0.75,
        "name": "weak x3",
    }
    response = admin_client.post(url("start"), form, follow=True)
    run = EvalRun.objects.get(name="weak x3")
    assert response.redirect_chain[-1][0] == url("detail", run.pk)
    assert "Started weak x3: 12 rollouts queued." in text(response)
    assert (run.repeats, run.harness_options, run.limits, run.pass_threshold) == (
        3,
        {"tool_timeout": 60},
        {"timeout": 120, "token_limit": 5000},
        0.75,
    )
    assert run.status == EvalRun.Status.RUNNING and run.rollouts.count() == 12
    # No worker seen yet: CLAWGYM_IN_FLIGHT_MIN (8) of them on the engine, the rest as those finish.
    assert JobRun.objects.filter(kind="evaluation.run_rollout").count() == 8
    assert 'hx-trigger="every 2s"' in text(response) and "Partial figures" in text(response)

    again = admin_client.post(url("start"), form, follow=True)
    assert again.redirect_chain[-1][0] == url("detail", run.pk)
    assert "is resumed instead" in text(again)
    assert EvalRun.objects.filter(name="weak x3").count() == 1


def test_a_run_over_task_ids_and_the_form_refusals(world, admin_client):
    base = {"endpoint": "strong", "harness": "builtin", "repeats": 1, "pass_threshold": 1.0, "options": ""}
    response = admin_client.post(url("start"), {**base, "tasks": "eval-a, eval-c"})
    run = EvalRun.objects.order_by("-pk").first()
    assert response.status_code == 302 and run.benchmark_version is None
    assert sorted(run.task_results.values_list("task__external_id", flat=True)) == ["eval-a", "eval-c"]

    both = admin_client.post(url("start"), {**base, "tasks": "eval-a", "benchmark_version": world["version"].pk})
    assert both.status_code == 400 and "one of the two" in text(both)
    unknown = admin_client.post(url("start"), {**base, "tasks": "eval-a nope"})
    assert unknown.status_code == 400 and "No task has the id nope" in text(unknown)
    bad_options = admin_client.post(url("start"), {**base, "tasks": "eval-a", "options": '{"timeout": 5}'})
    assert bad_options.status_code == 400 and "give timeout as limits" in text(bad_options)
    misspelt = admin_client.post(url("start"), {**base, "tasks": "eval-a", "options": '{"temperature": 0}'})
    assert misspelt.status_code == 400 and "the builtin harness takes no option temperature" in text(misspelt)


def test_only_agent_endpoints_are_offered(world, admin_client):
    ModelEndpoint.objects.create(name="judge-only", base_url="http://127.0.0.1:9/v1", model="j", roles=["judge"])
    page = text(admin_client.get(url("start")))
    assert '<option value="strong"' in page and "judge-only" not in page


# --- the run page --------------------------------------------------------------------------------------------------


def test_the_run_page_shows_the_figures(world, viewer_client):
    page = text(viewer_client.get(url("detail", world["strong"].pk)))
    assert '<p class="score big-figure" id="overall-mean">0.875</p>' in page
    lo, hi = world["strong"].summary["overall"]["ci"]
    assert f'<td id="overall-ci">{lo:.3f} – {hi:.3f}</td>' in page
    repeat_std = world["strong"].summary["overall"]["std_across_repeats"]
    assert repeat_std > 0 and f'<td id="overall-std">{repeat_std:.4f}</td>' in page
    # pass@1 = mean over tasks of (passing repeats / 2): a 1, b 0.5, c 1, d 0; pass^2: a and c.
    assert '<tr data-k="1"><td>1</td><td class="num">0.625</td><td class="num">0.625</td></tr>' in page
    assert '<tr data-k="2"><td>2</td><td class="num">0.750</td><td class="num">0.500</td></tr>' in page
    assert (
        f'data-category="analysis-reasoning"><td>{category("analysis-reasoning")}</td><td class="num"><span class="mean">0.875</span>'
        in page
    )
    assert 'data-category="uncategorized"><td>Uncategorized</td><td class="num"><span class="mean">0.750</span>' in page
    assert '<tr data-outcome="scored"><td>Scored</td><td class="num">8</td></tr>' in page
    assert 'data-chart="chart-categories"' in page and 'id="chart-categories"' in page
    assert 'data-chart="chart-distribution"' in page and "chart.umd.min.js" in page
    assert "Partial figures" not in page and 'hx-trigger="every 2s"' not in page
    categories = json.loads(re.search(r'id="chart-categories" type="application/json">(.*?)</script>', page).group(1))
    assert categories["labels"][-1] == "Uncategorized" and categories["datasets"][0]["data"][-1] == 0.75
    assert len(categories["datasets"][0]["low"]) == len(categories["labels"])


def test_an_incomplete_run_is_marked_partial_and_names_the_tasks_without_a_score(world, viewer_client):
    page = text(viewer_client.get(url("detail", world["flaky"].pk)))
    assert "Partial figures." in page and "1 task lacks a score for every repeat" in page
    assert 'href="/tasks/eval-d/">eval-d</a>' in page.split('id="partial-figures"')[1].split("</p>")[0]
    assert '<tr data-outcome="infra"><td>Infrastructure failure</td><td class="num">1</td></tr>' in page
    # eval-d has one scored repeat: no spread to show (not a 0.000 that reads as perfectly stable).
    row = page.split('<tr data-task="eval-d">')[1].split("</tr>")[0]
    assert '<td class="num" title="a sample standard deviation needs two scored repeats">—</td>' in row
    assert '<td class="num">0.000</td>' in page.split('<tr data-task="eval-a">')[1].split("</tr>")[0]


def test_the_tasks_table_sorts_by_score_std_and_tokens(world, viewer_client):
    run = world["strong"]
    assert task_order(viewer_client.get(url("detail", run.pk))) == ["eval-a", "eval-b", "eval-c", "eval-d"]
    assert task_order(viewer_client.get(url("detail", run.pk, sort="score"))) == [
        "eval-b",
        "eval-d",
        "eval-a",
        "eval-c",
    ]
    assert task_order(viewer_client.get(url("detail", run.pk, sort="-score"))) == [
        "eval-a",
        "eval-c",
        "eval-b",
        "eval-d",
    ]
    assert task_order(viewer_client.get(url("detail", run.pk, sort="std")))[0] == "eval-b"
    assert task_order(viewer_client.get(url("detail", run.pk, sort="tokens"))) == [
        "eval-d",
        "eval-c",
        "eval-b",
        "eval-a",
    ]
    assert task_order(viewer_client.get(url("detail", run.pk, sort="bogus"))) == [
        "eval-a",
        "eval-b",
        "eval-c",
        "eval-d",
    ]
    # htmx gets the live part alone, sorted.
    partial = viewer_client.get(url("detail", run.pk, sort="tokens"), **HTMX)
    assert text(partial).startswith('<div id="run-live"') and "<html" not in text(partial)
    assert task_order(partial) == ["eval-d", "eval-c", "eval-b", "eval-a"]


def test_a_task_row_opens_its_repeats_with_links_to_their_rollouts(world, viewer_client):
    run = world["flaky"]
    row = EvalRunTask.objects.get(run=run, task__external_id="eval-d")
    page = text(viewer_client.get(url("detail", run.pk)))
    assert f'hx-get="{url("repeats", run.pk, row.pk)}"' in page
    partial = text(viewer_client.get(url("repeats", run.pk, row.pk), **HTMX))
    assert partial.startswith('<table class="repeats-table"')
    for rollout in Rollout.objects.filter(eval_run=run, revision=row.revision):
        assert f'href="/rollouts/{rollout.pk}/"' in partial
    assert "Infrastructure failure" in partial and "Scored" in partial and "0.500" in partial
    # Another run's row is not this run's.
    other = EvalRunTask.objects.get(run=world["strong"], task__external_id="eval-d")
    assert viewer_client.get(url("repeats", run.pk, other.pk)).status_code == 404


def test_the_run_page_fetches_the_task_rows_in_one_query_whatever_their_number(
    world, viewer_client, django_assert_max_num_queries
):
    with django_assert_max_num_queries(14):
        viewer_client.get(url("detail", world["strong"].pk))


def test_a_running_run_page_polls_itself_and_stops_once_finished(world, viewer_client):
    run = finished_run(ModelEndpoint.objects.get(name="strong"), world["version"], STRONG, finish=False)
    assert run.status == EvalRun.Status.RUNNING
    page = text(viewer_client.get(url("detail", run.pk)))
    assert 'id="run-live" data-status="running" hx-get="' in page and 'hx-trigger="every 2s"' in page
    assert 'aria-valuenow="50"' in page and "4/8 rollouts" in page and "Partial figures." in page
    listing = text(viewer_client.get(url("list")))
    assert '<section id="runs" class="card" hx-get="' in listing
    panel = text(viewer_client.get(reverse("dashboard")))
    assert f'hx-get="{url("recent")}" hx-trigger="every 2s"' in panel

    Rollout.objects.filter(eval_run=run, repeat_index=1).update(
        status=Rollout.Status.SCORED, exit_reason="completed", score=1.0
    )
    run_progress.recompute_run(run)
    run_progress.rollout_changed(run.rollouts.first().pk)
    partial = text(viewer_client.get(url("detail", run.pk), **HTMX))
    finished = f'<div id="run-live" data-status="complete" data-finished="run-{run.pk}">'  # static/js/started.js
    assert partial.startswith(finished) and "every 2s" not in partial


# --- actions -------------------------------------------------------------------------------------------------------


def test_admins_cancel_resume_change_the_threshold_and_regrade(world, admin_client):
    run = finished_run(ModelEndpoint.objects.get(name="weak"), world["version"], WEAK, finish=False)
    page = text(admin_client.get(url("detail", run.pk)))
    # Running: Cancel asks first (static/js/confirm.js); nothing to resume yet.
    assert 'id="cancel-run" data-confirm="Cancel ' in page and url("resume", run.pk) not in page
    response = admin_client.post(url("cancel", run.pk), follow=True)
    run.refresh_from_db()
    assert run.status == EvalRun.Status.CANCELLED and "is cancelled" in text(response)
    assert run.rollouts.filter(status=Rollout.Status.CANCELLED).count() == 4
    assert url("resume", run.pk) in text(response) and 'id="cancel-run"' not in text(response)
    # A cancelled run has no score in the lists, although its finished rollouts had figures.
    assert run.overall_mean is not None
    listing = text(admin_client.get(url("list")))
    row = listing[listing.index(f'<tr data-run="{run.pk}">') :]
    assert (
        '<td class="num overall"><span class="muted" title="a cancelled run has no score">—</span></td>'
        in row[: row.index("</tr>")]
    )
    assert url("resume", world["strong"].pk) not in text(admin_client.get(url("detail", world["strong"].pk)))

    response = admin_client.post(url("resume", run.pk), follow=True)
    run.refresh_from_db()
    assert run.status == EvalRun.Status.RUNNING and "is resumed" in text(response)
    assert run.rollouts.filter(status=Rollout.Status.QUEUED).count() == 4

    strong = world["strong"]
    response = admin_client.post(url("threshold", strong.pk), {"pass_threshold": "0.75"}, follow=True)
    strong.refresh_from_db()
    assert strong.pass_threshold == 0.75 and strong.summary["pass_at_k"]["1"] == 0.875
    assert '<dd id="pass-threshold">0.75</dd>' in text(response)
    refused = admin_client.post(url("threshold", strong.pk), {"pass_threshold": "0"}, follow=True)
    assert "was not changed" in text(refused) and EvalRun.objects.get(pk=strong.pk).pass_threshold == 0.75

    response = admin_client.post(url("regrade", strong.pk))
    job = JobRun.objects.get(kind="evaluation.regrade")
    assert job.params == {"run_id": strong.pk} and response.url == url("detail", strong.pk, regrade=job.pk)


# --- exports -------------------------------------------------------------------------------------------------------


def test_the_exports_hold_the_figures_and_one_row_per_rollout(world, viewer_client):
    run = world["flaky"]
    response = viewer_client.get(url("export-json", run.pk))
    assert response["Content-Disposition"] == f'attachment; filename="eval-run-{run.pk}.json"'
    exported = json.loads(b"".join(response.streaming_content))
    assert exported["run"] == run.pk and exported["status"] == "incomplete"
    assert exported["tasks"]["eval-d"] == {"mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5, "n": 1}
    assert len(exported["rollouts"]) == 8

    response = viewer_client.get(url("export-csv", run.pk))
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 8 and {r["outcome"] for r in rows} == {"scored", "infra"}
    assert [r["score"] for r in rows if r["task"] == "eval-d"] == ["", "0.5"]


# --- leaderboard, comparison, dashboard ----------------------------------------------------------------------------


def test_the_leaderboard_takes_complete_runs_only(world, viewer_client):
    page = text(viewer_client.get(url("leaderboard")))  # the default: the latest version with a complete run
    body = page.split('id="board"')[1]
    assert re.findall(r'<tr data-endpoint="([^"]+)"', body) == ["strong", "weak"]
    assert "flaky" not in body.split("</table>")[0]
    assert "1 other run of this version (running, incomplete or cancelled) is left out" in page
    chart = json.loads(re.search(r'id="chart-leaderboard" type="application/json">(.*?)</script>', page).group(1))
    # The taxonomy's order, then the uncategorized tasks, then the overall score.
    names = list(
        BenchmarkCategory.objects.filter(slug__in=["analysis-reasoning", "systems-automation"]).values_list(
            "name", flat=True
        )
    )
    assert chart["labels"] == [*names, "Uncategorized", "Overall"]
    assert [d["label"] for d in chart["datasets"]] == ["strong · builtin", "weak · builtin"]
    strong = dict(zip(chart["labels"], chart["datasets"][0]["data"], strict=True))
    analysis, systems = (
        BenchmarkCategory.objects.get(slug=s).name for s in ("analysis-reasoning", "systems-automation")
    )
    assert strong == {analysis: 0.875, systems: 1.0, "Uncategorized": 0.75, "Overall": 0.875}
    assert chart["datasets"][1]["data"][-1] == pytest.approx(0.65625)
    # Another version, chosen: it has no complete run.
    other = freeze([world["revisions"]["eval-a"]], name="other-bench")
    page = text(viewer_client.get(url("leaderboard", version=other.pk), **HTMX))
    assert page.startswith('<section id="board"') and "No complete run on other-bench v1 yet." in page


def test_the_comparison_names_the_flipped_tasks_and_the_differences(world, viewer_client):
    strong, weak = world["strong"], world["weak"]
    page = text(viewer_client.get(url("compare", a=strong.pk, b=weak.pk)))
    expected = reports.compare_runs(strong, weak)
    assert expected["flipped"] == {"a_only": ["eval-c"], "b_only": []}
    assert f'<p class="score big-figure" id="mean-difference">{expected["mean_difference"]:.3f}</p>' in page
    assert expected["mean_difference"] == pytest.approx((0 + 0 + 0.375 + 0.5) / 4)
    assert f'<td id="p-value">{expected["p_value"]:.4f}' in page
    assert '<td id="tasks-compared">4' in page
    assert re.search(r'id="a-only"><li><a class="mono" href="/tasks/eval-c/">eval-c</a></li></ul>', page)
    assert 'id="b-only"><li class="muted">none</li>' in page
    assert (
        f'data-category="systems-automation"><td>{category("systems-automation")}</td><td class="num">0.375</td>'
        in page
    )
    assert re.findall(r'<tr data-task="([^"]+)"', page.split('id="per-task"')[1])[:2] == ["eval-d", "eval-c"]
    assert 'data-chart="chart-compare"' in page

    other = freeze([world["revisions"]["eval-a"]], name="other-bench")
    elsewhere, _ = runs.create_eval_run(endpoint=strong.endpoint, benchmark_version=other, harness="builtin", user=None)
    refused = text(viewer_client.get(url("compare", a=strong.pk, b=elsewhere.pk)))
    assert "not over the same benchmark version" in refused and "chart.umd.min.js" not in refused
    choose = text(viewer_client.get(url("compare")))
    assert f'<option value="{strong.pk}"' in choose and 'id="mean-difference"' not in choose


def test_the_dashboard_shows_per_category_scores_of_the_latest_complete_run_of_each_model(world, viewer_client):
    # A later complete run of the weak model replaces its earlier one on the dashboard.
    later = finished_run(ModelEndpoint.objects.get(name="weak"), world["version"], STRONG)
    page = text(viewer_client.get(reverse("dashboard")))
    panel = page.split('id="evaluation-panel"')[1]
    table = panel.split("</table>")[0]
    assert re.findall(r'<tr data-endpoint="([^"]+)"', table) == ["strong", "weak"]
    assert f'href="{url("detail", later.pk)}"' in table and f'href="{url("detail", world["weak"].pk)}"' not in table
    assert 'data-chart="chart-panel"' in panel and 'id="chart-panel" type="application/json"' in panel
    assert "chart.umd.min.js" in page and "js/charts.js" in page
    assert f'<option value="{world["version"].pk}" selected>' in panel
    recent = panel.split('id="recent-runs"')[1]
    assert f'href="{url("detail", later.pk)}"' in recent
    # The version select: the panel alone for htmx.
    other = freeze([world["revisions"]["eval-a"]], name="other-bench")
    alone = text(viewer_client.get(url("panel", version=other.pk), **HTMX))
    assert alone.startswith('<section class="card" id="evaluation-panel">')
    assert "No complete evaluation run on other-bench v1 yet." in alone
