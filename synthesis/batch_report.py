"""A synthesis batch's figures: what it kept, rejected and failed, its funnel, its cost per stage, the distributions of
its items and where they are. The `synthesize --json` and `synthesis_report --json` shapes, the API's and the pages'.

    batch_json(batch)   # the `synthesize --json` shape
    funnel(batch), stage_costs(batch), distributions(batch), progress(batch)
    report(batch)       # all of them: the `synthesis_report --json` shape

Every figure is counted from the batch's items and their ModelCalls when asked, never kept as a counter.
"""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, Sum

from llm.models import ModelCall

from . import pipeline
from .models import SynthesisBatch, SynthesisItem


def rejected_stage(item: SynthesisItem) -> str:
    return (item.stage_results.get(item.stage) or {}).get("rejected_at") or item.stage


def batch_json(batch: SynthesisBatch) -> dict:
    """The `synthesize --json` shape. Every item finished is counted once in kept, rejected or failed (a paused
    or cancelled batch's pending items in none)."""
    batch.refresh_from_db()
    rejected, failed = Counter(), Counter()
    kept = 0
    for item in batch.items.only("batch", "status", "stage", "stage_results"):
        if item.status == SynthesisItem.Status.KEPT:
            kept += 1
        elif item.status == SynthesisItem.Status.REJECTED:
            rejected[rejected_stage(item)] += 1
        elif item.status == SynthesisItem.Status.FAILED:
            failed[item.stage] += 1
    return {
        "batch": batch.pk,
        "status": batch.status,
        "requested": batch.requested,
        "kept": kept,
        "rejected": dict(sorted(rejected.items())),
        "failed": dict(sorted(failed.items())),
        "tokens": batch.input_tokens + batch.output_tokens,
        "cost": float(batch.cost),
    }


# The funnel: each step, and whether an item's recorded results passed it.
def _passed(results: dict, stage: str) -> bool:
    return (results.get(stage) or {}).get("verdict") in (pipeline.PASS, pipeline.SKIPPED)


def _qa_passed(results: dict, which: str) -> bool:
    """Whether QA's novelty step ("novelty") or its judge's steps ("other") passed. A QA that failed with no verdict
    of novelty (not asked, or not reached) is the judge's failure: it shows on the "plausible" row, not "novel"."""
    qa = results.get("qa") or {}
    if qa.get("verdict") in (pipeline.PASS, pipeline.SKIPPED):
        return True
    if not qa:
        return False  # not reached yet
    verdicts = qa.get("verdicts") or {}
    if which == "novelty":
        return (verdicts.get("novelty") or {"verdict": "pass"})["verdict"] == "pass"
    return bool(verdicts) and all(v["verdict"] == "pass" for s, v in verdicts.items() if s != "novelty")


FUNNEL = [
    ("generated", "generated", lambda r, i: _passed(r, "generate")),
    ("files_valid", "files valid", lambda r, i: _passed(r, "files")),
    ("checker_sane", "checker sane", lambda r, i: _passed(r, "verify") or bool((r.get("verify") or {}).get("sane"))),
    ("solvable", "solvable", lambda r, i: _passed(r, "verify")),
    ("rubric", "rubric ready", lambda r, i: _passed(r, "rubric")),
    ("novel", "novel", lambda r, i: _qa_passed(r, "novelty")),
    ("plausible", "plausible", lambda r, i: _qa_passed(r, "other")),
    ("kept", "kept", lambda r, i: i.status == SynthesisItem.Status.KEPT),
]
EXAMPLES = 3
REASON_KEY_CHARS = 160


