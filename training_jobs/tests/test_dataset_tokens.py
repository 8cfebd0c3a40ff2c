"""Dataset token counts from the tokenized sample (the tokenizer that will train on it), stored per sample with where
its assistant tokens are, used by the "tokens at most" filter and shown on the dataset page; without a base model the
counts are the usage estimate and every page says so. An empty dataset is built "empty" with the reason, on the page,
the list, the API and the command."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from evaluation.models import EvalRun
from jobs.cli import UsageError
from training.masks import masked_runs, tokenize_sample
from training_jobs.base_models import add_by_path
from training_jobs.models import TrainingDataset
from training_jobs.services.datasets import DatasetError, build_dataset, empty_reason
from training_jobs.testing.corpus import KEPT, add, conversation, make_corpus
from training_jobs.token_counts import SampleTokens, TokenCounter, TokenCountError

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(db):
    return make_corpus()


@pytest.fixture
def tiny(tiny_model_path):
    return add_by_path("tiny", tiny_model_path)[0]


def both(corpus) -> dict:
    return {"eval_runs": [corpus.run.pk], "groups": [corpus.group]}


def test_the_counter_gives_the_masks_spans_in_this_process_and_in_a_subprocess(tiny_model_path):
    from transformers import AutoTokenizer

    from training_jobs.testing.corpus import TOOLS

    sample = {"messages": conversation("sales-a", calls=3), "tools": TOOLS}
    tokenized = tokenize_sample(sample, AutoTokenizer.from_pretrained(tiny_model_path))
    with TokenCounter(tiny_model_path, in_process=True) as here:
        counted = here.count(sample)
    # The subprocess the web process and the workers use (they never load transformers themselves).
    with TokenCounter(tiny_model_path, in_process=False) as there:
        assert there.count(sample) == counted
        assert there.count({"messages": conversation("g-1", calls=1), "tools": TOOLS}).tokens < counted.tokens
    assert counted.tokens == tokenized["length"]
    runs = masked_runs(tokenized)
    assert [end - start for start, end in counted.spans] == [len(run) for run in runs] and len(runs) == 4
    assert counted.assistant_tokens == sum(tokenized["assistant_masks"])
    first, second = counted.spans[0], counted.spans[1]
    assert counted.trainable(first[0]) == 0  # cut before the first assistant turn: nothing to train on
    assert counted.trainable(first[1] + 2) == first[1] - first[0] + max(0, first[1] + 2 - second[0])
    assert counted.trainable(None) == counted.trainable(counted.tokens) == counted.assistant_tokens


def test_a_tokenizer_without_generation_markers_is_refused_by_name(tiny_model_path, tmp_path):
    import shutil

    folder = tmp_path / "plain"
    shutil.copytree(tiny_model_path, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    for name in ("chat_template.jinja", "chat_template.json"):
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(TokenCountError, match="generation"), TokenCounter(folder, in_process=True) as counter:
        counter.count({"messages": conversation("x"), "tools": []})


def test_a_dataset_counts_the_tokenized_sample_with_its_base_models_tokenizer(
    corpus, tiny, viewer_client, api_as, viewer
):
    from transformers import AutoTokenizer

    # The "long" trajectory reports 90,000 tokens of usage; tokenized, it is a few hundred: the estimate left it out.
    estimated = build_dataset(selection=both(corpus), filters={"max_tokens": 65536}, user=None)
    assert estimated.excluded["too_long"] == 1 and not estimated.tokenized
    dataset = build_dataset(selection=both(corpus), filters={"max_tokens": 65536}, base_model=tiny, user=None)
    assert dataset.tokenized and dataset.tokenizer_path == tiny.path and dataset.base_model == tiny
    assert "too_long" not in dataset.excluded and dataset.trajectories_count == len(KEPT) + 1
    tokenizer = AutoTokenizer.from_pretrained(tiny.path)
    for sample in dataset.samples.select_related("trajectory"):
        tokenized = tokenize_sample(
            {"messages": sample.trajectory.messages, "tools": sample.trajectory.tools}, tokenizer
        )
        assert sample.tokens == tokenized["length"] != sample.trajectory.stats["total_tokens"]
        assert SampleTokens(sample.tokens, [tuple(s) for s in sample.assistant_spans]).assistant_tokens == sum(
            tokenized["assistant_masks"]
        )
    counts = sorted(dataset.samples.values_list("tokens", flat=True))
    # The "tokens at most" filter compares the tokenized length: a limit between two samples cuts between them.
    limit = counts[len(counts) // 2]
    cut = build_dataset(selection=both(corpus), filters={"max_tokens": limit}, base_model=tiny, user=None)
    assert cut.excluded["too_long"] == sum(1 for c in counts if c > limit) > 0
    assert max(cut.samples.values_list("tokens", flat=True)) <= limit
    stats = dataset.stats
    assert stats["tokens_counted_with"] == "tokenizer" and stats["metrics"]["tokens"]["max"] == counts[-1]
    fit = {row["max_length"]: row for row in stats["max_length_fit"]}
    assert fit[2048] == {"max_length": 2048, "all": len(counts), "some": 0, "none": 0}

    page = viewer_client.get(reverse("training:dataset", args=[dataset.pk])).content.decode()
    assert "counted with the base model tiny's tokenizer: the tokenized sample" in page
    assert 'id="token-fit-table"' in page and 'data-max-length="2048"' in page
    assert tiny.path not in page  # a server's folder: admins'
    detail = api_as(viewer).get(f"/api/training/datasets/{dataset.pk}/").json()
    assert detail["tokens_counted_with"] == "tokenizer" and detail["base_model"] == "tiny"
    assert detail["tokenizer_path"] == "…/" + tiny.path.rstrip("/").rsplit("/", 1)[-1]
    samples = api_as(viewer).get(detail["samples_url"]).json()["results"]
    assert samples[0]["assistant_spans"] and samples[0]["tokens"] in counts


def test_without_a_base_model_the_page_says_the_tokens_are_an_estimate(corpus, viewer_client):
    dataset = build_dataset(selection=both(corpus), filters={"max_tokens": 65536}, user=None)
    page = viewer_client.get(reverse("training:dataset", args=[dataset.pk])).content.decode()
    assert "the models' reported usage, an estimate" in page and "(the usage estimate)" in page
    assert 'id="token-fit"' not in page and dataset.stats["tokens_counted_with"] == "usage"


def test_building_with_a_base_model_on_the_form_the_api_and_the_command(corpus, tiny, admin_client, api_as, admin_user):
    from jobs import runner

    response = admin_client.post(
        reverse("training:dataset-build"),
        {
            "eval_runs": [corpus.run.pk],
            "groups": [corpus.group],
            "min_reward": 0.5,
            "validation_share": 0.05,
            "seed": 0,
            "name": "form",
            "base_model": tiny.pk,
        },
    )
    assert response.status_code == 302
    form_built = TrainingDataset.objects.get(name="form")
    runner.execute(form_built.job_run_id)
    form_built.refresh_from_db()
    assert form_built.status == "ready" and form_built.tokenized and form_built.base_model == tiny
    missing = admin_client.post(
        reverse("training:dataset-build"),
        {
            "eval_runs": [corpus.run.pk],
            "min_reward": 0.5,
            "validation_share": 0.05,
            "seed": 0,
            "base_model_path": "/nowhere/model",
        },
    )
    assert missing.status_code == 400 and "/nowhere/model is not a folder on this machine" in missing.content.decode()

    api = api_as(admin_user)
    started = api.post("/api/training/datasets/", {"groups": [corpus.group], "base_model": "tiny"}, format="json")
    assert started.status_code == 202, started.content
    runner.execute(started.json()["job"]["id"])
    assert TrainingDataset.objects.get(pk=started.json()["dataset"]).tokenized
    refused = api.post(
        "/api/training/datasets/", {"groups": [corpus.group], "base_model_path": "/nowhere"}, format="json"
    )
    assert refused.status_code == 400 and "not a folder on this machine" in refused.json()["detail"]

    out = StringIO()
    call_command(
        "build_dataset", "--group", corpus.group, "--base-model", tiny.path, "--json", stdout=out, stderr=StringIO()
    )
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert result["tokens_counted_with"] == tiny.path and result["status"] == "ready"


def test_the_command_takes_a_relative_folder_from_where_it_runs_and_names_what_a_bare_word_is_not(
    corpus, tiny, monkeypatch
):
    folder = Path(tiny.path)
    monkeypatch.chdir(folder.parent)
    out = StringIO()
    call_command(
        "build_dataset", "--group", corpus.group, "--base-model", folder.name, "--json", stdout=out, stderr=StringIO()
    )
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert result["tokens_counted_with"] == str(folder) and result["status"] == "ready"
    built = TrainingDataset.objects.count()
    with pytest.raises(UsageError, match="'tinyx' is neither a registered base model .* nor a model folder"):
        call_command("build_dataset", "--group", corpus.group, "--base-model", "tinyx", stdout=StringIO())
    assert TrainingDataset.objects.count() == built


def test_an_empty_dataset_is_built_empty_with_its_reason(corpus, viewer_client, api_as, viewer):
    corpus.run = EvalRun.objects.create(
        name="benchmark only", endpoint=corpus.endpoint, harness="builtin", config_hash="y" * 64
    )
    for i in range(3):
        add(corpus, f"bench-{i}", "bench-task", reward=1.0, messages=conversation("bench-task", f"Done {i}."))
    dataset = build_dataset(selection={"eval_runs": [corpus.run.pk]}, name="bench only", user=None)
    assert dataset.status == TrainingDataset.Status.EMPTY and dataset.trajectories_count == 0
    reason = "all 3 trajectories are benchmark tasks (the contamination guard), excluded"
    assert empty_reason(dataset) == reason

    page = viewer_client.get(reverse("training:dataset", args=[dataset.pk])).content.decode()
    assert 'id="dataset-status">Empty' in page and reason in page and 'id="dataset-empty"' in page
    assert 'data-reason="benchmark_task"' in page  # what was left out, and why
    assert "hx-trigger" not in page.split('id="dataset-live"')[1].split(">")[0]  # built: no more polling
    listing = viewer_client.get(reverse("training:datasets")).content.decode()
    assert 'class="badge s-empty"' in listing and reason in listing
    detail = api_as(viewer).get(f"/api/training/datasets/{dataset.pk}/").json()
    assert detail["status"] == "empty" and detail["empty_reason"] == reason

    # Mixed reasons are counted out one by one; a selection with nothing in it says so.
    add(corpus, "low", "sales-a", reward=0.1, messages=conversation("sales-a", "Not sure."))
    mixed = build_dataset(selection={"eval_runs": [corpus.run.pk]}, user=None)
    assert empty_reason(mixed) == (
        "all 4 trajectories were left out: 3 are benchmark tasks (the contamination guard); 1 is rewarded below 0.5"
    )
    nothing = build_dataset(selection={"groups": [corpus.group], "until": "2000-01-01T00:00:00"}, user=None)
    assert nothing.status == "empty" and empty_reason(nothing) == "the selection holds no trajectory"
    assert empty_reason(build_dataset(selection=both(corpus), user=None)) == ""  # ready: no reason

    out, err = StringIO(), StringIO()
    call_command("build_dataset", "--run", str(corpus.run.pk), "--json", stdout=out, stderr=err)
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert (
        result["status"] == "empty"
        and result["empty_reason"]
        == "all 4 trajectories were left out: 3 are benchmark tasks (the contamination guard); 1 is rewarded below 0.5"
    )
    assert "is empty: all 4 trajectories" in err.getvalue() and "training refuses it" in err.getvalue()


def test_a_bad_tokenizer_folder_fails_the_build_saying_why(corpus, tmp_path):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(DatasetError, match="holds no tokenizer"):
        build_dataset(selection=both(corpus), tokenizer_path=str(folder), user=None)
    assert not TrainingDataset.objects.exists()  # refused before a row was made


def test_an_empty_dataset_exports_nothing_and_says_why(corpus, tmp_path):
    from training_jobs.exports import ExportError, export_messages

    empty = build_dataset(selection={"groups": [corpus.group]}, filters={"min_reward": 0.9}, user=None)
    with pytest.raises(ExportError, match=r"is empty \(all 5 trajectories are rewarded below 0.9, excluded\)"):
        export_messages(empty, tmp_path / "out.jsonl")
