#!/usr/bin/env python
"""Scale benchmark (issue 23, aim 5): a running evaluation run's page and a running synthesis batch's page with
20,000 items, against the same pages with 200 items, in one process.

1. For each size (`--baseline` 200, then `--items` 20,000) it writes that many tasks, one revision each, in bulk
   (bulk_create, spread over the benchmark categories, a quarter with a rubric), and:
   - an evaluation run over those revisions, one repeat (evaluation.services.runs.create_eval_run(..., user=None):
     the run, its task rows and its queued rollouts; no job is queued), marked running, with a realistic mix of
     its rollouts finished: 55 % scored (some at an agent limit or on an agent error), 3 % infra failures past
     their attempts, 2 % judging incomplete, 2 % running, the rest queued. The first `--incremental` of them
     finish through the path the product takes (the rollout row written, then run_progress.rollout_changed, as a worker
     does): its time per rollout is reported ("incremental_ms_per_rollout"). The others are written in bulk and
     the figures made by run_progress.recompute_run (its time reported), which gives the same rows and counters.
   - a synthesis batch of the same number of items, running, in the shape synthesis/pipeline.py writes them:
     30 % kept (every stage's result, a draft with files, checker, rubric and QA verdicts), 15 % rejected (at the
     verify, files or rubric stage, or at qa:novelty / qa:plausibility with the stage's own kind of reason), 5 %
     failed (retryable and not), 2 % running at some stage, the rest pending at generate; one model call per
     stage each item went through (ModelCall rows with its subject, tokens and cost), the batch's usage totals.
2. Signs an admin in through Django's test client and times `--requests` GETs of each page: the run page
   (/evaluations/runs/ID/) and the fragment its htmx polls every 2 s (the same URL with HX-Request: the "live"
   partial), the batch page (/synthesis/ID/) and its polled fragment, after one untimed warm-up request each.
   "static": nothing changes between requests. "live": before each request one more rollout of the run finishes
   through run_progress.rollout_changed (the run page), one more item of the batch moves on (the batch page), as on a
   page followed while work runs: the time of that write is not in the request's.
   Ratios are the 20,000-item p95 over the 200-item p95 of the same page and mode. "first_ms" is the warm-up
   request's time: the one that computes the figures lib.polled_figures then holds (the cost of the poll that
   recomputes them, about one in 30 at 20,000 items while the work moves on).

It runs on a throwaway test database: SQLite by default (a file in a temporary folder), or the PostgreSQL that
DATABASE_URL names (a test database of its own, named after this process, dropped at the end). It prints a
summary, and as its last line one JSON object: {"items", "baseline", "requests", "database", "pages": {"run",
"run_poll", "batch", "batch_poll"} x {"static", "live"} x {"small", "large", "ratio"}, "target_p95_ms", "met",
"build": {...}, "in_flight": {"limit", "run": {"rollouts", "jobs_on_engine", "start_s"}, "batch": {"items",
"jobs_on_engine", "held", "fan_out_s"}}}. The in-flight part starts a second run over the large size's revisions
(`start_eval_run`, so its jobs are queued as `evaluate` queues them) and fans the large batch's pending items out as
the batch job does, and counts what reached the engine.

    .venv/bin/python bench/scale_bench.py [--items 20000] [--baseline 200] [--requests 40] [--incremental 300]
                                          [--quick]
"""

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchstats import percentile  # noqa: E402  (bench/ helper)

TARGET_P95_MS = 200
SEED = 23
PAGES = ("run", "run_poll", "batch", "batch_poll")
MODES = ("static", "live")
USAGE = itertools.count(5_000)  # tokens of the rollouts finished and model calls made while pages are timed


def timing(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 1),
        "p95_ms": round(percentile(values, 0.95), 1),
    }


# --- the catalog ---------------------------------------------------------------------------------------------


