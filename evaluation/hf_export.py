"""An evaluation run's per-rollout results as a Hugging Face dataset: one Parquet split `rollouts` (the CSV export's
columns, evaluation.exports.CSV_COLUMNS, typed, plus each rollout's task `content_hash`) and a dataset card whose
provenance names the run, the model, the harness, the benchmark version and every revision scored."""

from __future__ import annotations

import pyarrow as pa
from django.conf import settings

from lib import hf_dataset

from .exports import CSV_COLUMNS, _rollouts, rollout_row
from .models import EvalRun

FORMAT = "clawgym-eval-run-hf/1"
SPLIT = "rollouts"
TYPES = {
    "run": pa.int64(),
    "rollout": pa.int64(),
    "revision": pa.int32(),
    "repeat": pa.int32(),
    "attempt": pa.int32(),
    "score": pa.float64(),
    "code_score": pa.float64(),
    "rubric_score": pa.float64(),
    "turns": pa.int32(),
    "tool_calls": pa.int32(),
    "model_calls": pa.int32(),
    "input_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "cost": pa.float64(),
    "agent_seconds": pa.float64(),
}
SCHEMA = pa.schema([(name, TYPES.get(name, pa.string())) for name in (*CSV_COLUMNS, "content_hash")])
BODY = """## Columns

One row per rollout (an agent's run on one task revision, scored by the task's checker and rubric), as the run's CSV
export has them: `score` is the task score (null when the rollout has none: `outcome` and `error` say why),
`content_hash` the scored revision's. Timestamps are ISO 8601 text.

```python
from datasets import load_dataset
rollouts = load_dataset("parquet", data_files={"rollouts": "data/rollouts-*.parquet"})["rollouts"]
```"""


def rows(run: EvalRun):
    for rollout in _rollouts(run).iterator(chunk_size=500):
        yield {**rollout_row(run, rollout), "content_hash": rollout.revision.content_hash}


def card(run: EvalRun) -> hf_dataset.Card:
    version = run.benchmark_version
    revisions = sorted(
        {
            f"{task}@{content_hash}"
            for task, content_hash in run.rollouts.values_list("revision__task__external_id", "revision__content_hash")
        }
    )
    return hf_dataset.Card(
        title=f"{run.name} (evaluation run #{run.pk})",
        summary=(
            f"Per-rollout results of ClawGym evaluation run #{run.pk}: the model `{run.endpoint.model}` with the "
            f"`{run.harness}` harness on {version or 'a list of task revisions'}, {run.repeats} repeat(s) a task."
        ),
        license_note="ClawGym records no licence for evaluation results; the benchmark's tasks may carry their own.",
        provenance={
            "format": FORMAT,
            "kind": "eval_run",
            "run": run.pk,
            "status": str(run.status),
            "benchmark": version.benchmark.name if version else None,
            "benchmark_version": version.number if version else None,
            "models": [run.endpoint.model],
            "endpoint": run.endpoint.name,
            "harness": run.harness,
            "repeats": run.repeats,
            "config_hash": run.config_hash,
            "overall_mean": run.overall_mean,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "revisions": revisions,
            "clawgym_version": hf_dataset.clawgym_version(settings.BASE_DIR),
        },
        tags=["agents", "evaluation"],
        body=BODY,
    )


def export_run_hf(run: EvalRun, out, *, force: bool = False) -> hf_dataset.HfResult:
    config = hf_dataset.Config("default", SCHEMA, {SPLIT: lambda: rows(run)})
    return hf_dataset.write(out, [config], card(run), force=force)


def download_response(run: EvalRun):
    """The export zipped under one top folder `eval-run-<id>-hf/`."""
    return hf_dataset.download_response(lambda folder: export_run_hf(run, folder), f"eval-run-{run.pk}-hf")
