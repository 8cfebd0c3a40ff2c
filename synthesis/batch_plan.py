"""A synthesis batch planned: its items drawn, its configuration, and what a resume may change. Starting, resuming,
cancelling and running one in this process are synthesis.services' (start_batch, resume_batch, cancel_batch,
run_here), on what this module gives them; what a batch produced is synthesis.batch_report's.

    seeds = draw_seeds("persona", 20, seed=7, options={})   # the items' seeds, the same for the same seed
    config = batch_config(route=…, …); config_hash(config)   # what a batch is, and what a resume may change

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
again: nothing is synthesized twice (a complete one is returned as it is; another seed starts a new batch).
resume_batch takes the budget given, reclaims items a dead worker left running and retries retryable failures.
A changed configuration is refused, except for the judge, qa_thresholds and options["qa_stages"]: those rerun the
QA stage only, on the items that were not kept (rejected at qa:*, failed at qa, or not there yet); the earlier
stages' results are kept and kept tasks stay as they are in the catalog (`assess_tasks` assesses them again).
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from tasks.models import ScenarioSubcategory

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


# --- resuming -------------------------------------------------------------------------------------------------


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