def make_revisions(n: int, tag: str) -> list:
    """`n` tasks in bulk, one revision each (a quarter with a rubric), over the benchmark categories."""
    from tasks.models import BenchmarkCategory, Task, TaskRevision

    categories = list(BenchmarkCategory.objects.all()) or [None]
    revisions = []
    for start in range(0, n, 2000):
        ids = range(start, min(start + 2000, n))
        tasks = Task.objects.bulk_create(
            Task(
                external_id=f"{tag}-{i:06d}",
                title=f"Scale task {i} about invoices and travel plans",
                benchmark_category=categories[i % len(categories)] if i % 11 else None,
                status="ready",
                source="imported",
            )
            for i in ids
        )
        made = TaskRevision.objects.bulk_create(
            TaskRevision(
                task=t,
                number=1,
                instruction=t.title,
                content_hash=t.external_id,
                author_stage="bench",
                rubric=[{"name": "clear", "text": "The report is clear.", "weight": 1}] if i % 4 == 0 else [],
            )
            for i, t in zip(ids, tasks)
        )
        for t, r in zip(tasks, made):
            t.current_revision = r
        Task.objects.bulk_update(tasks, ["current_revision"])
        revisions += made
    return revisions


# --- the evaluation run ---------------------------------------------------------------------------------------


def rollout_state(rng: random.Random, share: float) -> dict | None:
    """The fields of a rollout in one of the mix's states (None: still queued)."""
    from evaluation.harnesses import ExitReason
    from evaluation.models import Rollout

    tokens_in, tokens_out = rng.randint(2_000, 40_000), rng.randint(100, 4_000)
    usage = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost": Decimal(tokens_in * 3 + tokens_out * 15) / Decimal(1_000_000),
        "agent_seconds": round(rng.uniform(5, 120), 2),
        "attempt": 1,
    }
    score = 1.0 if rng.random() < 0.55 else rng.choice([0.0, 0.25, 0.5, 0.75])
    if share < 0.47:
        return {**usage, "status": Rollout.Status.SCORED, "exit_reason": ExitReason.COMPLETED, "score": score}
    if share < 0.52:
        return {**usage, "status": Rollout.Status.SCORED, "exit_reason": ExitReason.TIMEOUT, "score": score}
    if share < 0.55:
        return {**usage, "status": Rollout.Status.SCORED, "exit_reason": ExitReason.ERROR, "score": score}
    if share < 0.58:  # past its attempts: not retried again
        return {**usage, "status": Rollout.Status.FAILED, "exit_reason": ExitReason.SANDBOX_ERROR, "attempt": 99}
    if share < 0.60:
        return {**usage, "status": Rollout.Status.INCOMPLETE, "exit_reason": ExitReason.COMPLETED, "score": score}
    if share < 0.62:
        return {"status": Rollout.Status.RUNNING, "attempt": 1}
    return None


def build_run(revisions: list, endpoint, incremental: int, rng: random.Random) -> tuple:
    """A running run over `revisions`, its mix of rollouts finished; returns (run, what it took)."""
    from django.utils import timezone

    from evaluation.models import EvalRun, Rollout
    from evaluation.services.run_progress import recompute_run, rollout_changed
    from evaluation.services.runs import create_eval_run

    began = time.perf_counter()
    run, _ = create_eval_run(
        endpoint=endpoint, revisions=revisions, harness="builtin", repeats=1, fresh=True, user=None, max_attempts=3
    )
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    created_s = time.perf_counter() - began
    now = timezone.now()
    queued = list(run.rollouts.order_by("pk"))
    changed = []
    for rollout in queued:
        state = rollout_state(rng, rng.random())
        if state is None:
            continue
        for key, value in state.items():
            setattr(rollout, key, value)
        rollout.started_at = now
        if rollout.status != Rollout.Status.RUNNING:
            rollout.finished_at, rollout.checker_seconds = now, 0.2
            rollout.code_score, rollout.check_status = rollout.score, "ok"
        changed.append(rollout)
    fields = [
        "status",
        "exit_reason",
        "score",
        "code_score",
        "check_status",
        "attempt",
        "input_tokens",
        "output_tokens",
        "cost",
        "agent_seconds",
        "checker_seconds",
        "started_at",
        "finished_at",
    ]
    one_by_one, in_bulk = changed[:incremental], changed[incremental:]
    began = time.perf_counter()
    for rollout in one_by_one:  # as a worker finishes a rollout: its row, then the run's figures
        rollout.save(update_fields=fields)
        rollout_changed(rollout.pk)
    incremental_s = time.perf_counter() - began
    began = time.perf_counter()
    Rollout.objects.bulk_update(in_bulk, fields, batch_size=1000)
    bulk_s = time.perf_counter() - began
    began = time.perf_counter()
    recompute_run(EvalRun.objects.get(pk=run.pk))
    recompute_s = time.perf_counter() - began
    run.refresh_from_db()
    if run.status != EvalRun.Status.RUNNING:
        raise RuntimeError(f"run #{run.pk} is {run.status}, not running")
    still_queued = [r.pk for r in queued if r.status == Rollout.Status.QUEUED]
    return (
        run,
        still_queued,
        {
            "rollouts": run.rollouts_total,
            "finished": run.rollouts_finished,
            "create_s": round(created_s, 2),
            "incremental_rollouts": len(one_by_one),
            "incremental_ms_per_rollout": round(incremental_s * 1000 / max(len(one_by_one), 1), 2),
            "bulk_rollouts": len(in_bulk),
            "bulk_write_s": round(bulk_s, 2),
            "recompute_run_s": round(recompute_s, 2),
        },
    )


