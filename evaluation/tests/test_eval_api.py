"""The evaluation-run API (evaluation.api.runs): lists, detail, start/reuse, resume, cancel, regrade, threshold, the
per-task rows, rollouts, exports, comparison and leaderboard, and who may do what.

Runs are built without the sandbox: created through evaluation.services.runs with their rollouts queued, then each
rollout is given its final state as a worker would leave it and `rollout_changed` called, which keeps the figures and
finishes the run. So every figure here is computed by hand from the scores below.
"""

import csv
import io
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import OrmQ
from rest_framework.test import APIClient

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation import reports
from evaluation.exports import CSV_COLUMNS
from evaluation.harnesses import ExitReason
from evaluation.job_kinds import REGRADE_JOB, ROLLOUT_JOB
from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress, runs
from evaluation.testing import RIGHT, WRONG, make_tasks
from jobs.models import JobRun
from llm.models import ModelEndpoint

pytestmark = pytest.mark.django_db

RUNS = "/api/eval-runs/"
# Input tokens of each rollout of a task (and 1 output token): the tokens sort is known.
TOKENS = {"eval-a": 40, "eval-b": 10, "eval-c": 30, "eval-d": 20}
# Scores by repeat (None: the infrastructure failed it, attempts used up). Strong solves a, b, c; weak only a.
STRONG = {"eval-a": [RIGHT, RIGHT], "eval-b": [RIGHT, RIGHT], "eval-c": [RIGHT, RIGHT], "eval-d": [WRONG, WRONG]}
WEAK = {"eval-a": [RIGHT, RIGHT], "eval-b": [WRONG, WRONG], "eval-c": [WRONG, WRONG], "eval-d": [WRONG, WRONG]}
MIXED = {"eval-a": [1.0, 0.5], "eval-b": [0.25, 0.25], "eval-c": [1.0, 1.0], "eval-d": [None, None]}


