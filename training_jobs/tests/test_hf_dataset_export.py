"""A training dataset as a Hugging Face dataset: both configurations (messages; tokenized with loss masks and labels)
read back with `datasets.load_dataset("parquet", ...)` and compared row by row; the card; the command; refusals."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lib import hf_dataset
from tasks.formats.safe_parse import load_yaml
from training.masks import tokenize_sample
from training_jobs import exports, hf_export
from training_jobs.models import DatasetSample, TrainingDataset

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.django_db


def load(folder, config, split):
    files = {split: str(folder / config / f"{split}-*.parquet")}
    return datasets.load_dataset("parquet", data_files=files)[split]


def as_exported(message: dict) -> dict:
    """A loaded message back in the other exports' shape: absent keys dropped, object arguments parsed."""
    message = {k: v for k, v in message.items() if v is not None}
    for call in message.get("tool_calls", []):
        if call["id"] is None:
            del call["id"]
        try:
            parsed = json.loads(call["function"]["arguments"])
        except ValueError:
            continue
        if isinstance(parsed, dict):
            call["function"]["arguments"] = parsed
    return message


def test_messages_configuration_loads_back_row_by_row(dataset, tmp_path):
    result = hf_export.export_dataset_hf(dataset, tmp_path / "hf")
    assert {(s.config, s.split): s.rows for s in result.splits} == {
        ("messages", split): dataset.samples.filter(split=split).count() for split in DatasetSample.Split.values
    }
    for split in DatasetSample.Split.values:
        loaded = list(load(tmp_path / "hf", "messages", split))
        expected = list(exports.samples(dataset, split))
        stored = dataset.samples.filter(split=split).order_by("position")
        assert len(loaded) == len(expected) == stored.count() > 0
        for row, sample, record in zip(loaded, expected, stored, strict=True):
            assert [as_exported(m) for m in row["messages"]] == sample["messages"]
            assert json.loads(row["tools"]) == sample["tools"]
            assert (row["task_id"], row["reward"]) == (record.task_external_id, record.reward)
            assert (row["tokens"], row["assistant_spans"]) == (record.tokens, record.assistant_spans)
    calls = [m for row in load(tmp_path / "hf", "messages", "train") for m in row["messages"] if m["tool_calls"]]
    assert calls, "the corpus has tool calls: their arguments must come through"


def test_tokenized_configuration_has_masks_and_labels(dataset, tiny_model_path, tmp_path):
    from transformers import AutoTokenizer

    hf_export.export_dataset_hf(dataset, tmp_path / "hf", tokenizer_path=tiny_model_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    loaded = list(load(tmp_path / "hf", "tokenized", "train"))
    expected = [tokenize_sample(s, tokenizer) for s in exports.samples(dataset, "train")]
    assert len(loaded) == len(expected) == dataset.samples.filter(split="train").count()
    for row, sample in zip(loaded, expected, strict=True):
        assert row["input_ids"] == sample["input_ids"] and row["assistant_masks"] == sample["assistant_masks"]
        assert row["length"] == len(row["input_ids"])
        assert row["labels"] == [t if m else -100 for t, m in zip(row["input_ids"], row["assistant_masks"])]
        assert 0 < sum(row["assistant_masks"]) < row["length"]
    validation = dataset.samples.filter(split="validation").count()
    assert len(load(tmp_path / "hf", "tokenized", "validation")) == validation


def test_card_names_both_configurations_and_the_provenance(dataset, tiny_model_path, tmp_path):
    hf_export.export_dataset_hf(dataset, tmp_path / "hf", tokenizer_path=tiny_model_path)
    front = hf_dataset.read_card(tmp_path / "hf", load_yaml)
    assert [c["config_name"] for c in front["configs"]] == ["messages", "tokenized"]
    assert front["configs"][0]["data_files"] == [
        {"split": "train", "path": "messages/train-*"},
        {"split": "validation", "path": "messages/validation-*"},
    ]
    infos = {info["config_name"]: info for info in front["dataset_info"]}
    for config in ("messages", "tokenized"):
        assert infos[config]["features"] == load(tmp_path / "hf", config, "train").features._to_yaml_list()
    assert infos["tokenized"]["splits"][0]["num_examples"] == dataset.samples.filter(split="train").count()
    assert front["license"] == "other"
    provenance = front["clawgym"]
    assert provenance["dataset"] == dataset.pk and provenance["sha256"] == dataset.sha256
    assert provenance["models"] == ["m"] and provenance["tokenizer"] == tiny_model_path
    revisions = {
        f"{s.trajectory.rollout.revision.task.external_id}@{s.trajectory.rollout.revision.content_hash}"
        for s in dataset.samples.select_related("trajectory__rollout__revision__task")
    }
    assert provenance["revisions"] == sorted(revisions)
    # Loaded as a folder, the card's configs are what datasets reads.
    train = dataset.samples.filter(split="train").count()
    assert datasets.load_dataset(str(tmp_path / "hf"), "tokenized")["train"].num_rows == train


def test_command_writes_the_folder_and_refuses_what_it_cannot(dataset, tmp_path):
    out = StringIO()
    call_command("export_dataset", str(dataset.pk), str(tmp_path / "hf"), "--format", "hf", "--json", stdout=out)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["format"] == "hf" and report["samples"] == dataset.samples.count()
    assert report["paths"] == [
        "README.md",
        "messages/train-00000-of-00001.parquet",
        "messages/validation-00000-of-00001.parquet",
    ]
    with pytest.raises(CommandError, match="not empty; use --force"):
        call_command("export_dataset", str(dataset.pk), str(tmp_path / "hf"), "--format", "hf")
    with pytest.raises(CommandError, match="leave out --split"):
        call_command("export_dataset", str(dataset.pk), str(tmp_path / "x"), "--format", "hf", "--split", "train")
    with pytest.raises(CommandError, match="does not exist here"):
        call_command("export_dataset", str(dataset.pk), str(tmp_path / "y"), "--format", "hf", "--tokenizer", "/nope")
    dataset.status = TrainingDataset.Status.BUILDING
    dataset.save()
    with pytest.raises(CommandError, match="not ready"):
        call_command("export_dataset", str(dataset.pk), str(tmp_path / "z"), "--format", "hf")


def test_a_dataset_counted_with_a_tokenizer_exports_both_configurations_that_agree(tiny_model_path, tmp_path):
    from training_jobs.services.datasets import build_dataset
    from training_jobs.testing.corpus import make_corpus

    corpus = make_corpus()
    selection = {"eval_runs": [corpus.run.pk], "groups": [corpus.group]}
    dataset = build_dataset(selection=selection, name="counted", user=None, tokenizer_path=tiny_model_path)
    result = hf_export.export_dataset_hf(dataset, tmp_path / "hf")  # the dataset's own tokenizer
    assert {s.config for s in result.splits} == {"messages", "tokenized"}
    messages = list(load(tmp_path / "hf", "messages", "train"))
    tokenized = list(load(tmp_path / "hf", "tokenized", "train"))
    assert len(messages) == len(tokenized) > 0
    for stored, row in zip(messages, tokenized, strict=True):
        runs, start = [], None
        for i, mask in enumerate([*row["assistant_masks"], 0]):
            if mask and start is None:
                start = i
            elif not mask and start is not None:
                runs.append([start, i])
                start = None
        # What the dataset stored when it was built is what the export's masks say.
        assert stored["tokens"] == row["length"] and stored["assistant_spans"] == runs
    assert hf_dataset.read_card(tmp_path / "hf", load_yaml)["clawgym"]["tokenizer_sha256"] == dataset.tokenizer_sha256