def finish_one_rollout(rollout_id: int, rng: random.Random) -> None:
    """One queued rollout of the run scored, as a worker would finish it."""
    from django.utils import timezone

    from evaluation.harnesses import ExitReason
    from evaluation.models import Rollout
    from evaluation.services.run_progress import rollout_changed

    now = timezone.now()
    Rollout.objects.filter(pk=rollout_id).update(
        status=Rollout.Status.SCORED,
        exit_reason=ExitReason.COMPLETED,
        score=rng.choice([0.0, 0.5, 1.0]),
        attempt=1,
        input_tokens=next(USAGE),
        output_tokens=500,
        cost=Decimal("0.0225"),
        agent_seconds=30.0,
        started_at=now,
        finished_at=now,
    )
    rollout_changed(rollout_id)


# --- the synthesis batch ---------------------------------------------------------------------------------------

STAGES = ["generate", "files", "verify", "rubric", "qa", "catalog"]
QA_STAGES = ["novelty", "plausibility", "difficulty", "leak", "alignment", "rubric"]
PLAUSIBILITY_REASONS = [
    "the request mixes two unrelated jobs",
    "a real user would not ask for this file layout",
    "the expected output contradicts the input files",
    "the instruction asks for data the files do not hold",
]
FILES_REASONS = ["files: the spec names no input file", "files: data.csv does not match its spec (missing column)"]
FAILURES = [
    ("generate", "generate: the model's answer was not JSON after 3 tries", False),
    ("verify", "verify: the sandbox could not start (bubblewrap: no loop device)", True),
    ("qa", "qa: novelty: the embedding model could not be used: model file missing", True),
    ("files", "files: model endpoint unreachable: connection refused", True),
]


def _draft(i: int, rng: random.Random, through: int) -> dict:
    """The draft as the stages before `through` (an index into STAGES) leave it."""
    draft = {
        "instruction": f"I run a small bakery; please total the {rng.choice(['orders', 'invoices'])} in data/{i}.csv "
        "by month and write reports/summary.md with a table and a two-sentence summary. " * 3,
        "scenario": "bakery bookkeeping",
        "expected_behavior": "Reads the CSV, groups by month, writes the table.",
        "operations": ["aggregate", "write_report"],
        "difficulty": rng.randint(1, 5),
    }
    if through > 1:
        draft["file_spec"] = [{"path": f"data/{i}.csv", "type": "csv", "content": "orders with date and amount"}]
        draft["files"] = {f"data/{i}.csv": "date,amount\n" + "2026-01-03,12.50\n" * 20}
    if through > 2:
        draft["checker"] = {"check.py": "import json, pathlib\n" + "# check a figure\n" * 40, "reward.sh": "#!/bin/sh"}
        draft["solution"] = {"reports/summary.md": "| month | total |\n|---|---|\n| 2026-01 | 250.00 |\n"}
    if through > 3 and i % 4 == 0:
        draft["rubric"] = {"rules": [{"text": "The summary names the busiest month.", "weight": 1}]}
    return draft


