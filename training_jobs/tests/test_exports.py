"""export_dataset: a ready dataset as messages JSON lines and as tokenized Parquet (read back with pyarrow), every
sample in order or one split; refusals."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluation.models import Rollout, Trajectory
from llm.models import ModelEndpoint
from tasks.models import Task, TaskRevision
from training import masks
from training.tiny_model import tiny_model, tiny_tokenizer
from training_jobs import exports
from training_jobs.models import DatasetSample, TrainingDataset
from training_jobs.testing import varied_conversations

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def dataset():
    """A ready dataset over four trajectories (varied conversations), the third on the validation side."""
    endpoint = ModelEndpoint.objects.create(
        name="agent-m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"]
    )
    dataset = TrainingDataset.objects.create(name="four", status=TrainingDataset.Status.READY, trajectories_count=4)
    for position, sample in enumerate(varied_conversations()):
        task = Task.objects.create(external_id=f"t-{position}", status=Task.Status.READY, title=f"t-{position}")
        revision = TaskRevision.objects.create(task=task, number=1, instruction="Do it.", content_hash=f"h{position}")
        rollout = Rollout.objects.create(
            revision=revision,
            endpoint=endpoint,
            harness="builtin",
            attempt=1,
            status=Rollout.Status.SCORED,
            exit_reason="completed",
            score=1.0,
        )
        trajectory = Trajectory.objects.create(
            rollout=rollout, messages=sample["messages"], tools=sample["tools"], reward=1.0
        )
        split = DatasetSample.Split.VALIDATION if position == 2 else DatasetSample.Split.TRAIN
        DatasetSample.objects.create(
            dataset=dataset,
            position=position,
            trajectory=trajectory,
            split=split,
            task_external_id=task.external_id,
            reward=1.0,
        )
    return dataset


def export(*args) -> dict:
    out = StringIO()
    call_command("export_dataset", *map(str, args), "--json", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_messages_jsonl(dataset, tmp_path):
    result = export(dataset.pk, tmp_path / "all.jsonl", "--format", "messages")
    assert result == {"path": str(tmp_path / "all.jsonl"), "samples": 4, "format": "messages"}
    lines = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    expected = varied_conversations()
    assert [set(line) for line in lines] == [{"messages", "tools"}] * 4
    assert [line["messages"] for line in lines] == [masks.chat_messages(s["messages"]) for s in expected]  # in order
    assert [line["tools"] for line in lines] == [s["tools"] for s in expected]
    # Normalised for chat templates: arguments as objects, reasoning as reasoning_content, text parts joined.
    turn = lines[1]["messages"][2]
    assert turn["tool_calls"][0]["function"]["arguments"] == {"path": "sales.csv"}
    assert turn["reasoning_content"] == "The file is small; read it first."
    assert lines[2]["messages"][1] == {"role": "user", "content": "List the folder."}

    validation = export(dataset.pk, tmp_path / "validation.jsonl", "--format", "messages", "--split", "validation")
    assert validation["samples"] == 1
    assert json.loads((tmp_path / "validation.jsonl").read_text())["messages"] == lines[2]["messages"]
    assert exports.export_messages(dataset, tmp_path / "train.jsonl", split="train") == 3


def test_tokenized_parquet(dataset, tokenizer_path, tmp_path):
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    result = export(dataset.pk, tmp_path / "tok.parquet", "--format", "tokenized", "--tokenizer", tokenizer_path)
    assert result == {"path": str(tmp_path / "tok.parquet"), "samples": 4, "format": "tokenized"}
    table = pq.read_table(tmp_path / "tok.parquet")
    assert table.column_names == ["input_ids", "assistant_masks", "length"]
    rows = table.to_pylist()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path, local_files_only=True)
    # The samples as the database gives them back: PostgreSQL's jsonb keeps no key order, so the tools' schemas (and
    # arguments given as objects) may render in another order than the in-memory conversations; the export must
    # tokenize exactly what is stored.
    assert rows == [masks.tokenize_sample(s, tokenizer) for s in exports.samples(dataset)]
    assert len(rows) == len(varied_conversations())
    assert all(row["length"] == len(row["input_ids"]) == len(row["assistant_masks"]) for row in rows)
    assert all(set(row["assistant_masks"]) == {0, 1} for row in rows)
    assert masks.check_masks(dataset, tokenizer).ok  # the dataset itself, through the checker

    cut = export(
        dataset.pk,
        tmp_path / "cut.parquet",
        "--format",
        "tokenized",
        "--tokenizer",
        tokenizer_path,
        "--split",
        "train",
        "--max-length",
        "64",
    )
    assert cut["samples"] == 3
    assert pq.read_table(tmp_path / "cut.parquet").column("length").to_pylist() == [
        min(64, rows[i]["length"]) for i in (0, 1, 3)
    ]


def test_refusals(dataset, tokenizer_path, tmp_path):
    with pytest.raises(CommandError, match="needs --tokenizer"):
        export(dataset.pk, tmp_path / "x.parquet", "--format", "tokenized")
    with pytest.raises(CommandError, match="no training dataset #999"):
        export(999, tmp_path / "x.jsonl", "--format", "messages")
    plain = tiny_tokenizer()
    from trl.chat_template_utils import qwen3_chat_template

    plain.chat_template = qwen3_chat_template
    plain.save_pretrained(tmp_path / "plain")
    with pytest.raises(CommandError, match="generation %} markers.*get_training_chat_template"):
        export(dataset.pk, tmp_path / "x.parquet", "--format", "tokenized", "--tokenizer", tmp_path / "plain")
    TrainingDataset.objects.filter(pk=dataset.pk).update(status=TrainingDataset.Status.BUILDING)
    with pytest.raises(CommandError, match="building, not ready"):
        export(dataset.pk, tmp_path / "x.jsonl", "--format", "messages")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]  # nothing half-written left behind
