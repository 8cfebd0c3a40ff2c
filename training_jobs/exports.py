"""A training dataset written out for people who train elsewhere.

- messages: JSON lines `{"messages": […], "tools": […]}`, one per sample in order (what TRL, OpenRLHF and
  LLaMA-Factory read). Messages are normalised for chat templates (training.masks.chat_messages: text content as
  one string, tool-call arguments as objects, reasoning as `reasoning_content`).
- tokenized: Parquet with the columns `input_ids`, `assistant_masks` (1 on the model's own tokens) and `length`,
  for one tokenizer (a local folder; its chat template must carry generation markers), written by `datasets`.

Either holds every sample, or one split (`split="train"` / `"validation"`): the split is chosen, not a column, so
the files hold exactly those keys and columns. `datasets` and transformers are imported inside the functions only.
"""

import json
import os
import tempfile
from pathlib import Path

from training.masks import chat_messages, require_generation_markers, tokenize_sample

from .models import DatasetSample, TrainingDataset
from .services.datasets import empty_reason

FORMATS = ("messages", "tokenized")


class ExportError(ValueError):
    pass


def check_exportable(dataset: TrainingDataset, split: str | None) -> None:
    if dataset.status == TrainingDataset.Status.EMPTY:
        raise ExportError(f"dataset #{dataset.pk} is empty ({empty_reason(dataset)}): nothing to export")
    if dataset.status != TrainingDataset.Status.READY:
        raise ExportError(f"dataset #{dataset.pk} is {dataset.status}, not ready: nothing to export yet")
    if split is not None and split not in DatasetSample.Split.values:
        raise ExportError(f"unknown split {split!r}; known: {', '.join(DatasetSample.Split.values)}")


def samples(dataset: TrainingDataset, split: str | None = None):
    """{"messages", "tools"} of each sample in order (normalised messages), streamed from the database."""
    check_exportable(dataset, split)
    rows = dataset.samples.order_by("position")
    if split is not None:
        rows = rows.filter(split=split)
    for messages, tools in rows.values_list("trajectory__messages", "trajectory__tools").iterator(chunk_size=200):
        yield {"messages": chat_messages(messages), "tools": tools or []}


def export_messages(dataset: TrainingDataset, out, split: str | None = None) -> int:
    """Write the samples as JSON lines to the file `out`; returns how many."""
    count = 0
    with _replacing(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for sample in samples(dataset, split):
            fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
            count += 1
    return count


def export_tokenized(
    dataset: TrainingDataset, out, tokenizer_path, split: str | None = None, max_length: int | None = None
) -> int:
    """Write the samples tokenized with the tokenizer in the folder `tokenizer_path` as Parquet to the file `out`;
    returns how many. Raises masks.MaskError when its chat template has no generation markers."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: never a download
    from datasets import Dataset, Features, List, Value
    from transformers import AutoTokenizer

    require_generation_markers(AutoTokenizer.from_pretrained(str(tokenizer_path), local_files_only=True))
    check_exportable(dataset, split)  # before the cache and the output are touched
    features = Features(
        {"input_ids": List(Value("int32")), "assistant_masks": List(Value("int8")), "length": Value("int32")}
    )
    kwargs = {"dataset_id": dataset.pk, "tokenizer_path": str(tokenizer_path), "split": split, "max_length": max_length}
    # A fresh cache folder: from_generator caches by the generator's hash, which would not see a changed tokenizer.
    with tempfile.TemporaryDirectory(prefix="clawgym-export-") as cache, _replacing(out) as tmp:
        table = Dataset.from_generator(_tokenized_rows, features=features, cache_dir=cache, gen_kwargs=kwargs)
        table.to_parquet(tmp)
    return len(table)


def _tokenized_rows(dataset_id: int, tokenizer_path: str, split: str | None, max_length: int | None):
    """Streamed (rows are written to Arrow as they come, not held in memory)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path, local_files_only=True)
    for sample in samples(TrainingDataset.objects.get(pk=dataset_id), split):
        yield tokenize_sample(sample, tokenizer, max_length)


class _replacing:
    """A temporary path beside `out` that replaces it on success (a reader never sees half a file)."""

    def __init__(self, out):
        self.out = Path(out)

    def __enter__(self) -> Path:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.with_name(f".{self.out.name}.partial")
        return self.tmp

    def __exit__(self, kind, *exc):
        if kind is None:
            self.tmp.replace(self.out)
        else:
            self.tmp.unlink(missing_ok=True)