def _qa_verdicts(i: int, rng: random.Random, failing: str = "") -> dict:
    verdicts = {}
    for stage in QA_STAGES:
        verdict = "fail" if stage == failing else "pass"
        details = {"score": rng.randint(3, 5)}
        reason = rng.choice(PLAUSIBILITY_REASONS) if verdict == "fail" else "fine"
        if stage == "novelty":
            similarity = rng.uniform(0.91, 0.99) if verdict == "fail" else rng.uniform(0.3, 0.89)
            details = {"nearest": f"grown-{rng.randint(0, 13_000):06d}", "similarity": round(similarity, 4)}
            word = "near-duplicate of" if verdict == "fail" else "nearest task"
            sign = "≥" if verdict == "fail" else "<"
            reason = f"{word} {details['nearest']}: similarity {similarity:.3f} {sign} 0.90 (whole pool)"
        if stage == "difficulty":
            details = {"level": rng.randint(1, 5)}
        verdicts[stage] = {
            "verdict": verdict,
            "reason": reason,
            "details": details,
            "model_call_id": None,
            "endpoint_name": "bench-judge",
            "prompt_version": "v1",
        }
    return verdicts


def _results_through(rng: random.Random, through: int) -> dict:
    """stage_results of an item that passed the stages before `through`."""
    results = {}
    for stage in STAGES[:through]:
        if stage == "verify":
            rounds = [{"round": 1, "problems": [], "runs": {"reference": 1.0, "empty": 0.0}, "sane": True}]
            results[stage] = {
                "verdict": "pass",
                "reason": "sane and solvable in round 1",
                "rounds": rounds,
                "sane": True,
                "solvable": True,
            }
        elif stage == "rubric" and rng.random() < 0.7:
            results[stage] = {"verdict": "skipped", "reason": "the task is graded by code only"}
        else:
            results[stage] = {"verdict": "pass", "reason": ""}
    return results


def item_state(i: int, rng: random.Random, share: float) -> dict:
    """An item's status, stage, stage_results, draft and reason, as the pipeline writes them."""
    seed = {
        "persona": {"id": i % 50, "name": f"persona {i % 50}"},
        "subcategory": {"category": f"category {i % 6}", "name": f"subcategory {i % 30}"},
        "operations": [{"id": k, "name": f"operation {(i + k) % 40}"} for k in range(3)],
    }
    state = {"seed": seed, "status": "pending", "stage": "generate", "stage_results": {}, "draft": {}, "reason": ""}
    if share < 0.30:  # kept: every stage passed
        results = _results_through(rng, 5)
        verdicts = _qa_verdicts(i, rng)
        results["qa"] = {"verdict": "pass", "reason": "", "verdicts": verdicts}
        results["catalog"] = {"verdict": "pass", "reason": "", "task_pk": None}
        draft = {**_draft(i, rng, 5), "qa": verdicts}
        return {**state, "status": "kept", "stage": "catalog", "stage_results": results, "draft": draft}
    if share < 0.45:  # rejected at some stage
        where = rng.choice(["qa:novelty", "qa:novelty", "qa:plausibility", "verify", "files", "rubric"])
        if where.startswith("qa:"):
            results = _results_through(rng, 4)
            verdicts = _qa_verdicts(i, rng, failing=where[3:])
            reason = verdicts[where[3:]]["reason"]
            results["qa"] = {"verdict": "fail", "reason": reason, "verdicts": verdicts, "rejected_at": where}
            draft = {**_draft(i, rng, 4), "qa": verdicts}
            stage = "qa"
        else:
            stage = where
            through = STAGES.index(stage)
            results, draft = _results_through(rng, through), _draft(i, rng, through)
            if stage == "verify":
                problems = [f"the empty workspace scores {rng.choice([0.5, 0.75, 1.0])} (over-lenient)"]
                rounds = [{"round": r, "problems": problems, "runs": {"empty": 0.5}, "sane": False} for r in (1, 2, 3)]
                reason = f"no sane, solvable checker after 3 rounds: {problems[0]}"
                results[stage] = {
                    "verdict": "fail",
                    "reason": reason,
                    "rounds": rounds,
                    "sane": False,
                    "solvable": False,
                    "rejected_at": stage,
                }
            else:
                reason = rng.choice(FILES_REASONS) if stage == "files" else "the rubric repeats the checker"
                results[stage] = {"verdict": "fail", "reason": reason, "rejected_at": stage}
        return {
            **state,
            "status": "rejected",
            "stage": stage,
            "stage_results": results,
            "draft": draft,
            "reason": f"{where}: {reason}",
        }
    if share < 0.50:  # failed at a stage
        stage, reason, retryable = rng.choice(FAILURES)
        through = STAGES.index(stage)
        results = _results_through(rng, through)
        results[stage] = {"verdict": "error", "reason": reason, "retryable": retryable}
        return {
            **state,
            "status": "failed",
            "stage": stage,
            "stage_results": results,
            "draft": _draft(i, rng, through),
            "reason": reason,
        }
    if share < 0.52:  # running at some stage
        through = rng.randint(0, 4)
        return {
            **state,
            "status": "running",
            "stage": STAGES[through],
            "stage_results": _results_through(rng, through),
            "draft": _draft(i, rng, through) if through else {},
        }
    return state


