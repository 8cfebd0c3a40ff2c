"""A training dataset as a Hugging Face dataset: Parquet files and a dataset card (lib.hf_dataset).

Two configurations, each with the dataset's `train` and `validation` splits (a split with no samples is an empty file,
so both always load):
- `messages` (the default): `task_id`, `reward`, `tokens` and `assistant_spans` as the dataset stores them (counted
  with its tokenizer when it has one: [start, end) of each run of trained tokens; else the usage estimate and no
  spans), `messages` and `tools`, one row per sample in order. Messages are
  normalised as the other exports write them (training.masks.chat_messages); a message's keys it lacks are null,
  since Parquet holds one schema a column. A tool call's `arguments` is JSON text, as the OpenAI API sends it, and
  `tools` (JSON schemas of any shape) is JSON text too.
- `tokenized`, with a tokenizer (the dataset's own, or one named): `input_ids`, `assistant_masks` (1 on the tokens
  trained on), `labels` (the token where trained, -100 elsewhere: what a causal LM's loss reads) and `length`.

pyarrow writes the files; transformers is imported only for the `tokenized` configuration, inside the function.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
from django.conf import settings

from evaluation.models import Trajectory
from lib import hf_dataset
from training.masks import chat_messages, require_generation_markers, tokenize_sample

from .exports import ExportError, check_exportable
from .models import DatasetSample, TrainingDataset

FORMAT = "clawgym-sft-hf/1"
IGNORE_INDEX = -100
TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("reasoning_content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
MESSAGES_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("reward", pa.float64()),
        ("tokens", pa.int32()),
        ("assistant_spans", pa.list_(pa.list_(pa.int32()))),
        ("messages", pa.list_(MESSAGE)),
        ("tools", pa.string()),
    ]
)
TOKENIZED_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("assistant_masks", pa.list_(pa.int8())),
        ("labels", pa.list_(pa.int64())),
        ("length", pa.int32()),
    ]
)
BODY = """## Loading

```python
import json
from datasets import load_dataset

sft = load_dataset("parquet", data_files={"train": "messages/train-*.parquet"})["train"]
messages = [{k: v for k, v in m.items() if v is not None} for m in sft[0]["messages"]]
tools = json.loads(sft[0]["tools"])
```

A message's keys it does not have are null (drop them, as above, before a chat template). The `tokenized`
configuration, where present, was made with the tokenizer named under provenance: `labels` is -100 on every token
the loss leaves out (prompts, tool results), as TRL and transformers read it."""


def _arguments(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _message(message: dict) -> dict:
    row = {key: message.get(key) for key in ("role", "content", "reasoning_content", "tool_call_id", "name")}
    calls = message.get("tool_calls")
    row["tool_calls"] = (
        [
            {
                "id": call.get("id"),
                "type": call.get("type", "function"),
                "function": {
                    "name": call["function"].get("name", ""),
                    "arguments": _arguments(call["function"].get("arguments")),
                },
            }
            for call in calls
        ]
        if calls
        else None
    )
    return row


def _samples(dataset: TrainingDataset, split: str):
    rows = dataset.samples.filter(split=split).order_by("position")
    fields = ("task_external_id", "reward", "trajectory__messages", "trajectory__tools", "tokens", "assistant_spans")
    yield from rows.values_list(*fields).iterator(chunk_size=200)


def message_rows(dataset: TrainingDataset, split: str):
    """The `messages` configuration's rows of one split, in order."""
    for task_id, reward, messages, tools, tokens, spans in _samples(dataset, split):
        yield {
            "task_id": task_id,
            "reward": reward,
            "tokens": tokens,
            "assistant_spans": [list(span) for span in spans or []],
            "messages": [_message(m) for m in chat_messages(messages)],
            "tools": json.dumps(tools or [], ensure_ascii=False),
        }


