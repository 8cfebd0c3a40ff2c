"""Synthesis batches: start, resume, cancel, run in this process, and what they produced.

    batch = start_batch("persona", 20, generator, judge, seed=7)         # queued as jobs (synthesis.run_batch)
    batch = start_batch("skill", 5, generator, judge, preview=True, here=True); run_here(batch)
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
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

import jobs
from jobs.models import JobRun
from jobs.services import cancel_job
from llm.models import ModelCall, ModelEndpoint
from tasks.models import ScenarioSubcategory

from . import pipeline
from .annotation import skill_synthesizable
from .kinds import RUN_BATCH_JOB
from .models import AtomicOperation, Persona, Route, Skill, SynthesisBatch, SynthesisItem
from .stages import PROMPT_VERSIONS

PREVIEW_COUNT = 5
MAX_COUNT = 10_000
OPERATIONS_PER_TASK = 3
MAX_SUPPORTING = 3
BASE_WEIGHT = 0.05  # a supporting skill unlike the main one may still be drawn, rarely
QA_KEYS = ("judge", "qa_thresholds", "qa_stages")  # what a resume may change: QA is run again
_UNSET = object()


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
    missing = [what for what, rows in (("enabled personas", personas), ("scenario subcategories", subcategories),
                                       ("enabled atomic operations", operations)) if not rows]  # fmt: skip
    if missing:
        raise BatchError(f"the persona route needs seed data: there are no {', '.join(missing)} "
                         "(`import_personas`, the taxonomy and operations migrations)")  # fmt: skip
    seeds = []
    for _ in range(count):
        persona = rng.choice(personas)
        sub = rng.choice(subcategories)
        ops = rng.sample(operations, min(k, len(operations)))
        seeds.append({
            "persona": {"id": persona["pk"], "text": persona["text"]},
            "subcategory": {"id": sub.pk, "slug": sub.slug, "name": sub.name, "description": sub.description,
                            "category": sub.category.name, "category_slug": sub.category.slug},
            "operations": [{"id": op.pk, "slug": op.slug, "name": op.name, "description": op.description,
                            "category": op.category.name} for op in ops],
        })  # fmt: skip
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
        raise NoSynthesizableSkills("the skill route needs synthesizable skills: import skills (`import_skills`) and annotate "
                         "them (`annotate_skills`)")  # fmt: skip
    similarity, measure = skill_similarity([_annotation_text(s) for s in skills])
    most = min(MAX_SUPPORTING, int(options.get("supporting", MAX_SUPPORTING)), len(skills) - 1)
    seeds = []
    for _ in range(count):
        main = rng.randrange(len(skills))
        others = [j for j in range(len(skills)) if j != main]
        weights = [BASE_WEIGHT + max(0.0, similarity[main][j]) for j in others]
        supporting = _weighted_sample(rng, others, weights, rng.randint(0, most)) if most > 0 else []
        seeds.append({
            "main": {"id": skills[main].pk, "name": skills[main].name},
            "supporting": [{"id": skills[j].pk, "name": skills[j].name,
                            "similarity": round(similarity[main][j], 4)} for j in supporting],
            "similarity": measure,
        })  # fmt: skip
    return seeds


def draw_seeds(route: str, count: int, seed: int, options: dict) -> list[dict]:
    rng = random.Random(seed)
    return _persona_seeds(rng, count, options) if route == Route.PERSONA else _skill_seeds(rng, count, options)


# --- configuration --------------------------------------------------------------------------------------------


def _endpoint(value) -> ModelEndpoint:
    if isinstance(value, ModelEndpoint):
        return value
    found = ModelEndpoint.objects.filter(name=value).first()
    if found is None:
        raise BatchError(f"no model endpoint named {value!r}")
    return found


def prompt_versions(route: str) -> dict:
    generate = PROMPT_VERSIONS["generate_skill" if route == Route.SKILL else "generate_persona"]
    return {"generate": generate, **{k: v for k, v in PROMPT_VERSIONS.items() if not k.startswith("generate")}}


def batch_config(*, route, count, generator, judge, seed, preview, options, qa_thresholds) -> dict:
    """What a batch is, normalised (the budget is not part of it: it may change on resume)."""
    return {
        "route": route, "requested": count, "preview": preview,
        "generator": {"name": generator.name, "model": generator.model},
        "judge": {"name": judge.name, "model": judge.model},
        "seed": seed, "prompt_versions": prompt_versions(route), "options": options or {},
        "qa_thresholds": qa_thresholds or {},
    }  # fmt: skip


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def config_differences(old: dict, new: dict) -> list[str]:
    """The keys that differ; options are compared key by key ("options.qa_stages")."""
    keys = [k for k in sorted(set(old) | set(new)) if k != "options" and old.get(k) != new.get(k)]
    o, n = old.get("options") or {}, new.get("options") or {}
    keys += [f"options.{k}" for k in sorted(set(o) | set(n)) if o.get(k) != n.get(k)]
    return keys


def _budget(value, kind):
    if value is None:
        return None
    if kind is int:
        if int(value) < 0:
            raise BatchError("the token budget must not be negative")
        return int(value)
    value = Decimal(str(value))
    if value < 0:
        raise BatchError("the cost budget must not be negative")
    return value


# --- starting, resuming, cancelling ----------------------------------------------------------------------------


def start_batch(
    route, count, generator, judge, seed=None, preview=False, budget_usd=None, budget_tokens=None, options=None,
    qa_thresholds=None, user=None, here=False, name="",
) -> SynthesisBatch:
    """Create the batch and its items (or resume the earlier batch of this configuration, see the module
    docstring), and queue it on the job workers unless `here` (then call run_here). Raises BatchError."""
    if route not in Route.values:
        raise BatchError(f"unknown route {route!r}; choose one of {', '.join(Route.values)}")
    count = PREVIEW_COUNT if preview else int(count)
    if not 1 <= count <= MAX_COUNT:
        raise BatchError(f"the count must be between 1 and {MAX_COUNT:,}")
    generator, judge = _endpoint(generator), _endpoint(judge)
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    options = dict(options or {})
    config = batch_config(route=route, count=count, generator=generator, judge=judge, seed=seed, preview=preview,
                          options=options, qa_thresholds=qa_thresholds)  # fmt: skip
    digest = config_hash(config)
    budgets = {"budget_usd": _budget(budget_usd, Decimal), "budget_tokens": _budget(budget_tokens, int)}
    earlier = SynthesisBatch.objects.filter(config_hash=digest).order_by("pk").first()
    if earlier is not None:
        return resume_batch(earlier, user=user, here=here, **budgets)
    seeds = draw_seeds(route, count, seed, options)
    with transaction.atomic():
        batch = SynthesisBatch.objects.create(
            name=name, route=route, requested=count, preview=preview, generator=generator, judge=judge, seed=seed,
            prompt_versions=config["prompt_versions"], qa_thresholds=qa_thresholds or {}, options=options,
            config=config, config_hash=digest, created_by=user if user and user.is_authenticated else None,
            **budgets,
        )  # fmt: skip
        SynthesisItem.objects.bulk_create(
            SynthesisItem(batch=batch, index=i, seed=item_seed) for i, item_seed in enumerate(seeds)
        )
        if not here:
            _queue(batch, user)
    return batch


def _queue(batch: SynthesisBatch, user=None) -> None:
    run = jobs.enqueue(RUN_BATCH_JOB, created_by=user if user and user.is_authenticated else None, batch_id=batch.pk)
    SynthesisBatch.objects.filter(pk=batch.pk).update(job_run=run)
    batch.job_run = run


def _rerun_qa(batch: SynthesisBatch) -> int:
    """Send the items that were not kept and had reached QA back to it; returns how many."""
    count = 0
    for item in batch.items.filter(stage="qa").exclude(status=SynthesisItem.Status.KEPT).exclude(
        status=SynthesisItem.Status.RUNNING
    ):  # fmt: skip
        results = {k: v for k, v in item.stage_results.items() if k != "qa"}
        draft = {k: v for k, v in item.draft.items() if k != "qa"}
        count += SynthesisItem.objects.filter(pk=item.pk, status=item.status).update(
            status=SynthesisItem.Status.PENDING, stage_results=results, draft=draft, reason="", worker=""
        )
    return count


def _retry_failures(batch: SynthesisBatch) -> int:
    """Failed items whose failure was retryable go back to pending at the stage that failed."""
    count = 0
    for item in batch.items.filter(status=SynthesisItem.Status.FAILED):
        if not (item.stage_results.get(item.stage) or {}).get("retryable"):
            continue
        results = {k: v for k, v in item.stage_results.items() if k != item.stage}
        count += SynthesisItem.objects.filter(pk=item.pk, status=SynthesisItem.Status.FAILED).update(
            status=SynthesisItem.Status.PENDING, stage_results=results, reason=""
        )
    return count


def resume_batch(
    batch: SynthesisBatch, config: dict | None = None, *, budget_usd=_UNSET, budget_tokens=_UNSET, user=None,
    here: bool = False,
) -> SynthesisBatch:
    """Go on with the batch: what it has not finished, retryable failures, items a dead worker left running.

    `config` (a batch_config dict) that differs from the batch's is refused (BatchError naming the keys) unless
    only the judge, qa_thresholds and options["qa_stages"] differ: then those are taken and the QA stage is run
    again on the items not kept. `budget_usd` / `budget_tokens` replace the budget (None: no limit); a paused
    batch still over its budget pauses again at its next model call. A complete batch with nothing to retry
    stays complete.
    """
    batch = SynthesisBatch.objects.select_related("generator", "judge").get(pk=batch.pk)
    rerun_qa = False
    updates = {}
    if config is not None:
        changed = config_differences(batch.config, config)
        refused = [key for key in changed if key.removeprefix("options.") not in QA_KEYS]
        if refused:
            raise BatchError(f"batch #{batch.pk} was started with another {', '.join(refused)}; only the judge and "
                             "the QA settings may change on resume (they rerun QA): start a new batch")  # fmt: skip
        if changed:
            rerun_qa = True
            updates.update(config=config, config_hash=config_hash(config), qa_thresholds=config["qa_thresholds"],
                           options=config["options"], judge=_endpoint(config["judge"]["name"]))  # fmt: skip
    if budget_usd is not _UNSET:
        updates["budget_usd"] = _budget(budget_usd, Decimal)
    if budget_tokens is not _UNSET:
        updates["budget_tokens"] = _budget(budget_tokens, int)
    with transaction.atomic():
        if updates:
            SynthesisBatch.objects.filter(pk=batch.pk).update(**updates)
        pipeline.reclaim_lost_items(batch)
        redo = (_rerun_qa(batch) if rerun_qa else 0) + _retry_failures(batch)
        left = batch.items.exclude(status__in=SynthesisItem.FINISHED).exists()
        if batch.status == SynthesisBatch.Status.COMPLETE and not redo and not left:
            batch.refresh_from_db()
            return batch
        SynthesisBatch.objects.filter(pk=batch.pk).update(
            status=SynthesisBatch.Status.QUEUED, status_reason="", finished_at=None
        )
        batch.refresh_from_db()
        if not here:
            _queue(batch, user)
    return batch


def cancel_batch(batch: SynthesisBatch, *, user=None) -> SynthesisBatch:
    """Stop the batch: no item starts another stage (a stage running now finishes and is recorded). Its
    unfinished items stay pending, so `resume_batch` can go on with them."""
    SynthesisBatch.objects.filter(pk=batch.pk).exclude(status__in=SynthesisBatch.FINISHED).update(
        status=SynthesisBatch.Status.CANCELLED, finished_at=timezone.now(),
        status_reason=f"cancelled by {user}" if user and user.is_authenticated else "cancelled",
    )  # fmt: skip
    if batch.job_run_id:  # queued item jobs end at once; running ones stop between stages anyway
        for run in JobRun.objects.filter(parent_id=batch.job_run_id).exclude(status__in=JobRun.FINISHED):
            cancel_job(run, user=user)
    batch.refresh_from_db()
    return batch


def begin(batch: SynthesisBatch) -> None:
    """The batch is being worked on (from queued)."""
    SynthesisBatch.objects.filter(pk=batch.pk, status=SynthesisBatch.Status.QUEUED).update(
        status=SynthesisBatch.Status.RUNNING, started_at=timezone.now()
    )


def run_here(batch: SynthesisBatch, *, backend=None, on_item=None) -> SynthesisBatch:
    """Run the batch's pending items one after another in this process (`synthesize --here`), until none is
    left or the batch is paused or cancelled; the batch finishes as it would on the workers."""
    begin(batch)
    pipeline.reclaim_lost_items(batch)
    while True:
        status = SynthesisBatch.objects.filter(pk=batch.pk).values_list("status", flat=True).get()
        item = batch.items.filter(status=SynthesisItem.Status.PENDING).order_by("index").first()
        if item is None or status not in pipeline.RUNNABLE:
            break
        done = pipeline.run_item(item.pk, backend=backend)
        if on_item and done is not None:
            on_item(done)
    pipeline.maybe_finish(batch.pk)
    batch.refresh_from_db()
    return batch


# --- what it produced ------------------------------------------------------------------------------------------


def rejected_stage(item: SynthesisItem) -> str:
    return (item.stage_results.get(item.stage) or {}).get("rejected_at") or item.stage


def batch_json(batch: SynthesisBatch) -> dict:
    """The `synthesize --json` shape. Every item finished is counted once in kept, rejected or failed (a paused
    or cancelled batch's pending items in none)."""
    batch.refresh_from_db()
    rejected, failed = Counter(), Counter()
    kept = 0
    for item in batch.items.only("status", "stage", "stage_results"):
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
    qa = results.get("qa") or {}
    if qa.get("verdict") in (pipeline.PASS, pipeline.SKIPPED):
        return True
    verdicts = qa.get("verdicts") or {}
    if not verdicts:
        return False
    if which == "novelty":
        return (verdicts.get("novelty") or {"verdict": "pass"})["verdict"] == "pass"
    return all(v["verdict"] == "pass" for s, v in verdicts.items() if s != "novelty")


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
    rows = [{"step": key, "label": label, "count": 0, "rejected": 0, "failed": 0, "in_progress": 0, "reasons": {}}
            for key, label, _ in FUNNEL]  # fmt: skip
    for item in batch.items.only("pk", "index", "status", "stage", "stage_results", "reason"):
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
            entry = row["reasons"].setdefault(reason, {"reason": reason, "status": item.status, "count": 0, "examples": []})
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
        rows = ModelCall.objects.filter(subject__in=subjects[start : start + 500]).values("purpose").annotate(
            calls=Count("pk"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost")
        )  # fmt: skip
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
    for item in batch.items.only("seed", "draft", "status"):
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
    return {"all": {k: dict(v.most_common()) for k, v in found.items()},
            "kept": {k: dict(v.most_common()) for k, v in kept.items()}}  # fmt: skip


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
    return {**batch_json(batch), "funnel": funnel(batch), "stages": stage_costs(batch),
            "distributions": distributions(batch), "progress": progress(batch),
            "status_reason": batch.status_reason}  # fmt: skip