def build_batch(n: int, generator, rng: random.Random) -> tuple:
    """A running batch of `n` items in the mix; one model call per stage each item went through."""
    from django.db.models import Sum
    from django.utils import timezone

    from llm.models import ModelCall
    from synthesis.models import SynthesisBatch, SynthesisItem

    began = time.perf_counter()
    batch = SynthesisBatch.objects.create(
        name=f"scale batch of {n}",
        route="persona",
        requested=n,
        generator=generator,
        judge=generator,
        seed=SEED,
        config={"route": "persona", "count": n},
        config_hash=f"scale-{n}-{time.time_ns()}",
        status=SynthesisBatch.Status.RUNNING,
        started_at=timezone.now(),
    )
    pending = []
    for start in range(0, n, 1000):
        items = []
        for i in range(start, min(start + 1000, n)):
            state = item_state(i, rng, rng.random())
            items.append(SynthesisItem(batch=batch, index=i, worker="bench" * (state["status"] == "running"), **state))
        made = SynthesisItem.objects.bulk_create(items)
        calls = []
        for item in made:
            if item.status == "pending":
                pending.append(item.pk)
            for stage in STAGES[: STAGES.index(item.stage) + (item.status != "pending")]:
                tokens_in, tokens_out = rng.randint(500, 6_000), rng.randint(100, 2_000)
                calls.append(
                    ModelCall(
                        endpoint=generator,
                        endpoint_name=generator.name,
                        model=generator.model,
                        purpose=f"synthesis:{stage}" if stage != "qa" else "qa:plausibility",
                        subject=item.subject,
                        request={"messages": [{"role": "user", "content": "…"}]},
                        response={"choices": [{"message": {"content": "…"}}]},
                        status_code=200,
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        cost=Decimal(tokens_in * 3 + tokens_out * 15) / Decimal(1_000_000),
                        latency_ms=800.0,
                    )
                )
        ModelCall.objects.bulk_create(calls, batch_size=2000)
    usage = ModelCall.objects.filter(subject__startswith="synthesis-item:", endpoint=generator).aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost")
    )
    SynthesisBatch.objects.filter(pk=batch.pk).update(
        input_tokens=usage["i"] or 0, output_tokens=usage["o"] or 0, cost=usage["c"] or 0
    )
    batch.refresh_from_db()
    return (
        batch,
        pending,
        {
            "items": n,
            "model_calls": ModelCall.objects.filter(endpoint=generator).count(),
            "build_s": round(time.perf_counter() - began, 2),
        },
    )


def move_one_item(item_id: int, rng: random.Random) -> None:
    """One pending item of the batch through its first stage and on to the next, as synthesis/pipeline.py's
    UPDATEs write it (claim, stage passed, back to pending between deliveries is not done: it stays running)."""
    from django.db.models import F
    from django.utils import timezone

    from synthesis.models import SynthesisBatch, SynthesisItem

    SynthesisItem.objects.filter(pk=item_id, status="pending").update(
        status="running", worker="bench", updated_at=timezone.now()
    )
    SynthesisItem.objects.filter(pk=item_id).update(
        stage="files", draft=_draft(item_id, rng, 1), stage_results=_results_through(rng, 1)
    )
    # The generate stage's model call, its usage added to the batch as synthesis services add it.
    tokens = next(USAGE) % 1000
    SynthesisBatch.objects.filter(items=item_id).update(input_tokens=F("input_tokens") + tokens)


