#!/usr/bin/env python
"""Synthesis benchmark: novelty at catalog scale, the pool's first embedding, and the pipeline's overhead per task.

1. Writes a catalog of `--pool` tasks (13,500) in bulk whose instructions are varied, realistic task texts made
   from word lists (60–140 words: a persona, files, two to four operations, an output, constraints), spread over
   the scenario subcategories, and `--new` (500) more texts that are not in it.
2. embedding_speedup: the process's encoder (settings.CLAWGYM_NOVELTY_ENCODER, ONNX Runtime by default) against
   the numpy reference (synthesis.novelty.MiniLMEncoder, the path before it) on `--compare` (256) pool texts,
   side by side in this run: chunks of 32 texts, each embedded by one and then the other, so that a change of
   load on a shared machine falls on both. Also their agreement: embedding_cosine_min (vector by vector) and
   nearest_neighbour_agreement (each text's nearest other text of the sample, by either's vectors).
   pool_embedding_s: the first embedding of the pool's instructions (the process's encoder, stored in the
   cache), all of them by default; `--measure N` embeds and times N and scales the time to the pool
   ("pool_embedding_measured_on" says how many; the others get random unit vectors in the cache: what step 3
   times reads and multiplies them the same way, whatever their values; "pool_vectors_random" counts them).
3. novelty_500_vs_13500_s: in a process that has the model loaded but no index, the novelty of the new
   instructions against the cached pool as a batch runs it: the catalog index (one bulk read of the cached
   vectors), the new texts' embeddings, then for each in turn the nearest task of the whole pool and, when
   it is novel (cosine < 0.90), its addition to the index, so that the next ones are compared with it too
   (NoveltyIndex.screen: two matrix products, not a pass over the pool per item).
4. overhead_per_task_s: `--pipeline-tasks` tasks through the whole pipeline (synthesis.services.start_batch, run in
   this process) against a scripted OpenAI-compatible model on loopback that answers at once, with every QA
   stage (novelty against the whole catalog of step 1, its threshold raised so that the look-alike scripted tasks
   are kept): wall time less the model calls' recorded latency, per task. It includes the sandboxed checker runs
   of the verification stage (bubblewrap); where bubblewrap is missing it is null with a "note".

It runs on a throwaway test database (SQLite by default, or the PostgreSQL that DATABASE_URL names), prints a
summary, and as its last line one JSON object: {"novelty_500_vs_13500_s", "pool_embedding_s",
"overhead_per_task_s", "embedding_texts_per_s", "embedding_speedup", ...}; "load_average" gives the machine's
1-minute load at the start and the end (other work on the machine slows every figure but the ratios).

    .venv/bin/python bench/synthesis_bench.py [--pool 13500] [--new 500] [--measure 0] [--compare 256]
                                              [--pipeline-tasks 5] [--blas-threads N]
"""

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
# --blas-threads N must be set before numpy loads OpenBLAS: on a small shared machine one thread per process was
# twice as fast as OpenBLAS's default of one per CPU (its threads wait on each other).
if "--blas-threads" in sys.argv[:-1]:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--blas-threads") + 1]

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_databases, setup_test_environment, teardown_databases  # noqa: E402

SEED = 12
TARGET_NOVELTY_S = 60
TARGET_OVERHEAD_S = 0.5
EMBED_PART = 1500  # pool texts per embed() call of step 2

# --- varied instruction texts -----------------------------------------------------------------------------------