def funnel(batch: SynthesisBatch) -> list[dict]:
    """The funnel rows in order: how many items passed each step, and of those that reached it but did not pass,
    how many were rejected or failed there, by reason, with a few example items (ids)."""
    rows = [
        {"step": key, "label": label, "count": 0, "rejected": 0, "failed": 0, "in_progress": 0, "reasons": {}}
        for key, label, _ in FUNNEL
    ]
    for item in batch.items.only("pk", "batch", "index", "status", "stage", "stage_results", "reason"):
        for row, (_key, _label, passed) in zip(rows, FUNNEL, strict=True):
            if passed(item.stage_results, item):
                row["count"] += 1
                continue
            if item.status == SynthesisItem.Status.REJECTED:
                row["rejected"] += 1
            elif item.status == SynthesisItem.Status.FAILED:
                row["failed"] += 1
            else:
                row["in_progress"] += 1
                break
            reason = (item.reason or "").strip()[:REASON_KEY_CHARS]
            entry = row["reasons"].setdefault(
                reason, {"reason": reason, "status": item.status, "count": 0, "examples": []}
            )
            entry["count"] += 1
            if len(entry["examples"]) < EXAMPLES:
                entry["examples"].append(item.pk)
            break
    for row in rows:
        row["reasons"] = sorted(row["reasons"].values(), key=lambda r: -r["count"])
    return rows


def stage_costs(batch: SynthesisBatch) -> dict:
    """Model calls, tokens and cost per purpose (synthesis:<stage>, and the QA stages' own), from ModelCall."""
    subjects = [f"synthesis-item:{pk}" for pk in batch.items.values_list("pk", flat=True)]
    totals: dict[str, dict] = {}
    for start in range(0, len(subjects), 500):
        rows = (
            ModelCall.objects.filter(subject__in=subjects[start : start + 500])
            .values("purpose")
            .annotate(
                calls=Count("pk"),
                input_tokens=Sum("input_tokens"),
                output_tokens=Sum("output_tokens"),
                cost=Sum("cost"),
            )
        )
        for row in rows:
            entry = totals.setdefault(row["purpose"], {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0})
            entry["calls"] += row["calls"]
            entry["input_tokens"] += row["input_tokens"] or 0
            entry["output_tokens"] += row["output_tokens"] or 0
            entry["cost"] += float(row["cost"] or 0)
    return dict(sorted(totals.items()))


def distributions(batch: SynthesisBatch) -> dict:
    """Counts over the items: subcategories, operations, skills (main and supporting), difficulty as the generator
    rated its own task and as the judge's quality assessment found it, and the same for the kept ones."""
    found = {name: Counter() for name in ("subcategories", "operations", "skills", "difficulty", "judge_difficulty")}
    kept = {name: Counter() for name in found}
    for item in batch.items.only("batch", "seed", "draft", "status"):
        into = [found, kept] if item.status == SynthesisItem.Status.KEPT else [found]
        for counts in into:
            seed = item.seed
            if "subcategory" in seed:
                counts["subcategories"][f"{seed['subcategory']['category']} / {seed['subcategory']['name']}"] += 1
                counts["operations"].update(op["name"] for op in seed["operations"])
            if "main" in seed:
                counts["skills"].update([seed["main"]["name"], *(s["name"] for s in seed["supporting"])])
            if item.draft.get("difficulty") is not None:
                counts["difficulty"][str(item.draft["difficulty"])] += 1
            judged = ((item.draft.get("qa") or {}).get("difficulty") or {}).get("details", {}).get("level")
            if judged is not None:
                counts["judge_difficulty"][str(judged)] += 1
    return {
        "all": {k: dict(v.most_common()) for k, v in found.items()},
        "kept": {k: dict(v.most_common()) for k, v in kept.items()},
    }


def progress(batch: SynthesisBatch) -> dict:
    """Where the items are: {"stages": {stage: {status: n}}, "finished": n, "requested": n} (for pages)."""
    stages: dict[str, dict] = {}
    finished = 0
    for row in batch.items.values("stage", "status").annotate(n=Count("pk")):
        stages.setdefault(row["stage"], {})[row["status"]] = row["n"]
        finished += row["n"] if row["status"] in SynthesisItem.FINISHED else 0
    return {"stages": stages, "finished": finished, "requested": batch.requested}


def report(batch: SynthesisBatch) -> dict:
    """synthesis_report --json: the batch_json figures, the funnel, cost per stage and the distributions."""
    return {
        **batch_json(batch),
        "funnel": funnel(batch),
        "stages": stage_costs(batch),
        "distributions": distributions(batch),
        "progress": progress(batch),
        "status_reason": batch.status_reason,
    }