# --- timing --------------------------------------------------------------------------------------------------


def time_page(client, url: str, htmx: bool, requests: int, before=None) -> dict:
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    began = time.perf_counter()
    response = client.get(url, **headers)  # warm-up: templates and query plans are not what is measured
    first_ms = (time.perf_counter() - began) * 1000  # with the figures computed: what one poll in ~30 pays
    assert response.status_code == 200, (url, response.status_code)
    timings, size = [], len(response.content)
    for i in range(requests):
        if before is not None:
            before(i)
        began = time.perf_counter()
        response = client.get(url, **headers)
        timings.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return {**timing(timings), "first_ms": round(first_ms, 1), "bytes": size}


def measure(client, size: dict, requests: int, rng: random.Random, modes: list[str]) -> dict:
    from django.urls import reverse

    run_url = reverse("evaluations:detail", args=[size["run"].pk])
    batch_url = reverse("synthesis:detail", args=[size["batch"].pk])
    # More requests than queued rollouts or pending items: they come round again (a rollout scored again, as a
    # regrade would, an item moved to its next stage again), each with new usage, so the counters still move.
    queued, pending = itertools.cycle(size["queued"]), itertools.cycle(size["pending"])

    def finish_rollout(_):
        finish_one_rollout(next(queued), rng)

    def move_item(_):
        move_one_item(next(pending), rng)

    found = {}
    for mode in modes:
        found[("run", mode)] = time_page(client, run_url, False, requests, finish_rollout if mode == "live" else None)
        found[("run_poll", mode)] = time_page(
            client, run_url, True, requests, finish_rollout if mode == "live" else None
        )
        found[("batch", mode)] = time_page(client, batch_url, False, requests, move_item if mode == "live" else None)
        found[("batch_poll", mode)] = time_page(
            client, batch_url, True, requests, move_item if mode == "live" else None
        )
    return found