def _endpoint(name: str, model: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(name=name, base_url="http://127.0.0.1:9/v1", model=model, roles=["agent"])


@pytest.fixture
def world(db):
    revisions = make_tasks()
    benchmark = Benchmark.objects.create(name="fruitbench")
    v1 = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    for revision in revisions.values():
        PinnedRevision.objects.create(version=v1, revision=revision)
    return SimpleNamespace(
        revisions=revisions,
        benchmark=benchmark,
        v1=v1,
        strong=_endpoint("strong", "strong-model"),
        weak=_endpoint("weak", "weak-model"),
        flaky=_endpoint("flaky", "flaky-model"),
    )


def play(run: EvalRun, scores: dict) -> EvalRun:
    """Finish every rollout of the run with scores[task][repeat], as a worker would, and let the run follow."""
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    for rollout in run.rollouts.select_related("revision__task"):
        task = rollout.revision.task.external_id
        score = scores[task][rollout.repeat_index]
        if score is None:  # every attempt the run allows failed for the infrastructure: never retried again
            fields = {
                "status": Rollout.Status.FAILED,
                "exit_reason": ExitReason.UPSTREAM_ERROR,
                "attempt": run.max_attempts,
                "error": "the model server failed",
            }
        else:
            fields = {
                "status": Rollout.Status.SCORED,
                "exit_reason": ExitReason.COMPLETED,
                "score": score,
                "attempt": 1,
                "input_tokens": TOKENS[task],
                "output_tokens": 1,
                "cost": "0.01",
            }
        Rollout.objects.filter(pk=rollout.pk).update(finished_at=timezone.now(), **fields)
        run_progress.rollout_changed(rollout.pk)
    run.refresh_from_db()
    return run


def finished_run(world, endpoint, scores, *, version=None, user=None, repeats=2, **settings) -> EvalRun:
    version = version or world.v1
    run, reused = runs.create_eval_run(
        endpoint=endpoint,
        benchmark_version=version,
        harness="builtin",
        repeats=repeats,
        user=user,
        max_attempts=1,
        **settings,
    )
    assert not reused
    return play(run, scores)


@pytest.fixture
def admin_api(api_as, admin_user):
    return api_as(admin_user)


@pytest.fixture
def viewer_api(api_as, viewer):
    return api_as(viewer)


@pytest.fixture
def reviewer_api(api_as, reviewer):
    return api_as(reviewer)


# --- reading ----------------------------------------------------------------------------------------------------


def test_the_list_is_newest_first_with_progress_and_means_and_filters(world, viewer_api, admin_user):
    strong = finished_run(world, world.strong, STRONG, user=admin_user)
    weak = finished_run(world, world.weak, WEAK)
    mixed = finished_run(world, world.flaky, MIXED)
    assert (strong.status, weak.status, mixed.status) == ("complete", "complete", "incomplete")

    response = viewer_api.get(RUNS)
    assert response.status_code == 200, response.content
    rows = response.json()["results"]
    assert [r["id"] for r in rows] == [mixed.pk, weak.pk, strong.pk]
    row = rows[2]
    assert row["url"].endswith(f"{RUNS}{strong.pk}/")
    assert {
        k: row[k]
        for k in (
            "name",
            "status",
            "endpoint",
            "harness",
            "benchmark",
            "version",
            "repeats",
            "progress",
            "overall_mean",
            "created_by",
        )
    } == {
        "name": "strong on fruitbench v1",
        "status": "complete",
        "endpoint": "strong",
        "harness": "builtin",
        "benchmark": "fruitbench",
        "version": 1,
        "repeats": 2,
        "progress": {"finished": 8, "total": 8, "percent": 100},
        "overall_mean": pytest.approx((3 * RIGHT + WRONG) / 4),
        "created_by": "ada_admin",
    }
    assert row["created_at"]

    def ids(query):
        response = viewer_api.get(f"{RUNS}?{query}")
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert ids("status=incomplete") == [mixed.pk]
    assert ids("endpoint=weak") == [weak.pk]
    assert ids("benchmark=fruitbench&version=1") == [mixed.pk, weak.pk, strong.pk]
    assert ids("benchmark=fruitbench&version=2") == [] and ids("benchmark=other") == []
    misspelt = viewer_api.get(f"{RUNS}?staus=complete")
    assert misspelt.status_code == 400 and "staus" in misspelt.json()
    assert viewer_api.get(f"{RUNS}?status=finished").status_code == 400


def test_the_detail_is_the_evaluate_json_shape_with_the_settings(world, viewer_api, admin_user):
    run = finished_run(
        world, world.strong, STRONG, user=admin_user, limits={"timeout": 60}, options={"tool_timeout": 30}
    )
    response = viewer_api.get(f"{RUNS}{run.pk}/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert {k: v for k, v in body.items() if k in reports.run_json(run)} == reports.run_json(run)
    assert body["run"] == run.pk and body["status"] == "complete"
    assert {t: f["mean"] for t, f in body["tasks"].items()} == {t: s[0] for t, s in STRONG.items()}
    assert body["overall"]["mean"] == pytest.approx(0.9375)
    assert body["categories"]["analysis-reasoning"]["mean"] == RIGHT
    assert body["categories"]["uncategorized"]["mean"] == WRONG
    assert body["pass_at_k"] == {"1": 0.75, "2": 0.75}
    assert body["outcomes"] == {"scored": 8, "agent_limit": 0, "agent_error": 0, "judge_incomplete": 0, "infra": 0}
    assert body["tokens"] == 2 * sum(TOKENS.values()) + 8 and body["cost"] == pytest.approx(0.08)
    assert body["progress"] == {"finished": 8, "total": 8, "percent": 100}
    assert (body["benchmark"], body["version"], body["benchmark_version"]) == ("fruitbench", 1, "fruitbench v1")
    assert body["limits"] == {"timeout": 60} and body["harness_options"] == {"tool_timeout": 30}
    assert body["pass_threshold"] == 1.0 and body["max_attempts"] == 1 and body["resumes"] == []
    assert body["config"] == run.config and body["config"]["repeats"] == 2
    assert body["created_by"] == "ada_admin" and body["created_at"] and body["started_at"] and body["finished_at"]
    assert viewer_api.get(f"{RUNS}999999/").status_code == 404


def test_the_task_rows_sort_by_mean_std_and_tokens_with_unscored_tasks_last(world, viewer_api):
    run = finished_run(world, world.flaky, MIXED)

    def order(sort):
        response = viewer_api.get(f"{RUNS}{run.pk}/tasks/?sort={sort}")
        assert response.status_code == 200, response.content
        return [r["task"] for r in response.json()["results"]]

    assert order("task") == ["eval-a", "eval-b", "eval-c", "eval-d"]
    assert order("mean") == ["eval-b", "eval-a", "eval-c", "eval-d"]
    assert order("-mean") == ["eval-c", "eval-a", "eval-b", "eval-d"]
    assert order("std") == ["eval-b", "eval-c", "eval-a", "eval-d"]
    assert order("-std") == ["eval-a", "eval-b", "eval-c", "eval-d"]
    assert order("tokens") == ["eval-d", "eval-b", "eval-c", "eval-a"]
    assert order("-tokens") == ["eval-a", "eval-c", "eval-b", "eval-d"]

    rows = {r["task"]: r for r in viewer_api.get(f"{RUNS}{run.pk}/tasks/").json()["results"]}
    a = rows["eval-a"]
    assert (a["revision"], a["category"], a["hybrid"], a["scores"], a["n"]) == (
        1,
        "analysis-reasoning",
        False,
        [1.0, 0.5],
        2,
    )
    assert (a["mean"], a["min"], a["max"], a["passes"]) == (0.75, 0.5, 1.0, 1)
    assert a["std"] == pytest.approx(0.353553, abs=1e-6)
    assert (a["tokens"], a["input_tokens"], a["output_tokens"], a["cost"]) == (82, 80, 2, pytest.approx(0.02))
    assert a["outcomes"]["scored"] == 2
    d = rows["eval-d"]
    assert (d["category"], d["scores"], d["n"], d["mean"], d["std"], d["outcomes"]["infra"]) == (
        "uncategorized",
        [None, None],
        0,
        None,
        None,
        2,
    )
    assert viewer_api.get(f"{RUNS}{run.pk}/tasks/?sort=cost").status_code == 400
    unknown = viewer_api.get(f"{RUNS}{run.pk}/tasks/?order=mean")
    assert unknown.status_code == 400 and "order" in unknown.json()


def test_the_rollouts_are_paginated_rollout_rows_by_task_and_repeat(world, viewer_api):
    run = finished_run(world, world.flaky, MIXED)
    response = viewer_api.get(f"{RUNS}{run.pk}/rollouts/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 8
    assert [(r["task"], r["repeat_index"]) for r in body["results"]] == [
        (t, i) for t in sorted(MIXED) for i in range(2)
    ]
    assert body["results"][0]["url"].endswith(f"/api/rollouts/{body['results'][0]['id']}/")
    infra = viewer_api.get(f"{RUNS}{run.pk}/rollouts/?outcome=infra").json()["results"]
    assert {(r["task"], r["status"]) for r in infra} == {("eval-d", "failed")}
    assert viewer_api.get(f"{RUNS}{run.pk}/rollouts/?task=eval-b&page=1").json()["count"] == 2
    assert viewer_api.get(f"{RUNS}{run.pk}/rollouts/?repeat=1").status_code == 400


# --- starting, resuming, cancelling -----------------------------------------------------------------------------


START = {"benchmark": "fruitbench", "endpoint": "strong", "harness": "builtin", "repeats": 2, "limits": {"timeout": 60}}


def test_starting_a_run_queues_one_job_per_rollout_and_the_same_config_reuses_it(
    world, admin_api, admin_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(RUNS, START, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    run = EvalRun.objects.get(pk=body["run"])
    assert body["reused"] is False and response["Location"].endswith(f"{RUNS}{run.pk}/")
    assert (body["status"], body["benchmark_version"], body["limits"], body["progress"]) == (
        "running",
        "fruitbench v1",
        {"timeout": 60},
        {"finished": 0, "total": 8, "percent": 0},
    )
    assert run.benchmark_version == world.v1 and run.created_by == admin_user
    rollouts = list(run.rollouts.select_related("job_run"))
    assert len(rollouts) == 8 and {r.status for r in rollouts} == {"queued"}
    assert {r.harness_options["timeout"] for r in rollouts} == {60}
    assert all(r.job_run.kind == ROLLOUT_JOB and r.job_run.params == {"rollout_id": r.pk} for r in rollouts)
    assert OrmQ.objects.count() == 8  # handed to django-q

    with django_capture_on_commit_callbacks(execute=True):
        again = admin_api.post(RUNS, {**START, "version": 1, "name": "another name"}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["reused"] is True and again.json()["run"] == run.pk
    assert run.rollouts.count() == 8 and len(again.json()["resumes"]) == 1
    assert OrmQ.objects.count() == 8  # its queued rollouts still have their jobs

    with django_capture_on_commit_callbacks(execute=True):
        fresh = admin_api.post(RUNS, {**START, "fresh": True}, format="json")
    assert fresh.status_code == 201 and fresh.json()["run"] != run.pk

    listed = admin_api.post(RUNS, {"tasks": ["eval-c", "eval-a"], "endpoint": "weak", "name": "two"}, format="json")
    assert listed.status_code == 201, listed.content
    two = EvalRun.objects.get(pk=listed.json()["run"])
    assert two.benchmark_version is None and two.name == "two" and listed.json()["benchmark"] is None
    assert sorted(two.rollouts.values_list("revision__task__external_id", flat=True)) == ["eval-a", "eval-c"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"endpoint": "strong"}, "benchmark"),
        ({**START, "endpoint": "nobody"}, "endpoint"),
        ({**START, "tasks": ["eval-a"]}, "tasks"),
        ({**START, "version": 7}, "version"),
        ({**START, "benchmark": "nonesuch"}, "benchmark"),
        ({"tasks": ["eval-a", "no-such-task"], "endpoint": "strong"}, "tasks"),
        ({**START, "limits": {"wall_clock": 5}}, "limits"),
        ({**START, "limits": {"timeout": 0}}, "limits"),
        ({**START, "repeats": 0}, "repeats"),
        ({**START, "harness": "nonesuch"}, "harness"),
        ({**START, "pass_threshold": 0}, "pass_threshold"),
        ({"tasks": ["eval-a"], "version": 1, "endpoint": "strong"}, "version"),
    ],
)
def test_a_bad_start_is_a_400_naming_the_field_and_starts_nothing(world, admin_api, body, field):
    response = admin_api.post(RUNS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not EvalRun.objects.exists() and not JobRun.objects.exists()


def test_a_start_the_runs_service_refuses_is_a_400_with_its_reason(world, admin_api):
    response = admin_api.post(RUNS, {**START, "options": {"timeout": 5}}, format="json")
    assert response.status_code == 400 and "as limits" in response.json()["detail"]
    # A misspelt option would be ignored and the run would not be the experiment asked for.
    response = admin_api.post(RUNS, {**START, "harness": "builtin", "options": {"max_turn": 2}}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("the builtin harness takes no option max_turn; its options: ")
    limited = {**START, "harness": "openclaw", "limits": {"max_turns": 5}}
    response = admin_api.post(RUNS, limited, format="json")
    assert response.status_code == 400 and "it has no turn limit of its own" in response.json()["detail"]
    world.strong.enabled = False
    world.strong.save()
    response = admin_api.post(RUNS, START, format="json")
    assert response.status_code == 400 and "disabled" in response.json()["detail"]
    assert not EvalRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_is_a_503(world, admin_api, settings):
    settings.CLAWGYM_JOB_ENGINE = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    response = admin_api.post(RUNS, START, format="json")
    assert response.status_code == 503, response.content
    assert "could not start" in response.json()["detail"]
    assert JobRun.objects.filter(status=JobRun.Status.FAILED).exists()


def test_a_resume_with_another_configuration_is_a_409_naming_what_differs(world, admin_api):
    run_id = admin_api.post(RUNS, START, format="json").json()["run"]
    resume = f"{RUNS}{run_id}/resume/"

    differs = admin_api.post(resume, {"repeats": 3}, format="json")
    assert differs.status_code == 409 and "repeats differ" in differs.json()["detail"]
    differs = admin_api.post(resume, {"endpoint": "weak", "limits": {}}, format="json")
    assert differs.status_code == 409 and "endpoint, limits, model differ" in differs.json()["detail"]
    differs = admin_api.post(resume, {"tasks": ["eval-a", "eval-b", "eval-c", "eval-d"]}, format="json")
    assert differs.status_code == 409 and "benchmark_version differ" in differs.json()["detail"]
    assert EvalRun.objects.get(pk=run_id).resumes == []

    same = admin_api.post(resume, {**START, "version": 1}, format="json")
    assert same.status_code == 200, same.content
    bare = admin_api.post(resume)
    assert bare.status_code == 200 and len(bare.json()["resumes"]) == 2
    assert bare.json()["resumes"][-1]["by"] == "ada_admin"
    assert admin_api.post(resume, {"repeats": 0}, format="json").status_code == 400


def test_a_resume_runs_again_what_failed(world, admin_api):
    run = finished_run(world, world.flaky, MIXED)
    assert run.status == "incomplete"
    response = admin_api.post(f"{RUNS}{run.pk}/resume/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "running"
    again = run.rollouts.filter(status="queued").select_related("job_run", "revision__task")
    assert {r.revision.task.external_id for r in again} == {"eval-d"} and again.count() == 2
    assert all(r.job_run.kind == ROLLOUT_JOB for r in again)
    assert run.rollouts.filter(status="scored").count() == 6  # the finished ones are kept


def test_cancelling_stops_the_queued_rollouts_and_a_finished_run_is_a_409(world, admin_api):
    run_id = admin_api.post(RUNS, START, format="json").json()["run"]
    response = admin_api.post(f"{RUNS}{run_id}/cancel/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    run = EvalRun.objects.get(pk=run_id)
    assert set(run.rollouts.values_list("status", flat=True)) == {"cancelled"}
    assert set(JobRun.objects.filter(kind=ROLLOUT_JOB).values_list("status", flat=True)) == {"cancelled"}
    again = admin_api.post(f"{RUNS}{run_id}/cancel/")
    assert again.status_code == 409 and "already finished" in again.json()["detail"]


def test_the_pass_threshold_changes_pass_at_k(world, admin_api, reviewer_api):
    run = finished_run(world, world.strong, STRONG)
    threshold = f"{RUNS}{run.pk}/threshold/"
    assert admin_api.get(f"{RUNS}{run.pk}/").json()["pass_at_k"] == {"1": 0.75, "2": 0.75}
    response = admin_api.post(threshold, {"pass_threshold": WRONG}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["pass_threshold"] == WRONG and response.json()["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert admin_api.get(f"{RUNS}{run.pk}/tasks/").json()["results"][3]["passes"] == 2
    for bad in (0, 1.5, "high"):
        refused = admin_api.post(threshold, {"pass_threshold": bad}, format="json")
        assert refused.status_code == 400 and "pass_threshold" in refused.json()
    assert reviewer_api.post(threshold, {"pass_threshold": 0.5}, format="json").status_code == 403
    assert EvalRun.objects.get(pk=run.pk).pass_threshold == WRONG


# --- regrade ----------------------------------------------------------------------------------------------------


def test_regrade_queues_the_job_for_the_run_or_one_task_and_reviewers_may_do_one_task(
    world, admin_api, reviewer_api, viewer_api
):
    run = finished_run(world, world.strong, STRONG)
    regrade = f"{RUNS}{run.pk}/regrade/"

    refused = reviewer_api.post(regrade, {}, format="json")
    assert refused.status_code == 403 and "one task" in refused.json()["detail"]
    assert viewer_api.post(regrade, {"task": "eval-b"}, format="json").status_code == 403
    assert not JobRun.objects.filter(kind=REGRADE_JOB).exists()

    one = reviewer_api.post(regrade, {"task": "eval-b"}, format="json")
    assert one.status_code == 202, one.content
    job = JobRun.objects.get(pk=one.json()["id"])
    # Every rollout of the task, in every run: whoever fixed its checker sees each model's score change.
    assert (job.kind, job.params, job.status, job.queue) == (REGRADE_JOB, {"task_id": "eval-b"}, "queued", "sandbox")

    whole = admin_api.post(regrade)
    assert whole.status_code == 202, whole.content
    assert JobRun.objects.get(pk=whole.json()["id"]).params == {"run_id": run.pk}

    unknown = admin_api.post(regrade, {"task": "eval-z"}, format="json")
    assert unknown.status_code == 400 and "task" in unknown.json()
    one_task, _ = runs.create_eval_run(
        endpoint=world.weak, revisions=[world.revisions["eval-a"]], harness="builtin", user=None
    )
    other = reviewer_api.post(f"{RUNS}{one_task.pk}/regrade/", {"task": "eval-b"}, format="json")
    assert other.status_code == 400 and "not a task of run" in other.json()["task"][0]
    queued, _ = runs.create_eval_run(endpoint=world.weak, benchmark_version=world.v1, harness="builtin", user=None)
    nothing = admin_api.post(f"{RUNS}{queued.pk}/regrade/")
    assert nothing.status_code == 409 and "no finished rollout" in nothing.json()["detail"]
    assert JobRun.objects.filter(kind=REGRADE_JOB).count() == 2


# --- export, compare, leaderboard -------------------------------------------------------------------------------


def test_the_csv_export_has_a_header_and_one_row_per_rollout(world, viewer_api):
    run = finished_run(world, world.flaky, MIXED)
    response = viewer_api.get(f"{RUNS}{run.pk}/export/?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="eval-run-{run.pk}.csv"'
    text = b"".join(response.streaming_content).decode()
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    assert reader.fieldnames == CSV_COLUMNS and len(rows) == run.rollouts.count() == 8
    assert {(r["task"], r["repeat"], r["score"], r["outcome"]) for r in rows} == {
        (t, str(i), "" if s is None else str(s), "infra" if s is None else "scored")
        for t, scores in MIXED.items()
        for i, s in enumerate(scores)
    }


def test_the_json_export_has_the_figures_settings_and_every_rollout(world, viewer_api):
    run = finished_run(world, world.strong, STRONG, limits={"max_turns": 9})
    response = viewer_api.get(f"{RUNS}{run.pk}/export/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="eval-run-{run.pk}.json"'
    body = response.json()
    assert body["run"] == run.pk and body["limits"] == {"max_turns": 9} and body["config"] == run.config
    assert len(body["rollouts"]) == 8 and {r["score"] for r in body["rollouts"]} == {RIGHT, WRONG}
    assert viewer_api.get(f"{RUNS}{run.pk}/export/?format=json").json() == body
    bad = viewer_api.get(f"{RUNS}{run.pk}/export/?format=xlsx")
    assert bad.status_code == 400 and "format" in bad.json()
    assert viewer_api.get(f"{RUNS}{run.pk}/export/?as=csv").status_code == 400


def test_compare_gives_the_paired_figures_and_the_flipped_tasks(world, viewer_api):
    strong = finished_run(world, world.strong, STRONG)
    weak = finished_run(world, world.weak, WEAK)
    response = viewer_api.get(f"{RUNS}compare/?a={strong.pk}&b={weak.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["a"], body["b"], body["tasks_compared"], body["tasks_not_compared"]) == (strong.pk, weak.pk, 4, [])
    assert body["mean_difference"] == pytest.approx((3 * RIGHT + WRONG) / 4 - (RIGHT + 3 * WRONG) / 4)
    assert body["flipped"] == {"a_only": ["eval-b", "eval-c"], "b_only": []}
    assert body["categories"] == {
        "analysis-reasoning": pytest.approx((RIGHT - WRONG) / 2),
        "systems-automation": pytest.approx(RIGHT - WRONG),
        "uncategorized": 0.0,
    }
    lo, hi = body["ci"]
    assert lo <= body["mean_difference"] <= hi and 0 <= body["p_value"] <= 1
    assert {r["task"]: r["difference"] for r in body["per_task"]}["eval-b"] == pytest.approx(RIGHT - WRONG)
    flipped = viewer_api.get(f"{RUNS}compare/?a={weak.pk}&b={strong.pk}").json()
    assert flipped["flipped"] == {"a_only": [], "b_only": ["eval-b", "eval-c"]}

    other, _ = runs.create_eval_run(
        endpoint=world.weak, revisions=[world.revisions["eval-a"]], harness="builtin", user=None
    )
    refused = viewer_api.get(f"{RUNS}compare/?a={strong.pk}&b={other.pk}")
    assert refused.status_code == 400 and "same benchmark version" in refused.json()["detail"]
    missing = viewer_api.get(f"{RUNS}compare/?a={strong.pk}&b=999999")
    assert missing.status_code == 400 and "b" in missing.json()
    assert viewer_api.get(f"{RUNS}compare/?a={strong.pk}").status_code == 400
    assert viewer_api.get(f"{RUNS}compare/?a={strong.pk}&b={weak.pk}&c=1").status_code == 400


def test_the_leaderboard_has_complete_runs_only_best_first_on_the_latest_version(world, viewer_api):
    strong = finished_run(world, world.strong, STRONG)
    weak = finished_run(world, world.weak, WEAK)
    incomplete = finished_run(world, world.flaky, MIXED)
    assert incomplete.status == "incomplete"

    response = viewer_api.get("/api/leaderboard/?benchmark=fruitbench&version=1")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["benchmark"], body["version"]) == ("fruitbench", 1)
    assert [e["run"] for e in body["entries"]] == [strong.pk, weak.pk]
    top = body["entries"][0]
    assert (top["endpoint"], top["model"], top["harness"]) == ("strong", "strong-model", "builtin")
    assert top["overall"]["mean"] == pytest.approx(0.9375) and top["tokens"] == 2 * sum(TOKENS.values()) + 8

    v2 = BenchmarkVersion.objects.create(benchmark=world.benchmark, number=2)
    PinnedRevision.objects.create(version=v2, revision=world.revisions["eval-a"])
    latest = finished_run(world, world.weak, {"eval-a": [RIGHT]}, version=v2, repeats=1)
    body = viewer_api.get("/api/leaderboard/?benchmark=fruitbench").json()
    assert body["version"] == 2 and [e["run"] for e in body["entries"]] == [latest.pk]

    missing = viewer_api.get("/api/leaderboard/?benchmark=nonesuch")
    assert missing.status_code == 400 and "benchmark" in missing.json()
    assert viewer_api.get("/api/leaderboard/?benchmark=fruitbench&version=5").status_code == 400
    assert viewer_api.get("/api/leaderboard/").status_code == 400
    assert viewer_api.get("/api/leaderboard/?benchmark=fruitbench&sort=cost").status_code == 400


# --- who may -------------------------------------------------------------------------------------------------------


def test_reads_need_the_viewer_role_and_writes_the_admin_role(world, api_as, viewer, reviewer, outsider):
    run = finished_run(world, world.strong, STRONG)
    reads = [
        RUNS,
        f"{RUNS}{run.pk}/",
        f"{RUNS}{run.pk}/tasks/",
        f"{RUNS}{run.pk}/rollouts/",
        f"{RUNS}{run.pk}/export/?format=csv",
        f"{RUNS}compare/?a={run.pk}&b={run.pk}",
        "/api/leaderboard/?benchmark=fruitbench",
    ]
    writes = [
        (RUNS, START),
        (f"{RUNS}{run.pk}/resume/", {}),
        (f"{RUNS}{run.pk}/cancel/", {}),
        (f"{RUNS}{run.pk}/threshold/", {"pass_threshold": 0.5}),
    ]
    anonymous = APIClient()
    for url in reads:
        assert anonymous.get(url).status_code == 401, url
        assert api_as(outsider).get(url).status_code == 403, url
        assert api_as(viewer).get(url).status_code == 200, url
    for user in (viewer, reviewer):
        for url, body in writes:
            assert api_as(user).post(url, body, format="json").status_code == 403, (user, url)
    for url, body in writes:
        assert anonymous.post(url, body, format="json").status_code == 401, url
    assert EvalRun.objects.count() == 1 and EvalRun.objects.get().resumes == []
    assert EvalRun.objects.get().pass_threshold == 1.0


def test_the_openapi_schema_builds_with_the_evaluation_run_endpoints(viewer_api, tmp_path):
    out = tmp_path / "schema.yml"
    # Warnings anywhere in the schema fail tasks/tests/test_api.py's schema test; this one checks these paths.
    call_command("spectacular", "--validate", "--file", str(out))
    schema = out.read_text()
    for path in (
        "/api/eval-runs/",
        "/api/eval-runs/{id}/",
        "/api/eval-runs/{id}/resume/",
        "/api/eval-runs/{id}/cancel/",
        "/api/eval-runs/{id}/regrade/",
        "/api/eval-runs/{id}/threshold/",
        "/api/eval-runs/{id}/tasks/",
        "/api/eval-runs/{id}/rollouts/",
        "/api/eval-runs/{id}/export/",
        "/api/eval-runs/compare/",
        "/api/leaderboard/",
    ):
        assert f"  {path}:" in schema, path
    assert "PaginatedEvalRunTaskList" in schema and "text/csv" in schema
    assert viewer_api.get("/api/schema/").status_code == 200