def tokenized_rows(dataset: TrainingDataset, split: str, tokenizer, max_length: int | None = None):
    for _, _, messages, tools, _, _ in _samples(dataset, split):
        sample = tokenize_sample({"messages": messages, "tools": tools or []}, tokenizer, max_length)
        masks = sample["assistant_masks"]
        labels = [token if mask else IGNORE_INDEX for token, mask in zip(sample["input_ids"], masks, strict=True)]
        yield {**sample, "labels": labels}


def _provenance(dataset: TrainingDataset, tokenizer_path: str) -> dict:
    trajectories = Trajectory.objects.filter(pk__in=dataset.samples.values("trajectory_id"))
    models = sorted(set(trajectories.values_list("rollout__endpoint__model", flat=True)) - {None, ""})
    revisions = sorted(
        {
            f"{task}@{content_hash}"
            for task, content_hash in trajectories.values_list(
                "rollout__revision__task__external_id", "rollout__revision__content_hash"
            )
        }
    )
    return {
        "format": FORMAT,
        "kind": "sft_dataset",
        "dataset": dataset.pk,
        "name": dataset.name,
        "sha256": dataset.sha256,
        "built_at": dataset.built_at.isoformat() if dataset.built_at else None,
        "models": models,
        "revisions": revisions,
        "selection": dataset.selection,
        "filters": dataset.filters,
        "tokenizer": tokenizer_path or None,
        "tokenizer_sha256": (dataset.tokenizer_sha256 or None) if tokenizer_path == dataset.tokenizer_path else None,
        "clawgym_version": hf_dataset.clawgym_version(settings.BASE_DIR),
    }


def card(dataset: TrainingDataset, tokenizer_path: str) -> hf_dataset.Card:
    provenance = _provenance(dataset, tokenizer_path)
    models = ", ".join(provenance["models"]) or "the models named under provenance"
    return hf_dataset.Card(
        title=f"{dataset.name} (SFT dataset #{dataset.pk})",
        summary=(
            f"Multi-turn agent trajectories for supervised fine-tuning, from ClawGym's training dataset #{dataset.pk} "
            f"`{dataset.name}`: {dataset.trajectories_count} trajectories selected by outcome reward from rollouts "
            "of workspace tasks; only the assistant's own tokens are trained on."
        ),
        license_note=(
            f"The trajectories were written by {models} on ClawGym tasks: the models' terms of use and the tasks' "
            "licences apply, and ClawGym records none for the whole."
        ),
        provenance=provenance,
        tags=["agents", "sft", "tool-use"],
        body=BODY,
    )


def _tokenizer(path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: never a download
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    require_generation_markers(tokenizer)
    return tokenizer


def export_dataset_hf(
    dataset: TrainingDataset,
    out,
    *,
    tokenizer_path=None,
    max_length: int | None = None,
    force: bool = False,
) -> hf_dataset.HfResult:
    """Write the dataset as a Hugging Face dataset folder; with a tokenizer (given, else the dataset's when it was
    counted with one) also the `tokenized` configuration. Raises ExportError, or masks.MaskError for a tokenizer
    whose chat template has no generation markers."""
    check_exportable(dataset, None)
    splits = DatasetSample.Split.values
    configs = [
        hf_dataset.Config(
            "messages",
            MESSAGES_SCHEMA,
            {split: (lambda split=split: message_rows(dataset, split)) for split in splits},
            "The conversations, one row per trajectory.",
        )
    ]
    path = str(tokenizer_path or dataset.tokenizer_path or "")
    if path:
        if not Path(path).is_dir():
            raise ExportError(f"the tokenizer folder {path} does not exist here")
        tokenizer = _tokenizer(path)
        configs.append(
            hf_dataset.Config(
                "tokenized",
                TOKENIZED_SCHEMA,
                {
                    split: (lambda split=split: tokenized_rows(dataset, split, tokenizer, max_length))
                    for split in splits
                },
                "The same rows tokenized with the tokenizer under provenance, with their loss masks.",
            )
        )
    return hf_dataset.write(out, configs, card(dataset, path), force=force)
