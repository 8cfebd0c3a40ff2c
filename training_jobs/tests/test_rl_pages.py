"""An RL run's pages and API: the start form (admins; tasks by id or selection, a task mix, benchmark tasks refused),
the run page with its reward curve (mean ± std), loss, the step table (groups dropped, inexact samples, rollout p50/max,
skipped steps) and each step's rollouts linked to their pages, the dashboard panel with the latest reward, and the REST
API (start, list filters, detail with step metrics and rollout summaries, the rollouts of a step, cancel/resume/clone).
Metrics and RLRollout rows are written as the RL job writes them (the trainer itself is test_rl_runs')."""

import json
from html import unescape

import pytest
from django.urls import reverse

from accounts.testing import make_user
from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import Rollout
from llm.models import ModelEndpoint
from tasks.models import TaskRevision
from tasks.testing import make_task
from training_jobs.models import RLRollout, TrainingMetric, TrainingRun
from training_jobs.services.runs import start_training_run
from training_jobs.testing.rl_tasks import distinct_instruction

pytestmark = pytest.mark.django_db

# Two steps of 2 groups × 2 rollouts: step 2's second group dropped (one survivor of 2 with min_group_survivors 2).
STEP_METRICS = {
    1: {
        "reward_mean": 0.5,
        "reward_std": 0.25,
        "reward_spread": 0.5,
        "groups_dropped": 0,
        "groups": 2,
        "inexact_samples": 1,
        "samples": 4,
        "rollouts": 4,
        "rollout_p50_s": 3.5,
        "rollout_max_s": 9.25,
        "tokens_sampled": 120,
        "logprob_mismatch": 0.0003,
        "loss": 0.125,
        "clip_fraction": 0.0,
        "learning_rate": 1e-3,
    },
    2: {
        "reward_mean": 0.75,
        "reward_std": 0.5,
        "reward_spread": 0.25,
        "groups_dropped": 1,
        "groups": 2,
        "inexact_samples": 0,
        "samples": 3,
        "rollouts": 4,
        "rollout_p50_s": 4.0,
        "rollout_max_s": 12.5,
        "tokens_sampled": 96,
        "logprob_mismatch": None,
        "loss": -0.0625,
        "clip_fraction": 0.05,
        "learning_rate": 1e-3,
    },
}
REWARDS = {1: [[0.25, 0.75], [0.5, 0.5]], 2: [[0.5, 1.0], [None, 0.75]]}


def pin(revision: TaskRevision) -> None:
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=revision)


@pytest.fixture
def revisions():
    return [
        make_task("rl-a", distinct_instruction("rl-a")).current_revision,
        make_task("rl-b", distinct_instruction("rl-b")).current_revision,
    ]


@pytest.fixture
def rl_run(revisions):
    """A running RL run two steps in, with its rollouts as the rollout_func records them."""
    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path="/models/tiny",
        tasks=[r.pk for r in revisions],
        harness="builtin",
        preset="tiny-cpu",
        overrides={"min_group_survivors": 2, "max_steps": 4},
        cpu=True,
        enqueue=False,
    )
    TrainingRun.objects.filter(pk=run.pk).update(status="running", steps=2, log_tail="step 2 done\n")
    endpoint = ModelEndpoint.objects.create(
        name=f"policy-{run.pk}", base_url="http://127.0.0.1:9/v1", model="p", roles=["agent"]
    )
    for step, groups in REWARDS.items():
        TrainingMetric.objects.create(run=run, step=step, values=STEP_METRICS[step])
        for index, rewards in enumerate(groups):
            for reward in rewards:
                rollout = Rollout.objects.create(
                    revision=revisions[index],
                    endpoint=endpoint,
                    harness="builtin",
                    attempt=1,
                    status=Rollout.Status.SCORED if reward is not None else Rollout.Status.FAILED,
                    score=reward,
                )
                RLRollout.objects.create(
                    run=run,
                    step=step,
                    group_index=index,
                    rollout=rollout,
                    reward=reward,
                    samples=1 if reward is not None else 0,
                    dropped=step == 2 and index == 1,
                    inexact_samples=1 if step == 1 and index == 0 and reward == 0.25 else 0,
                    wall_seconds=3.0 + (reward or 0) * 8,
                )
    run.refresh_from_db()
    return run


def chart(html: str, name: str) -> dict:
    return json.loads(html.split(f'id="{name}" type="application/json">')[1].split("</script>")[0])