PERSONAS = [
    "I run a small bakery with two shops",
    "As the office manager of a dental clinic",
    "I'm a graduate student in ecology",
    "Our volunteer group organises a yearly book fair",
    "I manage IT for a school district",
    "As a freelance translator",
    "I coach a youth football team",
    "Our startup's support team",
    "I'm planning a family reunion",
    "As a landlord with four flats",
    "I teach evening classes in accounting",
    "Our lab tracks freezer samples",
    "I keep the books for a community garden",
    "As a junior data analyst at a logistics firm",
    "I'm a nurse coordinating shift swaps",
    "Our band is preparing a tour",
    "I maintain a small open-source library",
    "As the treasurer of a chess club",
    "I sell handmade jewellery online",
    "Our HR team onboards new hires",
]
SUBJECTS = [
    "invoices",
    "orders",
    "survey answers",
    "sensor readings",
    "expense claims",
    "support tickets",
    "lab samples",
    "shift rosters",
    "book loans",
    "delivery routes",
    "student grades",
    "meeting minutes",
    "server logs",
    "recipes",
    "rental payments",
    "match results",
    "inventory counts",
    "job applications",
    "travel bookings",
    "donations",
]
DIRS = ["data", "inbox", "reports", "raw", "exports", "notes", "archive", "input", "records", "shared"]
EXTS = ["csv", "json", "jsonl", "md", "txt", "yaml", "log", "tsv"]
FIELDS = [
    "amount",
    "date",
    "region",
    "customer",
    "status",
    "category",
    "duration",
    "price",
    "quantity",
    "owner",
    "priority",
    "score",
    "temperature",
    "weight",
    "supplier",
    "due date",
    "room",
    "team",
    "currency",
    "rating",
]
OPERATIONS = [
    "compute the total {f} per {g}",
    "find the three {s} with the highest {f}",
    "flag every row whose {f} is missing or negative",
    "merge it with `{file2}` on the {g} column",
    "remove exact duplicates and count how many there were",
    "convert every {f} to the same unit",
    "group the {s} by {g} and give the average {f}",
    "list the {s} that are overdue by more than {n} days",
    "check that each {g} appears in `{file2}`",
    "sort the {s} by {f}, newest first",
    "rename each file in `{d}/` to `<{g}>-<{f}>.{e}`",
    "extract every email address and phone number",
    "draft a short reply for each {s} marked urgent",
    "work out the month-over-month change in {f}",
    "split the {s} into one file per {g} under `{d}/by-{g}/`",
    "fill in the template `{d}/template.md` for each {g}",
    "count the {s} per {g} and per week",
    "spot the {s} whose {f} differs from last month's by over {n}%",
    "write a Python script `tools/{s2}.py` that recomputes the figures",
    "run `scripts/check_{s2}.py` and fix what it reports",
]
OUTPUTS = [
    "Write a markdown report to `{out}.md` with a table and a two-sentence summary.",
    "Save the result as JSON in `{out}.json`, one object per {g}.",
    "Put the figures in `{out}.csv` with a header row.",
    "Write a plain-text summary to `{out}.txt` that a non-technical colleague can read.",
    "Produce `{out}.md` with one section per {g}.",
    "Store the cleaned data in `{out}.csv` and the problems you found in `{out}-issues.md`.",
]
CONSTRAINTS = [
    "Keep the original files untouched.",
    "Round money to two decimals.",
    "Use ISO dates (YYYY-MM-DD).",
    "Do not invent values that are not in the files.",
    "Mention any rows you had to skip and why.",
    "Keep it under one page.",
    "Sort {g}s alphabetically.",
    "Treat empty cells as zero.",
    "Ignore rows marked as cancelled.",
    "Use the {f} column as given, without converting it.",
    "Write everything in British English.",
    "Do not use any network access; everything you need is in the workspace.",
]


def instruction(rng: random.Random) -> str:
    s, g, f = rng.choice(SUBJECTS), rng.choice(FIELDS), rng.choice(FIELDS)
    d, e = rng.choice(DIRS), rng.choice(EXTS)
    slots = {
        "s": s,
        "s2": s.replace(" ", "_"),
        "g": g.replace(" ", "_"),
        "f": f,
        "d": d,
        "e": e,
        "n": rng.choice([3, 5, 7, 10, 14, 30]),
        "file2": f"{rng.choice(DIRS)}/{rng.choice(SUBJECTS).replace(' ', '_')}.{rng.choice(EXTS)}",
        "out": f"{rng.choice(['reports', 'out', 'summary', 'results'])}/{s.replace(' ', '-')}"
        f"-{rng.choice(['summary', 'report', 'review', 'overview', 'check'])}",
    }
    path = f"{d}/{s.replace(' ', '_')}_{rng.randint(2019, 2026)}.{e}"
    steps = rng.sample(OPERATIONS, rng.randint(2, 4))
    text = [
        f"{rng.choice(PERSONAS)}, and I need help with the {s} in `{path}`.",
        "Please " + ", then ".join(step.format(**slots) for step in steps) + ".",
        rng.choice(OUTPUTS).format(**slots),
        *[c.format(**slots) for c in rng.sample(CONSTRAINTS, rng.randint(1, 3))],
    ]
    return " ".join(text)


