"""Synthesis batches: their items drawn, their configuration, and what they produced. Starting, resuming,
cancelling and running one in this process are synthesis.services' (start_batch, resume_batch, cancel_batch,
run_here), on what this module gives them.

    seeds = draw_seeds("persona", 20, seed=7, options={})   # the items' seeds, the same for the same seed
    config = batch_config(route=…, …); config_hash(config)   # what a batch is, and what a resume may change
    batch_json(batch)   # the `synthesize --json` shape;  funnel(batch), stage_costs(batch), report(batch)

Items and their seeds are drawn when the batch starts, from the batch seed alone (random.Random(seed)), so the same
seed over the same seed data draws the same items:
- persona route: z = (persona, subcategory, k operations) over enabled personas, every ScenarioSubcategory and
  enabled AtomicOperations, those needing the network left out unless options["allow_network"];
  k = options["operations"] (default 3);
- skill route: a main skill among the synthesizable ones, and 0–3 supporting skills drawn without replacement
  with weights 0.05 + cosine similarity of the skills' annotations to the main one's (MiniLM embeddings of
  synthesis.novelty when its model loads, else token-overlap (Jaccard) similarity; the item's seed says which).
A preview batch is a batch of its own (preview=True) of PREVIEW_COUNT items through every stage.

A start with the configuration of an earlier batch (same route, count, endpoints, seed, options, thresholds,
prompts; the budget is not part of it) resumes that batch, cancelled or paused, instead of drawing its items
again: nothing is synthesized twice (a complete one is returned as it is; another seed starts a new batch). resume_batch takes the budget given, reclaims items a dead worker left running and
retries retryable failures. A changed configuration is refused, except for the judge, qa_thresholds and
options["qa_stages"]: those rerun the QA stage only, on the items that were not kept (rejected at qa:*, failed at
qa, or not there yet); the earlier stages' results are kept and kept tasks stay as they are in the catalog
(`assess_tasks` assesses them again).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter

from django.db.models import Count, Sum

from llm.models import ModelCall
from tasks.models import ScenarioSubcategory

from . import pipeline
from .annotation import skill_synthesizable
from .models import AtomicOperation, Persona, Route, Skill, SynthesisBatch, SynthesisItem
from .stages import PROMPT_VERSIONS

PREVIEW_COUNT = 5
MAX_COUNT = 20_000
OPERATIONS_PER_TASK = 3
MAX_SUPPORTING = 3
BASE_WEIGHT = 0.05  # a supporting skill unlike the main one may still be drawn, rarely
QA_KEYS = ("judge", "qa_thresholds", "qa_stages")  # what a resume may change: QA is run again


class BatchError(ValueError):
    """The batch cannot start or resume as asked; the message says why and what to do."""


class NoSynthesizableSkills(BatchError):
    """The skill route has no skill to draw: none is imported, annotated and labelled synthesizable (the pages link
    the Skills page, where both are buttons; the message names the commands for scripts)."""


# --- drawing the items ------------------------------------------------------------------------------------------


def _persona_seeds(rng: random.Random, count: int, options: dict) -> list[dict]:
    personas = list(Persona.objects.filter(enabled=True).order_by("pk").values("pk", "text"))
    subcategories = list(ScenarioSubcategory.objects.select_related("category").order_by("pk"))
    operations = AtomicOperation.objects.filter(enabled=True).select_related("category").order_by("pk")
    if not options.get("allow_network"):
        operations = operations.filter(needs_network=False)
    operations = list(operations)
    k = int(options.get("operations", OPERATIONS_PER_TASK))
    missing = [
        what
        for what, rows in (
            ("enabled personas", personas),
            ("scenario subcategories", subcategories),
            ("enabled atomic operations", operations),
        )
        if not rows
    ]
    if missing:
        raise BatchError(
            f"the persona route needs seed data: there are no {', '.join(missing)} "
            "(`import_personas`, the taxonomy and operations migrations)"
        )
    seeds = []
    for _ in range(count):
        persona = rng.choice(personas)
        sub = rng.choice(subcategories)
        ops = rng.sample(operations, min(k, len(operations)))
        seeds.append(
            {
                "persona": {"id": persona["pk"], "text": persona["text"]},
                "subcategory": {
                    "id": sub.pk,
                    "slug": sub.slug,
                    "name": sub.name,
                    "description": sub.description,
                    "category": sub.category.name,
                    "category_slug": sub.category.slug,
                },
                "operations": [
                    {
                        "id": op.pk,
                        "slug": op.slug,
                        "name": op.name,
                        "description": op.description,
                        "category": op.category.name,
                    }
                    for op in ops
                ],
            }
        )
    return seeds


def _annotation_text(skill: Skill) -> str:
    annotation = skill.latest_annotation()
    if annotation is None:
        return f"{skill.name} {skill.description}"
    return " ".join([annotation.summary, annotation.core_content, annotation.input_format, annotation.output_format])


_WORD = re.compile(r"[a-z0-9]{3,}")


def _token_similarity(texts: list[str]) -> list[list[float]]:
    words = [set(_WORD.findall(text.lower())) for text in texts]
    return [[len(a & b) / len(a | b) if a | b else 0.0 for b in words] for a in words]


def skill_similarity(texts: list[str]) -> tuple[list[list[float]], str]:
    """Pairwise similarity of annotation texts, and how it was measured ("minilm" or "token-overlap")."""
    try:
        from .novelty import embed

        vectors = embed(texts)
    except Exception:  # the model package is missing or cannot load: similarity by shared words instead
        return _token_similarity(texts), "token-overlap"
    return (vectors @ vectors.T).tolist(), "minilm"


def _weighted_sample(rng: random.Random, choices: list[int], weights: list[float], n: int) -> list[int]:
    chosen, choices, weights = [], list(choices), list(weights)
    for _ in range(n):
        point, total = rng.random() * sum(weights), 0.0
        for at, weight in enumerate(weights):
            total += weight
            if point < total or at == len(weights) - 1:
                chosen.append(choices.pop(at))
                weights.pop(at)
                break
    return chosen


def _skill_seeds(rng: random.Random, count: int, options: dict) -> list[dict]:
    skills = [s for s in Skill.objects.order_by("name") if skill_synthesizable(s)]
    if not skills:
        raise NoSynthesizableSkills(
            "the skill route needs synthesizable skills: import skills (`import_skills`) and annotate "
            "them (`annotate_skills`)"
        )
    similarity, measure = skill_similarity([_annotation_text(s) for s in skills])
    most = min(MAX_SUPPORTING, int(options.get("supporting", MAX_SUPPORTING)), len(skills) - 1)
    seeds = []
    for _ in range(count):
        main = rng.randrange(len(skills))
        others = [j for j in range(len(skills)) if j != main]
        weights = [BASE_WEIGHT + max(0.0, similarity[main][j]) for j in others]
        supporting = _weighted_sample(rng, others, weights, rng.randint(0, most)) if most > 0 else []
        seeds.append(
            {
                "main": {"id": skills[main].pk, "name": skills[main].name},
                "supporting": [
                    {"id": skills[j].pk, "name": skills[j].name, "similarity": round(similarity[main][j], 4)}
                    for j in supporting
                ],
                "similarity": measure,
            }
        )
    return seeds


def draw_seeds(route: str, count: int, seed: int, options: dict) -> list[dict]:
    rng = random.Random(seed)
    return _persona_seeds(rng, count, options) if route == Route.PERSONA else _skill_seeds(rng, count, options)


# --- configuration --------------------------------------------------------------------------------------------


def prompt_versions(route: str) -> dict:
    generate = PROMPT_VERSIONS["generate_skill" if route == Route.SKILL else "generate_persona"]
    return {"generate": generate, **{k: v for k, v in PROMPT_VERSIONS.items() if not k.startswith("generate")}}


def batch_config(*, route, count, generator, judge, seed, preview, options, qa_thresholds) -> dict:
    """What a batch is, normalised (the budget is not part of it: it may change on resume)."""
    return {
        "route": route,
        "requested": count,
        "preview": preview,
        "generator": {"name": generator.name, "model": generator.model},
        "judge": {"name": judge.name, "model": judge.model},
        "seed": seed,
        "prompt_versions": prompt_versions(route),
        "options": options or {},
        "qa_thresholds": qa_thresholds or {},
    }


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def config_differences(old: dict, new: dict) -> list[str]:
    """The keys that differ; options are compared key by key ("options.qa_stages")."""
    keys = [k for k in sorted(set(old) | set(new)) if k != "options" and old.get(k) != new.get(k)]
    o, n = old.get("options") or {}, new.get("options") or {}
    keys += [f"options.{k}" for k in sorted(set(o) | set(n)) if o.get(k) != n.get(k)]
    return keys


def rejected_stage(item: SynthesisItem) -> str:
    return (item.stage_results.get(item.stage) or {}).get("rejected_at") or item.stage


def retryable(item: SynthesisItem) -> bool:
    """A failed item whose failure was retryable: resuming puts it back at the stage that failed."""
    return item.status == SynthesisItem.Status.FAILED and bool(
        (item.stage_results.get(item.stage) or {}).get("retryable")
    )


def resumable(batch: SynthesisBatch) -> bool:
    """Whether resuming would do anything: not while it runs; a complete batch only when an item failed in a way
    worth retrying (every other item is kept or rejected for good)."""
    if batch.status in (SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING):
        return False
    if batch.status != SynthesisBatch.Status.COMPLETE:
        return True
    failed = batch.items.filter(status=SynthesisItem.Status.FAILED).only("status", "stage", "stage_results")
    return any(retryable(item) for item in failed)


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