def test_the_rl_run_page_shows_the_reward_curve_the_step_table_and_the_latest_steps_rollouts(viewer_client, rl_run):
    page = viewer_client.get(reverse("training:run", args=[rl_run.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    reward = chart(html, "chart-reward")
    assert reward["labels"] == [1, 2] and reward["datasets"][0]["data"] == [0.5, 0.75]
    assert reward["datasets"][0]["low"] == [0.25, 0.25] and reward["datasets"][0]["high"] == [0.75, 1.0]  # clipped to 1
    assert reward["datasets"][0]["interval"] == "± std" and reward["y"] == {"min": 0, "max": 1, "title": "reward"}
    assert chart(html, "chart-loss")["datasets"] == [{"label": "loss", "data": [0.125, -0.0625]}]  # no KL: beta 0
    table = html.split('id="rl-steps-table"')[1].split("</table>")[0]
    assert table.count("<tr") == 3  # the head and two steps
    assert "0.750 ± 0.500" in table and "1 of 2" in table and "1 of 4" in table  # dropped groups, inexact samples
    assert "3.5 / 9.3" in table and "0.0003" in table and "-0.0625" in table
    # The latest step's rollouts by group, each linked to its page; the dropped group marked.
    rollouts = html.split('id="rl-rollouts-table"')[1].split("</table>")[0]
    shown = RLRollout.objects.filter(run=rl_run, step=2)
    assert "Rollouts of step 2" in html and rollouts.count("<tr") == 5
    for row in shown:
        assert f'href="{reverse("evaluation:detail", args=[row.rollout_id])}"' in rollouts
    assert "dropped (1 survived)" in rollouts and "rl-a r1" in rollouts and "rl-b r1" in rollouts
    assert "4 rollouts in 2 group(s); 3 with a reward in the baseline (mean 0.750); 2 in dropped groups" in html
    assert 'hx-trigger="every 2s"' in html and "Tasks: " in html and 'href="/tasks/rl-a/"' in html
    assert '"num_generations": 2' in unescape(html) and "chart-lr" not in html  # the config; no SFT curves
    assert "Cancel" not in html  # not an admin


def test_another_step_and_the_live_partial(viewer_client, rl_run):
    url = reverse("training:run", args=[rl_run.pk])
    step_one = viewer_client.get(url, {"step": 1}).content.decode()
    assert "Rollouts of step 1" in step_one and "dropped (" not in step_one
    assert f'hx-get="{url}?step=1"' in step_one  # polling keeps the step shown
    for row in RLRollout.objects.filter(run=rl_run, step=1):
        assert reverse("evaluation:detail", args=[row.rollout_id]) in step_one
    assert "Rollouts of step 2" in viewer_client.get(url, {"step": "x"}).content.decode()  # unknown: the latest
    partial = viewer_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="run-live"') and 'id="run-config"' not in partial
    assert 'data-chart="chart-reward"' in partial
    TrainingRun.objects.filter(pk=rl_run.pk).update(status="succeeded")
    assert 'hx-trigger="every 2s"' not in viewer_client.get(url).content.decode()  # finished: no polling


def test_a_skipped_step_and_a_run_before_its_first_step(viewer_client, rl_run, revisions):
    TrainingMetric.objects.create(
        run=rl_run, step=3, values={"groups_dropped": 2, "groups": 2, "skipped": 1, "rollouts": 4, "samples": 0}
    )
    html = viewer_client.get(reverse("training:run", args=[rl_run.pk])).content.decode()
    assert "skipped: every group dropped" in html and "2 of 2" in html
    assert chart(html, "chart-reward")["datasets"][0]["data"] == [0.5, 0.75, None]
    fresh = start_training_run(
        kind="rl", user=None, base_model_path="/m", tasks=[revisions[0].pk], preset="tiny-cpu", enqueue=False
    )
    html = viewer_client.get(reverse("training:run", args=[fresh.pk])).content.decode()
    assert "No step logged yet." in html and "No rollout yet" in html


def test_admins_start_an_rl_run_from_the_form(admin_client, viewer_client, revisions):
    url = reverse("training:rl-run-start")
    assert viewer_client.get(url).status_code == 403
    assert admin_client.get(url).status_code == 200
    base = {"base_model_path": "/models/tiny", "harness": "builtin", "preset": "tiny-cpu"}
    refused = admin_client.post(url, {**base, "tasks": "rl-a", "overrides": "num_generations=1"})
    assert refused.status_code == 400 and "num_generations must be at least 2" in refused.content.decode()
    assert "Give the tasks to train on" in admin_client.post(url, base).content.decode()
    assert "no task &#x27;nope&#x27;" in admin_client.post(url, {**base, "tasks": "rl-a nope"}).content.decode()
    pin(revisions[1])
    guarded = admin_client.post(url, {**base, "tasks": "rl-a, rl-b"}).content.decode()
    assert "benchmark tasks are never trained on" in guarded and "rl-b" in guarded
    response = admin_client.post(
        url,
        {**base, "tasks": "rl-a", "harness": "openclaw", "cpu": "on", "overrides": "num_generations=4\nmax_steps=3"},
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("training:run", args=[run.pk])
    assert run.kind == "rl" and run.config["tasks"] == [revisions[0].pk] and run.config["harness"] == "openclaw"
    assert run.config["num_generations"] == 4 and run.total_steps == 3 and run.cpu
    assert run.config["policy"]["backend"] == "live"
    assert run.job_run.kind == "training.rl_run" and run.job_run.queue == "gpu"
    # A selection instead of ids: the benchmark task is left out.
    response = admin_client.post(url, {**base, "tasks_from": "status=ready"})
    selected = TrainingRun.objects.order_by("-id").first()
    assert response.status_code == 302 and selected.config["tasks"] == [revisions[0].pk]
    both = admin_client.post(url, {**base, "tasks": "rl-a", "tasks_from": "status=ready"}).content.decode()
    assert "Give task ids or a selection, not both." in both


def test_admins_start_an_rl_run_with_a_task_mix_from_the_form(admin_client, revisions):
    """The form's mix task ids or mix selection, with mix_share among the config edits, start the same run the API's
    mix_tasks do (training.rl.task_mix); the run page marks the mix tasks."""
    mix = make_task("rl-c", distinct_instruction("rl-c")).current_revision
    url = reverse("training:rl-run-start")
    base = {"base_model_path": "/models/tiny", "harness": "builtin", "preset": "tiny-cpu", "tasks": "rl-a"}
    assert 'name="mix_tasks"' in admin_client.get(url).content.decode()
    response = admin_client.post(
        url, {**base, "mix_tasks": "rl-b, rl-c", "overrides": "prompts_per_step=4\nmix_share=0.5"}
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("training:run", args=[run.pk])
    assert run.config["tasks"] == [revisions[0].pk, revisions[1].pk, mix.pk]
    assert run.config["mix_tasks"] == [revisions[1].pk, mix.pk] and run.config["mix_share"] == 0.5
    assert "(+2 mixed in)" in run.name
    page = admin_client.get(response["Location"]).content.decode()
    assert page.split('id="run-tasks"')[1].split("</p>")[0].count("(mix)") == 2
    # A selection instead of ids: the run's own task is left out of the mix.
    response = admin_client.post(url, {**base, "mix_tasks_from": "prefix=rl-", "overrides": "mix_share=0.5"})
    selected = TrainingRun.objects.order_by("-id").first()
    assert response.status_code == 302 and sorted(selected.config["mix_tasks"]) == sorted([revisions[1].pk, mix.pk])


def test_the_form_refuses_a_task_mix_that_cannot_be_drawn(admin_client, revisions):
    """Refused with the service's own message (training.rl.task_mix.check_mix, as the API and `train` refuse it), a
    400 with the form's errors, and nothing started."""
    url = reverse("training:rl-run-start")
    base = {"base_model_path": "/models/tiny", "harness": "builtin", "preset": "tiny-cpu", "tasks": "rl-a"}
    for edits, expected in [
        ({"mix_tasks": "rl-b"}, "mix tasks are given but mix_share is 0"),
        ({"overrides": "mix_share=0.25"}, "mix_share needs mix tasks to draw from"),
        ({"mix_tasks": "rl-b", "overrides": "prompts_per_step=4\nmix_share=0.1"}, "rounds to 0 mix prompt(s) a step"),
        ({"mix_tasks": "rl-a", "overrides": "mix_share=0.5"}, "every mix task is among the run&#x27;s own tasks"),
        ({"mix_tasks": "rl-b", "overrides": "mix_share=1"}, "in [0, 1)"),
        ({"mix_tasks": "rl-b", "mix_tasks_from": "status=ready"}, "Give mix task ids or a mix selection, not both."),
        ({"mix_tasks": "nope"}, "no task &#x27;nope&#x27;"),
        ({"mix_tasks_from": "prefix=none-"}, "names no task"),
    ]:
        refused = admin_client.post(url, {**base, **edits})
        assert refused.status_code == 400 and expected in refused.content.decode(), (edits, refused.content)
    pin(revisions[1])
    guarded = admin_client.post(url, {**base, "mix_tasks": "rl-b", "overrides": "mix_share=0.5"})
    assert guarded.status_code == 400 and "benchmark tasks are never trained on" in guarded.content.decode()
    assert not TrainingRun.objects.exists()


def test_the_dashboard_panel_and_the_list_show_rl_runs_with_their_latest_reward(admin_client, viewer_client, rl_run):
    html = admin_client.get("/").content.decode()
    assert 'id="rl-run-start-form"' in html and "Start an RL run" in html and 'id="run-start-form"' in html
    assert html.count('id="id_base_model_path"') == 1 and html.count('id="id_rl_base_model_path"') == 1  # both forms
    row = html.split(f"#{rl_run.pk} ")[1].split("</tr>")[0]
    assert "RL" in row and "0.750" in row and 'value="2"' in row and "2 task(s), builtin" in row
    assert "Start an RL run" not in viewer_client.get("/").content.decode()
    listing = viewer_client.get(reverse("training:runs")).content.decode()
    assert f"#{rl_run.pk}" in listing and "0.750" in listing
    panel = viewer_client.get(reverse("training:runs-panel")).content.decode()
    assert "0.750" in panel and 'hx-trigger="every 2s"' in panel


def test_admin_actions_on_an_rl_run(admin_client, rl_run):
    page = admin_client.get(reverse("training:run", args=[rl_run.pk])).content.decode()
    assert "Cancel" in page and "Clone" in page
    response = admin_client.post(
        reverse("training:run-action", args=[rl_run.pk, "clone"]), {"overrides": "num_generations=3"}
    )
    clone = TrainingRun.objects.get(cloned_from=rl_run)
    assert response["Location"] == reverse("training:run", args=[clone.pk])
    assert clone.kind == "rl" and clone.config["num_generations"] == 3
    assert clone.config["tasks"] == rl_run.config["tasks"]
    assert clone.job_run.kind == "training.rl_run"
    admin_client.post(reverse("training:run-action", args=[rl_run.pk, "cancel"]))
    rl_run.refresh_from_db()
    assert rl_run.status == "cancelled"


# --- the API ------------------------------------------------------------------------------------------------


def test_the_api_starts_an_rl_run(api_as, viewer, revisions):
    admin = api_as(make_user("api-admin", "admin"))
    body = {
        "kind": "rl",
        "base_model_path": "/models/tiny",
        "tasks": ["rl-a", "rl-b"],
        "preset": "tiny-cpu",
        "harness": "builtin",
        "overrides": {"num_generations": 3, "max_steps": 5},
        "cpu": True,
    }
    assert api_as(viewer).post("/api/training/runs/", body, format="json").status_code == 403
    for edits, expected in [
        ({"tasks_from": "status=ready"}, "not both"),
        ({"tasks": []}, "give the tasks"),
        ({"base_model_path": ""}, "base_model_path"),
        ({"preset": "nope"}, "nope"),
        # isdigit() says yes to "²", int() says no: a 500 before lib.bounds.parse_id
        ({"tasks": ["²"]}, "no task"),
        ({"tasks_from": "limit=²", "tasks": []}, "unknown task selection filter"),
    ]:
        refused = admin.post("/api/training/runs/", {**body, **edits}, format="json")
        assert refused.status_code == 400 and expected in refused.content.decode(), (edits, refused.content)
    refused = admin.post("/api/training/runs/", {**body, "overrides": {"lora.rank": 8}}, format="json")
    assert refused.status_code == 400 and "unknown config key" in refused.json()["detail"]
    created = admin.post("/api/training/runs/", body, format="json")
    assert created.status_code == 201, created.content
    run = created.json()
    assert run["kind"] == "rl" and run["status"] == "queued" and run["dataset"] is None
    assert run["config"]["tasks"] == [r.pk for r in revisions] and run["config"]["num_generations"] == 3
    assert run["total_steps"] == 5
    # The `train --kind rl --json` shape, exactly.
    assert run["report"] == {
        "run": run["id"],
        "status": "queued",
        "steps": 0,
        "rollouts": 0,
        "checkpoints": [],
        "metrics": [],
    }
    tasks = [{"external_id": "rl-a", "revision": 1}, {"external_id": "rl-b", "revision": 1}]
    assert run["rl"] == {"steps": [], "step_summaries": [], "tasks": tasks}
    assert TrainingRun.objects.get(pk=run["id"]).job_run.kind == "training.rl_run"
    selected = admin.post(
        "/api/training/runs/", {**body, "tasks": [], "tasks_from": "status=ready,limit=1"}, format="json"
    )
    assert selected.status_code == 201 and len(selected.json()["config"]["tasks"]) == 1
    # A task mix: the mix tasks with their share of every step (training.rl.task_mix), refused when it cannot be drawn.
    mixed = {**body, "tasks": ["rl-a"], "mix_tasks": ["rl-b"]}
    for edits, expected in [
        ({}, "mix_share is 0"),
        ({"mix_tasks_from": "status=ready"}, "not both"),
        ({"overrides": {"mix_share": 0.1}}, "rounds to 0 mix prompt"),
    ]:
        refused = admin.post("/api/training/runs/", {**mixed, **edits}, format="json")
        assert refused.status_code == 400 and expected in refused.content.decode(), (edits, refused.content)
    created = admin.post("/api/training/runs/", {**mixed, "overrides": {"mix_share": 0.5}}, format="json")
    assert created.status_code == 201, created.content
    config = created.json()["config"]
    assert config["tasks"] == [r.pk for r in revisions] and config["mix_tasks"] == [revisions[1].pk]
    pin(revisions[0])
    guarded = admin.post("/api/training/runs/", body, format="json")
    assert guarded.status_code == 400 and "contamination guard" in guarded.json()["detail"]


def test_the_api_lists_shows_and_pages_an_rl_runs_rollouts(api_as, viewer, rl_run):
    reader = api_as(viewer)
    listed = reader.get("/api/training/runs/", {"kind": "rl"}).json()["results"]
    assert [(r["id"], r["latest_reward"], r["steps"]) for r in listed] == [(rl_run.pk, 0.75, 2)]
    assert reader.get("/api/training/runs/", {"kind": "sft"}).json()["results"] == []
    assert reader.get("/api/training/runs/", {"kind": "ppo"}).status_code == 400
    detail = reader.get(f"/api/training/runs/{rl_run.pk}/").json()
    assert [s["reward_mean"] for s in detail["rl"]["steps"]] == [0.5, 0.75]
    summaries = {s["step"]: s for s in detail["rl"]["step_summaries"]}
    assert summaries[2] == {
        "step": 2,
        "rollouts": 4,
        "groups": 2,
        "scored": 3,
        "dropped": 2,
        "samples": 3,
        "inexact_samples": 0,
        "reward_mean": 0.75,
        "wall_max_s": 11.0,
    }
    assert summaries[1]["inexact_samples"] == 1 and summaries[1]["scored"] == 4
    report = detail["report"]
    assert report["rollouts"] == 8 and report["metrics"][1] == {
        "step": 2,
        "reward_mean": 0.75,
        "reward_std": 0.5,
        "groups_dropped": 1,
        "inexact_samples": 0,
        "rollout_p50_s": 4.0,
        "rollout_max_s": 12.5,
        "loss": -0.0625,
    }
    rows = reader.get(f"/api/training/runs/{rl_run.pk}/rollouts/", {"step": 2}).json()
    assert rows["count"] == 4
    assert [(r["group_index"], r["reward"], r["dropped"]) for r in rows["results"]] == [
        (0, 0.5, False),
        (0, 1.0, False),
        (1, None, True),
        (1, 0.75, True),
    ]
    first = rows["results"][0]
    assert first["task"] == "rl-a" and first["status"] == "scored"
    assert first["url"].endswith(f"/api/rollouts/{first['rollout']}/")
    assert reader.get(f"/api/training/runs/{rl_run.pk}/rollouts/").json()["count"] == 8
    assert reader.get(f"/api/training/runs/{rl_run.pk}/rollouts/", {"step": "two"}).status_code == 400


def test_the_api_cancels_resumes_and_clones_an_rl_run(api_as, rl_run):
    admin = api_as(make_user("api-admin", "admin"))
    cloned = admin.post(f"/api/training/runs/{rl_run.pk}/clone/", {"overrides": {"num_generations": 4}}, format="json")
    assert cloned.status_code == 201 and cloned.json()["kind"] == "rl" and cloned.json()["cloned_from"] == rl_run.pk
    assert cloned.json()["config"]["num_generations"] == 4
    cancelled = admin.post(f"/api/training/runs/{rl_run.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    resumed = admin.post(f"/api/training/runs/{rl_run.pk}/resume/", {"overrides": {"max_steps": 6}}, format="json")
    assert resumed.status_code == 200, resumed.content
    body = resumed.json()
    assert body["status"] == "queued" and body["config"]["max_steps"] == 6 and body["steps"] == 0
    # No checkpoint: resumed from the start, so the steps' rollouts and metrics go (they are sampled again).
    assert body["rl"]["steps"] == [] and body["report"]["rollouts"] == 0