def in_flight(revisions: list, endpoint, pending: list[int]) -> dict:
    """Starting a run over `revisions` as `evaluate` does (start_eval_run: the run, its rollouts, their jobs) and
    fanning a batch's `pending` items out as the synthesis.run_batch job does (JobContext.fan_out): how long each
    takes and how many jobs reach the engine (jobs.fanout.limit), against one per rollout / item before."""
    from evaluation.models import Rollout
    from evaluation.services.runs import start_eval_run
    from jobs import fanout
    from jobs.models import JobRun
    from jobs.runner import JobContext, worker_id
    from synthesis.job_kinds import RUN_BATCH_JOB, RUN_ITEM_JOB

    began = time.perf_counter()
    run, _ = start_eval_run(endpoint=endpoint, revisions=revisions, harness="builtin", fresh=True, user=None)
    start_s = time.perf_counter() - began
    on_engine = Rollout.objects.filter(eval_run=run, job_run__isnull=False).count()
    parent = JobRun.objects.create(kind=RUN_BATCH_JOB, engine="django_q", status="running", worker=worker_id())
    began = time.perf_counter()
    JobContext(parent).fan_out(RUN_ITEM_JOB, "item_id", pending, "items")
    fan_out_s = time.perf_counter() - began
    children = JobRun.objects.filter(parent=parent)
    return {
        "limit": fanout.limit("sandbox"),
        "run": {"rollouts": run.rollouts_total, "jobs_on_engine": on_engine, "start_s": round(start_s, 2)},
        "batch": {
            "items": len(pending),
            "jobs_on_engine": children.filter(held=False).count(),
            "held": children.filter(held=True).count(),
            "fan_out_s": round(fan_out_s, 2),
        },
    }


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000, help="tasks of the large run, items of the large batch")
    parser.add_argument("--baseline", type=int, default=200, help="the same for the baseline")
    parser.add_argument("--requests", type=int, default=40, help="timed GETs of each page, in each mode")
    parser.add_argument("--incremental", type=int, default=300, help="rollouts finished one by one in each run")
    parser.add_argument("--modes", default=",".join(MODES), help="static, live or both (comma-separated)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 items, 50 baseline, 5 requests")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - set(MODES):
        parser.error(f"--modes: {', '.join(MODES)}")
    if args.quick:
        args.items, args.baseline, args.requests, args.incremental = 1000, 50, 5, 20

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-scale-bench-"))
    os.environ["CLAWGYM_VAR_DIR"] = str(workdir)  # the SQLite test database and anything else written
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases

    from accounts.roles import ADMIN, grant_role
    from llm.models import ModelEndpoint

    if connection.vendor == "postgresql":  # a database of its own, dropped at the end
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"test_scale_bench_{os.getpid()}"
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    rng = random.Random(SEED)
    load_before = os.getloadavg()[0]
    report = {"items": args.items, "baseline": args.baseline, "requests": args.requests, "database": connection.vendor}
    try:
        admin = get_user_model().objects.create_user("scale-admin")
        grant_role(admin, ADMIN)
        endpoint = ModelEndpoint.objects.create(
            name="scale-model", base_url="http://127.0.0.1:9/v1", model="scale-model", roles=["agent", "generator"]
        )
        sizes, build = {}, {}
        for name, n in (("small", args.baseline), ("large", args.items)):
            began = time.perf_counter()
            revisions = make_revisions(n, f"scale{name}")
            tasks_s = time.perf_counter() - began
            run, queued, run_build = build_run(revisions, endpoint, min(args.incremental, n), rng)
            batch, pending, batch_build = build_batch(n, endpoint, rng)
            sizes[name] = {"run": run, "queued": queued, "batch": batch, "pending": pending}
            build[name] = {"tasks_s": round(tasks_s, 2), "run": run_build, "batch": batch_build}
            if name == "large":
                report["in_flight"] = in_flight(revisions, endpoint, list(pending))
            print(f"built {name}: {n:,} items: {json.dumps(build[name])}", flush=True)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # autovacuum would analyze tables this fresh within a minute
                cursor.execute("ANALYZE")
        client = Client()
        client.force_login(admin)
        found = {name: measure(client, sizes[name], args.requests, rng, modes) for name in sizes}
        pages = {}
        for page in PAGES:
            pages[page] = {}
            for mode in modes:
                small, large = found["small"][(page, mode)], found["large"][(page, mode)]
                pages[page][mode] = {
                    "small": small,
                    "large": large,
                    "ratio": round(large["p95_ms"] / max(small["p95_ms"], 0.1), 2),
                }
        worst = max(pages[p][m]["large"]["p95_ms"] for p in PAGES for m in modes)
        report.update(
            {
                "pages": pages,
                "worst_large_p95_ms": worst,
                "target_p95_ms": TARGET_P95_MS,
                "met": worst <= TARGET_P95_MS,
                "build": build,
                "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            }
        )
    finally:
        teardown_databases(old, verbosity=0)
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nPages on {report['database']}, {args.requests} requests each (p50 / p95 ms, page bytes):")
    for page in PAGES:
        for mode in modes:
            row = pages[page][mode]
            s, large = row["small"], row["large"]
            print(
                f"  {page:10s} {mode:6s}  {args.baseline:>6,}: {s['p50_ms']:8.1f} / {s['p95_ms']:8.1f}  "
                f"{args.items:>6,}: {large['p50_ms']:8.1f} / {large['p95_ms']:8.1f} ({large['bytes']:,} B)  "
                f"ratio {row['ratio']}"
            )
    flight = report["in_flight"]
    print(
        f"jobs on the engine (limit {flight['limit']}): a run of {flight['run']['rollouts']:,} rollouts "
        f"{flight['run']['jobs_on_engine']} (started in {flight['run']['start_s']} s), a batch of "
        f"{flight['batch']['items']:,} pending items {flight['batch']['jobs_on_engine']} "
        f"({flight['batch']['held']:,} held, fanned out in {flight['batch']['fan_out_s']} s)"
    )
    print(
        f"worst p95 at {args.items:,}: {worst} ms (target {TARGET_P95_MS} ms: {'met' if report['met'] else 'NOT met'})"
    )
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
