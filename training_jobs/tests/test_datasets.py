"""Training datasets: selection, every exclusion reason, the contamination guard and its override, the split by
task, the content hash, the statistics, the job, the command, the pages and the API. Rows are made directly
(training_jobs.testing.corpus), shaped as evaluation stores them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from jobs import runner
from jobs.models import JobRun
from training_jobs.job_kinds import BUILD_JOB
from training_jobs.models import DatasetSample, TrainingDataset
from training_jobs.services.datasets import DatasetError, build_dataset, split_tasks, start_build
from training_jobs.testing.corpus import EXCLUDED, KEPT, conversation, make_corpus

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]
LIMIT = {"max_tokens": 65536}


@pytest.fixture
def corpus(db):
    return make_corpus()


def both(corpus) -> dict:
    return {"eval_runs": [corpus.run.pk], "groups": [corpus.group]}


def kept_labels(corpus, dataset) -> set:
    ids = set(dataset.samples.values_list("trajectory_id", flat=True))
    return {label for label, t in corpus.trajectories.items() if t.pk in ids}


def test_every_reason_is_counted_and_the_rest_kept(corpus):
    dataset = build_dataset(selection=both(corpus), filters={"max_tokens": 65536}, name="sales", user=None)
    assert dataset.status == TrainingDataset.Status.READY
    assert kept_labels(corpus, dataset) == KEPT
    assert dataset.excluded == EXCLUDED
    assert dataset.trajectories_count == len(KEPT)
    assert dataset.filters["min_reward"] == 0.5  # the default threshold, written on the dataset
    # One of the two identical conversations of sales-a is kept; either way the content is the same.
    assert {s.task_external_id for s in dataset.samples.all()} == {
        "sales-a",
        "sales-b",
        "g-1",
        "g-2",
        "g-3",
        "g-4",
        "g-5",
    }
    # Without a token limit the long one stays; a lower threshold takes the 0.4 one (and still not the 0.0 one).
    loose = build_dataset(selection=both(corpus), filters={"min_reward": 0.4}, user=None)
    assert kept_labels(corpus, loose) == KEPT | {"long", "low"}
    assert loose.excluded["below_min_reward"] == 1
    assert "too_long" not in loose.excluded


def test_selection_by_run_or_group_or_source(corpus):
    by_run = build_dataset(selection={"eval_runs": [corpus.run.pk]}, user=None)
    assert kept_labels(corpus, by_run) == {"good", "half", "long"}  # no token limit asked
    by_group = build_dataset(selection={"groups": [corpus.group]}, user=None)
    assert kept_labels(corpus, by_group) == {"g-1", "g-2", "g-3", "g-4", "g-5"}
    by_source = build_dataset(selection={"sources": ["persona"]}, filters={"max_tokens": 65536}, user=None)
    assert kept_labels(corpus, by_source) == {"good", "half"}
    with pytest.raises(DatasetError, match="select at least one"):
        build_dataset(selection={}, user=None)
    with pytest.raises(DatasetError, match="no evaluation run #999"):
        build_dataset(selection={"eval_runs": [999, corpus.run.pk]}, user=None)
    with pytest.raises(DatasetError, match="no rollout group nosuchgroup"):
        build_dataset(selection={"groups": ["nosuchgroup"]}, user=None)
    # Dates narrow the selection (a naive one is in the site's time zone).
    assert build_dataset(selection={"groups": [corpus.group], "until": "2000-01-01T00:00:00"}, user=None).excluded == {}
    assert build_dataset(selection={"groups": [corpus.group], "since": "2000-01-01"}, user=None).trajectories_count == 5
    with pytest.raises(DatasetError, match="unknown filter"):
        build_dataset(selection=both(corpus), filters={"min_rewrad": 0.5}, user=None)


def test_the_contamination_guard_and_its_admin_override(corpus, admin_user, reviewer):
    guarded = build_dataset(selection=both(corpus), user=None)
    assert guarded.excluded["benchmark_task"] == 1
    assert "benchmark" not in kept_labels(corpus, guarded)
    # Another revision of the pinned task is left out too: the guard is by task, not by revision.
    with pytest.raises(DatasetError, match="only an admin"):
        build_dataset(selection=both(corpus), allow_benchmark_tasks=True, override_reason="ablation", user=reviewer)
    with pytest.raises(DatasetError, match="needs a reason"):
        build_dataset(selection=both(corpus), allow_benchmark_tasks=True, override_reason="  ", user=admin_user)
    assert TrainingDataset.objects.count() == 1  # refused overrides leave no dataset behind
    overridden = build_dataset(
        selection=both(corpus),
        allow_benchmark_tasks=True,
        user=admin_user,
        override_reason="contamination ablation for the paper's table 5",
    )
    assert "benchmark" in kept_labels(corpus, overridden)
    assert "benchmark_task" not in overridden.excluded
    assert overridden.override_by == admin_user
    assert overridden.override_reason == "contamination ablation for the paper's table 5"
    assert overridden.sha256 != guarded.sha256


def test_a_second_revision_of_a_pinned_task_is_guarded_too(corpus):
    from tasks.models import TaskRevision
    from training_jobs.testing.corpus import add

    revision = TaskRevision.objects.create(
        task=corpus.revisions["bench-task"].task, number=2, instruction="v2", content_hash="v2"
    )
    corpus.revisions["bench-v2"] = revision
    add(corpus, "bench-v2", "bench-v2", reward=1.0, messages=conversation("bench-v2"))
    dataset = build_dataset(selection=both(corpus), user=None)
    assert dataset.excluded["benchmark_task"] == 2


def test_the_split_keeps_each_task_on_one_side_and_is_seeded(corpus):
    filters = {"validation_share": 0.3, "seed": 7}
    dataset = build_dataset(selection=both(corpus), filters=filters, user=None)
    sides = {}
    for sample in dataset.samples.all():
        sides.setdefault(sample.task_external_id, set()).add(sample.split)
    assert all(len(s) == 1 for s in sides.values())
    validation = {t for t, s in sides.items() if s == {"validation"}}
    assert len(validation) == 2  # round(0.3 * 7)
    assert dataset.stats["split"]["validation"]["tasks"] == 2
    again = build_dataset(selection=both(corpus), filters=filters, user=None)
    assert {s.task_external_id for s in again.samples.filter(split="validation")} == validation
    # Another seed ranks the tasks otherwise (these two seeds pick different tasks for these names).
    tasks = sorted(sides)
    assert any(split_tasks(tasks, share=0.3, seed=seed) != validation for seed in range(1, 5))
    # The default share (0.05) still puts one task of seven aside; one task alone stays in train.
    assert len(split_tasks(tasks, share=0.05, seed=0)) == 1
    assert split_tasks(["only"], share=0.5, seed=0) == set()


def test_the_hash_is_stable_and_follows_the_content(corpus):
    first = build_dataset(selection=both(corpus), user=None)
    second = build_dataset(selection=both(corpus), user=None)
    assert first.pk != second.pk  # building always makes a new dataset
    assert first.sha256 == second.sha256 and len(first.sha256) == 64
    assert list(first.samples.values_list("trajectory_id", "split")) == list(
        second.samples.values_list("trajectory_id", "split")
    )
    # The same content under other ids: a copy of the whole group, then the originals deleted... the group's
    # trajectories rebuilt (new rows) give the same hash.
    from evaluation.models import Trajectory

    grouped = Trajectory.objects.filter(rollout__group=corpus.group).order_by("pk")
    copies = [
        Trajectory(
            rollout=t.rollout, index=t.index + 1, messages=t.messages, tools=t.tools, reward=t.reward, stats=t.stats
        )
        for t in grouped
    ]
    by_group = build_dataset(selection={"groups": [corpus.group]}, filters={"dedup": True}, user=None)
    Trajectory.objects.bulk_create(copies)
    with_copies = build_dataset(selection={"groups": [corpus.group]}, user=None)
    assert with_copies.excluded == {"near_duplicate": 5}
    assert with_copies.sha256 == by_group.sha256
    # Other content, another hash.
    changed = corpus.trajectories["half"]
    changed.messages = conversation("sales-b", "Done, totals.md has north 5 and south 2.", calls=3)
    changed.save()
    assert build_dataset(selection=both(corpus), user=None).sha256 != first.sha256


def test_the_statistics_are_stored_with_the_papers_figures(corpus):
    dataset = build_dataset(selection=both(corpus), filters=LIMIT, user=None)
    stats = dataset.stats
    assert stats["trajectories"] == len(KEPT) and stats["candidates"] == 16
    turns = stats["metrics"]["turns"]
    # good: 2 tool rounds + answer = 3 turns; half: 4; g-i: i + 1.
    expected = [3, 4, 2, 3, 4, 5, 6]
    assert turns["mean"] == pytest.approx(sum(expected) / 7) and turns["median"] == 4
    assert sum(b["count"] for b in turns["histogram"]) == 7
    assert turns["paper"] == 13.0
    assert stats["metrics"]["tokens"]["paper"] == 18670.0
    assert stats["metrics"]["tool_calls"]["paper"] == 15.82 and stats["metrics"]["tool_types"]["paper"] == 3.25
    assert stats["metrics"]["tokens"]["mean"] == 1500
    rewards = {b["label"]: b["count"] for b in stats["reward"]["histogram"]}
    assert rewards["0.9–1.0"] == 1 and rewards["0.5–0.6"] == 1 and rewards["0.7–0.8"] == 5
    sources = {row["name"]: row["trajectories"] for row in stats["sources"]}
    assert sources == {"skill": 5, "persona": 2}
    assert sum(row["trajectories"] for row in stats["categories"]) == 7


def test_the_last_calls_usage_measures_the_sample(corpus):
    from llm.models import ModelCall

    good = corpus.trajectories["good"]
    call = ModelCall.objects.create(
        endpoint=corpus.endpoint,
        endpoint_name="agent-m",
        purpose="proxy",
        request={},
        response={},
        input_tokens=70_000,
        output_tokens=40,
    )
    good.model_call_ids = [call.pk]
    good.save()
    dataset = build_dataset(selection=both(corpus), filters={"max_tokens": 65536}, user=None)
    assert "good" not in kept_labels(corpus, dataset)
    assert dataset.excluded["too_long"] == 2


def test_the_job_builds_the_dataset_created_first_and_a_second_delivery_keeps_it(corpus, admin_user):
    dataset = start_build(selection=both(corpus), filters=LIMIT, name="by job", user=admin_user)
    assert dataset.status == TrainingDataset.Status.BUILDING and dataset.samples.count() == 0
    run = JobRun.objects.get(pk=dataset.job_run_id)
    assert run.kind == BUILD_JOB and run.params == {"dataset_id": dataset.pk}
    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    dataset.refresh_from_db()
    assert dataset.status == TrainingDataset.Status.READY and dataset.trajectories_count == len(KEPT)
    run.refresh_from_db()
    assert run.result["sha256"] == dataset.sha256
    positions = list(dataset.samples.values_list("pk", flat=True))
    JobRun.objects.filter(pk=run.pk).update(status=JobRun.Status.QUEUED, finished_at=None)
    runner.execute(run.pk)
    assert list(dataset.samples.values_list("pk", flat=True)) == positions  # not built again


def test_a_job_that_builds_an_empty_dataset_has_failed_saying_why(corpus, admin_user):
    # Nothing to train on is not a success: the dataset is kept (status empty, with its reason), the job failed.
    dataset = start_build(selection=both(corpus), filters={**LIMIT, "min_reward": 1.01}, name="none", user=admin_user)
    run = JobRun.objects.get(pk=dataset.job_run_id)

    assert runner.execute(run.pk) == JobRun.Status.FAILED

    dataset.refresh_from_db()
    run.refresh_from_db()
    assert dataset.status == TrainingDataset.Status.EMPTY and dataset.trajectories_count == 0
    assert run.error.startswith("The dataset is empty: all ") and "rewarded below 1.01" in run.error
    assert run.outcome_display == "Failed: its item failed" and run.result["status"] == "empty"


def test_samples_protect_their_trajectories(corpus):
    from django.db.models import ProtectedError

    dataset = build_dataset(selection=both(corpus), filters=LIMIT, user=None)
    sample = dataset.samples.first()
    with pytest.raises(ProtectedError):
        sample.trajectory.delete()
    assert DatasetSample.objects.filter(dataset=dataset).count() == len(KEPT)


def test_the_command_prints_the_summary_as_json_last(corpus, capsys):
    call_command(
        "build_dataset",
        "--run",
        str(corpus.run.pk),
        "--group",
        corpus.group,
        "--max-tokens",
        "65536",
        "--name",
        "cli",
        "--json",
    )
    out = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out[-1])
    assert set(result) == {
        "dataset",
        "status",
        "empty_reason",
        "sha256",
        "trajectories",
        "excluded",
        "tokens_counted_with",
    }
    assert (result["status"], result["empty_reason"], result["tokens_counted_with"]) == ("ready", "", "usage estimate")
    dataset = TrainingDataset.objects.get(pk=result["dataset"])
    assert dataset.name == "cli" and result["sha256"] == dataset.sha256
    assert result["trajectories"] == len(KEPT) and result["excluded"] == EXCLUDED


def test_the_command_refuses_an_override_without_an_admin_and_a_reason(corpus, admin_user):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--by ADMIN"):
        call_command("build_dataset", "--run", str(corpus.run.pk), "--include-benchmark-tasks", "--reason", "x")
    with pytest.raises(CommandError, match="needs a reason"):
        call_command(
            "build_dataset", "--run", str(corpus.run.pk), "--include-benchmark-tasks", "--by", admin_user.username
        )
    with pytest.raises(CommandError, match="--run EVAL_RUN or --group"):
        call_command("build_dataset")


@pytest.mark.django_db(transaction=True)
def test_the_command_runs_in_its_own_process(tmp_path, settings):
    """`manage.py build_dataset … --json` in a subprocess on the test database: its last line is the JSON object."""
    from jobs.testing import database_url

    corpus = make_corpus()
    env = {**__import__("os").environ, "DATABASE_URL": database_url()}
    done = subprocess.run(
        [sys.executable, "manage.py", "build_dataset", "--group", corpus.group, "--min-reward", "0.8", "--json"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["trajectories"] == 0 and result["excluded"] == {"below_min_reward": 5}
    assert (
        result["status"] == "empty" and result["empty_reason"] == "all 5 trajectories are rewarded below 0.8, excluded"
    )


# --- pages -------------------------------------------------------------------------------------------------------


def test_an_admin_builds_from_the_form_and_lands_on_the_dataset_page(corpus, admin_client):
    from django.urls import reverse

    form = admin_client.get(reverse("training:dataset-build"))
    assert form.status_code == 200 and corpus.group in form.content.decode()
    refused = admin_client.post(
        reverse("training:dataset-build"), {"min_reward": 0.5, "validation_share": 0.05, "seed": 0}
    )
    assert refused.status_code == 400 and "at least one evaluation run or rollout group" in refused.content.decode()
    no_reason = admin_client.post(
        reverse("training:dataset-build"),
        {
            "eval_runs": [corpus.run.pk],
            "min_reward": 0.5,
            "validation_share": 0.05,
            "seed": 0,
            "allow_benchmark_tasks": "on",
        },
    )
    assert no_reason.status_code == 400 and "Say why benchmark tasks are included" in no_reason.content.decode()
    response = admin_client.post(
        reverse("training:dataset-build"),
        {
            "eval_runs": [corpus.run.pk],
            "groups": [corpus.group],
            "min_reward": 0.5,
            "max_tokens": 65536,
            "validation_share": 0.05,
            "seed": 0,
            "name": "from the form",
        },
    )
    dataset = TrainingDataset.objects.get(name="from the form")
    assert response.status_code == 302 and response.url == reverse("training:dataset", args=[dataset.pk])
    building = admin_client.get(response.url)
    body = building.content.decode()
    assert 'id="dataset-status">Building' in body and 'hx-trigger="every 1s"' in body
    runner.execute(dataset.job_run_id)
    ready = admin_client.get(response.url, HTTP_HX_REQUEST="true")
    body = ready.content.decode()
    assert "<html" not in body and "hx-trigger" not in body  # the partial, and the polling stops
    assert 'id="dataset-status">Ready' in body
    assert f'id="count-trajectories">{len(KEPT)}<' in body
    assert 'data-reason="near_duplicate"' in body and 'data-reason="benchmark_task"' in body
    assert 'data-metric="turns"' in body and "13.00" in body and "18670.00" in body
    assert 'data-chart="chart-tokens"' in body and 'id="chart-reward"' in body


def test_the_pages_the_download_and_the_panel(corpus, admin_client, viewer_client, outsider_client):
    from django.urls import reverse

    dataset = build_dataset(selection=both(corpus), filters=LIMIT, name="shown", user=None)
    listing = viewer_client.get(reverse("training:datasets"))
    assert listing.status_code == 200 and f'data-dataset="{dataset.pk}"' in listing.content.decode()
    assert "Build a dataset" not in listing.content.decode()  # viewers cannot build
    assert viewer_client.get(reverse("training:dataset-build")).status_code == 403
    assert outsider_client.get(reverse("training:dataset", args=[dataset.pk])).status_code == 403
    download = viewer_client.get(reverse("training:dataset-messages", args=[dataset.pk]))
    lines = [json.loads(line) for line in b"".join(download.streaming_content).decode().splitlines()]
    assert len(lines) == len(KEPT) and set(lines[0]) == {"messages", "tools"}
    assert lines[0]["messages"][-1]["role"] == "assistant" and lines[0]["tools"][0]["type"] == "function"
    # As export_dataset --format messages writes them: tool-call arguments as objects, for chat templates.
    assert lines[0]["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"path": "sales.csv"}
    validation = viewer_client.get(reverse("training:dataset-messages", args=[dataset.pk]) + "?split=validation")
    assert (
        len(b"".join(validation.streaming_content).splitlines()) == dataset.stats["split"]["validation"]["trajectories"]
    )
    dashboard = admin_client.get(reverse("dashboard")).content.decode()
    assert 'id="training-data-panel"' in dashboard and 'id="dataset-build-form"' in dashboard
    assert f'data-dataset="{dataset.pk}"' in dashboard
    viewer_dashboard = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'id="training-data-panel"' in viewer_dashboard and 'id="dataset-build-form"' not in viewer_dashboard


# --- API ---------------------------------------------------------------------------------------------------------


def test_the_api_lists_builds_and_pages_samples(corpus, admin_user, viewer, api_as):
    admin, reader = api_as(admin_user), api_as(viewer)
    refused = reader.post("/api/training/datasets/", {"eval_runs": [corpus.run.pk]}, format="json")
    assert refused.status_code == 403
    bad = admin.post(
        "/api/training/datasets/", {"eval_runs": [corpus.run.pk], "allow_benchmark_tasks": True}, format="json"
    )
    assert bad.status_code == 400 and "needs a reason" in bad.json()["detail"]
    started = admin.post(
        "/api/training/datasets/",
        {"eval_runs": [corpus.run.pk], "groups": [corpus.group], "max_tokens": 65536, "name": "api"},
        format="json",
    )
    assert started.status_code == 202, started.content
    body = started.json()
    assert body["job"]["kind"] == BUILD_JOB
    assert TrainingDataset.objects.get(pk=body["dataset"]).status == TrainingDataset.Status.BUILDING
    runner.execute(body["job"]["id"])
    detail = reader.get(body["url"]).json()
    assert detail["status"] == "ready" and detail["trajectories"] == len(KEPT) and detail["excluded"] == EXCLUDED
    assert detail["stats"]["metrics"]["turns"]["paper"] == 13.0 and detail["filters"]["max_tokens"] == 65536
    listing = reader.get("/api/training/datasets/?status=ready").json()
    assert [row["id"] for row in listing["results"]] == [body["dataset"]]
    assert reader.get("/api/training/datasets/?staus=ready").status_code == 400
    samples = reader.get(detail["samples_url"]).json()
    assert samples["count"] == len(KEPT) and samples["results"][0]["position"] == 0
    assert samples["results"][0]["messages"][0]["role"] == "system"
    train = reader.get(detail["samples_url"] + "?split=train").json()
    assert train["count"] == detail["stats"]["split"]["train"]["trajectories"]