# --- the catalog -------------------------------------------------------------------------------------------------


def write_catalog(texts: list[str], rng: random.Random) -> None:
    """Bulk-write one task per text, spread over the subcategories (a tenth without one)."""
    from tasks.models import ScenarioSubcategory, Task, TaskRevision

    subs = list(ScenarioSubcategory.objects.select_related("category"))
    batch = 2000
    for start in range(0, len(texts), batch):
        chosen = [None if rng.random() < 0.1 else rng.choice(subs) for _ in texts[start : start + batch]]
        tasks = Task.objects.bulk_create(
            Task(
                external_id=f"pool-{start + i:06d}",
                title=texts[start + i][:200],
                source="imported",
                scenario_category=sub.category if sub else None,
                scenario_subcategory=sub,
            )
            for i, sub in enumerate(chosen)
        )
        revisions = TaskRevision.objects.bulk_create(
            TaskRevision(
                task=t, number=1, instruction=texts[start + i], content_hash=t.external_id, author_stage="bench"
            )
            for i, t in enumerate(tasks)
        )
        for t, r in zip(tasks, revisions):
            t.current_revision = r
        Task.objects.bulk_update(tasks, ["current_revision"])


def cache_random_vectors(texts: list[str], rng: np.random.Generator) -> None:
    from synthesis.models import InstructionEmbedding
    from synthesis.novelty import MODEL_NAME, text_hash

    vectors = rng.standard_normal((len(texts), 384)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    InstructionEmbedding.objects.bulk_create(
        (
            InstructionEmbedding(text_hash=text_hash(t), model=MODEL_NAME, dimensions=384, vector=v.tobytes())
            for t, v in zip(texts, vectors)
        ),
        batch_size=1000,
        ignore_conflicts=True,
    )


def novelty_run(new_texts: list[str], groups: list[str | None], limit: float = 0.90) -> dict:
    from synthesis import novelty

    novelty._catalog.update(index=None, rows={})  # a process that has no index yet
    began = time.perf_counter()
    index = novelty.catalog_index()
    built = time.perf_counter()
    vectors = novelty.embed(new_texts)
    embedded = time.perf_counter()
    # Each compared with the pool and with the new ones kept before it, which then join the pool.
    found = index.screen([f"new-{i}" for i in range(len(new_texts))], vectors, groups, limit)
    duplicates = sum(1 for nearest, similarity in found if nearest is not None and similarity >= limit)
    done = time.perf_counter()
    return {
        "seconds": done - began,
        "index_build_s": round(built - began, 3),
        "embed_new_s": round(embedded - built, 3),
        "nearest_and_add_s": round(done - embedded, 3),
        "near_duplicates": duplicates,
        "pool": len(index),
    }


# --- the pipeline ------------------------------------------------------------------------------------------------


def pipeline_overhead(count: int) -> dict:
    """Seconds per task outside model time for `count` tasks through every stage, or a note why there is none."""
    from llm.models import ModelCall, ModelEndpoint
    from llm.testing import Reply, ScriptedUpstream
    from sandbox import SandboxUnavailable, get_backend
    from synthesis.services import run_here, start_batch
    from synthesis.testing import ScriptedPipeline

    try:
        get_backend("bwrap").check_available()
    except SandboxUnavailable as exc:
        return {"overhead_per_task_s": None, "note": f"the verification stage needs bubblewrap: {exc}"}
    scripted = ScriptedPipeline(["good"] * count)
    qa_answers = {
        "plausibility": {"plausible": True, "reason": "A real request."},
        "difficulty": {"level": 3, "reason": "Several steps."},
        "leak": {"leaks": False, "reason": "No result is stated."},
        "alignment": {
            "requirements": [{"requirement": "totals.json", "covered": True, "by": "totals_correct"}],
            "over_strict": [],
            "reason": "Covered.",
        },
        "rubric": {"complementary": True, "reason": "Fine.", "redundant_rules": []},
    }

    def respond(body, purpose):
        if purpose.startswith("qa:"):
            return Reply.text(json.dumps(qa_answers[purpose.removeprefix("qa:")]))
        return scripted(body, purpose)

    respond.by_purpose = True

    upstream = ScriptedUpstream().start()
    try:
        upstream.responder = respond
        common = {"base_url": upstream.base_url, "model": "scripted-model", "timeout_seconds": 30, "max_retries": 0}
        gen = ModelEndpoint.objects.create(name="bench-gen", roles=["generator"], **common)
        judge = ModelEndpoint.objects.create(name="bench-judge", roles=["judge"], **common)
        began = time.perf_counter()
        batch = start_batch(
            "persona", count, gen, judge, seed=SEED, here=True, qa_thresholds={"novelty": 1.01}, user=None
        )  # the scripted tasks look alike
        batch = run_here(batch)
        wall = time.perf_counter() - began
    finally:
        upstream.stop()
    subjects = [item.subject for item in batch.items.all()]
    calls = ModelCall.objects.filter(subject__in=subjects)
    model_s = sum(c.latency_ms or 0 for c in calls) / 1000
    kept = batch.items.filter(status="kept").count()
    return {
        "overhead_per_task_s": round((wall - model_s) / count, 3),
        "pipeline_tasks": count,
        "pipeline_kept": kept,
        "pipeline_status": batch.status,
        "pipeline_wall_s": round(wall, 2),
        "pipeline_model_s": round(model_s, 2),
        "pipeline_model_calls": calls.count(),
    }


def compare_encoders(texts: list[str], chunk: int = 32) -> dict:
    """The process's encoder against the numpy reference on `texts`, chunk by chunk in turn (see step 2)."""
    from synthesis.novelty import MiniLMEncoder, encoder

    fast, reference = encoder(), MiniLMEncoder()
    fast.encode(texts[:chunk])  # first calls set up buffers and threads
    reference.encode(texts[:chunk])
    seconds = {"fast": 0.0, "reference": 0.0}
    vectors = {"fast": [], "reference": []}
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        for name, model in (("reference", reference), ("fast", fast)):
            began = time.perf_counter()
            vectors[name].append(model.encode(part))
            seconds[name] += time.perf_counter() - began
    ref, got = np.concatenate(vectors["reference"]), np.concatenate(vectors["fast"])
    cosines = np.sum(ref * got, axis=1)
    # Each text's nearest other text of the sample, by the reference's vectors and by the encoder's.
    nearest = []
    for v in (ref, got):
        similarities = v @ v.T
        np.fill_diagonal(similarities, -np.inf)
        nearest.append(np.argmax(similarities, axis=1))
    return {
        "embedding_speedup": round(seconds["reference"] / seconds["fast"], 2),
        "embedding_encoder": type(fast).__name__,
        "embedding_compared_on": len(texts),
        "reference_texts_per_s": round(len(texts) / seconds["reference"], 1),
        "encoder_texts_per_s": round(len(texts) / seconds["fast"], 1),
        "embedding_cosine_min": round(float(cosines.min()), 7),
        "nearest_neighbour_agreement": round(float(np.mean(nearest[0] == nearest[1])), 4),
    }


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=13_500)
    parser.add_argument("--new", type=int, default=500)
    parser.add_argument("--measure", type=int, default=0, help="pool texts embedded and timed (0: all)")
    parser.add_argument("--compare", type=int, default=256, help="pool texts embedded by both encoders (0: none)")
    parser.add_argument("--pipeline-tasks", type=int, default=5)
    parser.add_argument("--blas-threads", type=int, help="OPENBLAS_NUM_THREADS for this run (default: OpenBLAS's)")
    args = parser.parse_args()

    from synthesis.novelty import encoder

    rng = random.Random(SEED)
    pool_texts = [instruction(rng) for _ in range(args.pool)]
    new_texts = [instruction(rng) for _ in range(args.new)]
    words = [len(t.split()) for t in pool_texts]
    load_before = os.getloadavg()[0]

    if connection.vendor == "postgresql":  # a database of its own: the test run that starts it uses test_<name>
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"test_synthesis_bench_{os.getpid()}"
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        from synthesis.novelty import embed
        from tasks.models import ScenarioSubcategory

        write_catalog(pool_texts, rng)
        subs = list(ScenarioSubcategory.objects.select_related("category"))
        new_groups = [f"{s.category.slug}/{s.slug}" for s in (rng.choice(subs) for _ in new_texts)]

        began = time.perf_counter()
        encoder()
        load_s = time.perf_counter() - began
        compared = compare_encoders(pool_texts[: min(args.compare, args.pool)]) if args.compare > 0 else {}
        if compared:
            print(f"side by side: {compared}", file=sys.stderr, flush=True)
        measured = args.pool if args.measure <= 0 else min(args.measure, args.pool)
        began = time.perf_counter()
        # In parts of EMBED_PART, each sorted by length as one call sorts them, so that a run of many minutes
        # says how far it is (on stderr).
        for start in range(0, measured, EMBED_PART):
            embed(pool_texts[start : min(start + EMBED_PART, measured)])
            done = min(start + EMBED_PART, measured)
            elapsed = time.perf_counter() - began
            print(
                f"pool embedding: {done}/{measured} in {elapsed:.0f} s ({done / elapsed:.1f} texts/s, "
                f"load {os.getloadavg()[0]:.1f})",
                file=sys.stderr,
                flush=True,
            )
        measured_s = time.perf_counter() - began
        cache_random_vectors(pool_texts[measured:], np.random.default_rng(SEED))

        novelty = novelty_run(new_texts, new_groups)
        pipeline = (
            pipeline_overhead(args.pipeline_tasks)
            if args.pipeline_tasks > 0
            else {"overhead_per_task_s": None, "note": "--pipeline-tasks 0"}
        )
        report = {
            f"novelty_{args.new}_vs_{args.pool}_s": round(novelty["seconds"], 2),
            "novelty_500_vs_13500_s": round(novelty["seconds"], 2) if (args.new, args.pool) == (500, 13_500) else None,
            "novelty_breakdown": {k: v for k, v in novelty.items() if k != "seconds"},
            "pool_embedding_s": round(measured_s * args.pool / measured, 1),
            "pool_embedding_measured_on": measured,
            "pool_embedding_scaled": measured < args.pool,
            "pool_vectors_random": args.pool - measured,
            "embedding_texts_per_s": round(measured / measured_s, 1),
            "encoder_load_s": round(load_s, 2),
            **compared,
            "instruction_words": {"min": min(words), "mean": round(sum(words) / len(words), 1), "max": max(words)},
            **pipeline,
            "targets": {"novelty_s": TARGET_NOVELTY_S, "overhead_per_task_s": TARGET_OVERHEAD_S},
            "cpus": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS") or "default",
            "database": connection.vendor,
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
        if (args.new, args.pool) != (500, 13_500):
            report["note_size"] = f"a smaller run: {args.new} new against {args.pool}"
    finally:
        teardown_databases(old, verbosity=0)

    print(
        f"Synthesis on {report['database']} ({report['cpus']} CPUs): novelty of {args.new} new instructions against "
        f"{args.pool:,} in {novelty['seconds']:.1f} s; pool embedding {report['pool_embedding_s']} s "
        f"({report['embedding_texts_per_s']} texts/s, measured on {measured}; "
        f"{report.get('embedding_speedup')}x the numpy reference side by side); overhead per task "
        f"{report['overhead_per_task_s']} s"
    )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
