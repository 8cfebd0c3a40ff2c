"""An evaluation run exported for papers and notebooks: JSON (the run, its figures, every rollout) and CSV (one row
per rollout). Both stream over the run's rollouts in id order, a few hundred rows at a time. The CSV's text cells are
neutralised for spreadsheets (lib.csvsafe): an error text can hold what a model or a harness wrote."""

from __future__ import annotations

import io
from collections.abc import Iterator

from lib.csvsafe import SafeDictWriter

from .models import EvalRun, Rollout
from .reports import run_json
from .services.scans import scan_json

CSV_COLUMNS = [
    "run",
    "rollout",
    "task",
    "revision",
    "category",
    "grading",
    "repeat",
    "attempt",
    "endpoint",
    "model",
    "harness",
    "status",
    "outcome",
    "exit_reason",
    "score",
    "code_score",
    "rubric_score",
    "turns",
    "tool_calls",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cost",
    "agent_seconds",
    "started_at",
    "finished_at",
    "error",
]
CHUNK = 500


def _rollouts(run: EvalRun):
    return (
        Rollout.objects.filter(eval_run=run)
        .select_related("revision__task__benchmark_category", "endpoint")
        .order_by("revision__task__external_id", "repeat_index", "id")
    )


def rollout_row(run: EvalRun, rollout: Rollout) -> dict:
    task = rollout.revision.task
    return {
        "run": run.pk,
        "rollout": rollout.pk,
        "task": task.external_id,
        "revision": rollout.revision.number,
        "category": task.benchmark_category.slug if task.benchmark_category_id else "uncategorized",
        "grading": "hybrid" if rollout.revision.has_rubric else "code",
        "repeat": rollout.repeat_index,
        "attempt": rollout.attempt,
        "endpoint": rollout.endpoint.name,
        "model": rollout.endpoint.model,
        "harness": rollout.harness,
        "status": rollout.status,
        "outcome": rollout.outcome,
        "exit_reason": rollout.exit_reason,
        "score": rollout.score,
        "code_score": rollout.code_score,
        "rubric_score": rollout.rubric_score,
        "turns": rollout.turns,
        "tool_calls": rollout.tool_calls,
        "model_calls": rollout.model_calls,
        "input_tokens": rollout.input_tokens,
        "output_tokens": rollout.output_tokens,
        "cost": float(rollout.cost),
        "agent_seconds": rollout.agent_seconds,
        "started_at": rollout.started_at.isoformat() if rollout.started_at else None,
        "finished_at": rollout.finished_at.isoformat() if rollout.finished_at else None,
        "error": (rollout.error or "").splitlines()[0][:300] if rollout.error else "",
    }


def iter_rows(run: EvalRun) -> Iterator[dict]:
    yield from (rollout_row(run, r) for r in _rollouts(run).iterator(chunk_size=CHUNK))


def run_export(run: EvalRun) -> dict:
    """Everything about the run: its settings, its figures (the `evaluate --json` shape) and every rollout."""
    return {
        **run_json(run),
        "config": run.config,
        "limits": run.limits,
        "harness_options": run.harness_options,
        "pass_threshold": run.pass_threshold,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "rollouts": list(iter_rows(run)),
        # What the transcript scanners found (the `scan_run --json` shape): counts per scanner and every finding.
        "scan": scan_json(run),
    }


def iter_csv(run: EvalRun) -> Iterator[str]:
    """The CSV text, a header and one line per rollout, as chunks (for a streaming response or a file)."""
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for index, row in enumerate(iter_rows(run), 1):
        writer.writerow(row)
        if index % CHUNK == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
