#!/usr/bin/env python
"""Token storage benchmark: the prompt ids of one long recorded rollout, stored whole (as before) and as references
to the previous call plus the new ids (llm.token_chain), through the proxy's own storage function.

A synthetic `--turns`-call rollout (random ids from a 151K vocabulary) grows from `--first-prompt` ids to about
`--context` ids: each call answers `--completion` ids and the environment adds the same number of ids each turn
(tool results, the next generation prompt). Two shapes:
- chain: each prompt is the previous prompt and answer followed by the new ids (the builtin harness);
- openclaw: each prompt ends with an internal-context message (`--context-message` ids) that the next prompt replaces
  with the answer and the new ids, so no prompt extends the previous one whole.

Each shape is recorded twice, each call in its own transaction as the proxy writes it (llm.recording.write_call):
"before" as the rows were written until now (the whole prompt, no base), "after" through ModelCallTokens.objects.record.
Then every row is read back from the database with `prompt_ids()` (as the sample builder reads a rollout) and must
equal the prompt recorded. It runs on a throwaway test database (SQLite by default, or the PostgreSQL that
DATABASE_URL names) and prints its figures as one JSON object on the last line:
{"database", "turns", "context", "chain": {...}, "openclaw": {...}, "agree"}, each shape with
{"prompt_ids": {"before", "after", "ratio"}, "json_bytes": {...}, "record_ms": {"before", "after"} (p50 and max a
call), "rebuild_all_ms": {...}, "rebuild_last_ms": {...}, "agree"}.

    .venv/bin/python bench/token_storage_bench.py [--turns 40] [--context 65536] [--first-prompt 4096]
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import setup_databases, setup_test_environment, teardown_databases  # noqa: E402

VOCABULARY = 151_646  # Qwen2.5/3's


def rollout(rng: random.Random, shape: str, args) -> list[tuple[list[int], list[int]]]:
    """[(prompt ids, completion ids)] of one rollout of the given shape."""

    def ids(n: int) -> list[int]:
        return [rng.randrange(VOCABULARY) for _ in range(n)]

    grow = max((args.context - args.first_prompt - args.turns * args.completion) // max(args.turns - 1, 1), 1)
    history, calls = ids(args.first_prompt), []
    for _ in range(args.turns):
        completion = ids(args.completion)
        if shape == "openclaw":
            calls.append((history + ids(args.context_message), completion))
        else:
            calls.append((list(history), completion))
        history = history + completion + ids(grow)
    return calls


def record(calls, session, chained: bool) -> list[float]:
    """Each call stored in its own transaction, as the proxy stores it; the milliseconds each took."""
    from llm.models import ModelCall, ModelCallTokens
    from llm.recording import write_call

    timings = []
    for prompt, completion in calls:
        row = {
            "endpoint": session.endpoint,
            "endpoint_name": session.endpoint.name,
            "purpose": "proxy",
            "session": session,
            "request": {},
            "status_code": 200,
        }
        tokens = {
            "prompt_token_ids": prompt,
            "completion_token_ids": completion,
            "completion_logprobs": [-0.5] * len(completion),
            "exact": True,
        }
        started = time.perf_counter()
        if chained:
            write_call(row, tokens)
        else:  # the rows as they were written until now: the whole prompt in the row, no base
            with transaction.atomic():
                ModelCallTokens.objects.create(
                    call=ModelCall.objects.create(**row),
                    prompt_suffix_ids=prompt,
                    prompt_length=len(prompt),
                    completion_token_ids=completion,
                    completion_logprobs=tokens["completion_logprobs"],
                )
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def read_back(session) -> tuple[list[list[int]], float, float]:
    """(every prompt as rebuilt, ms to rebuild them all from fresh rows, ms to rebuild the last alone)."""
    from llm.models import ModelCallTokens

    rows = ModelCallTokens.objects.filter(call__session=session).order_by("pk")
    started = time.perf_counter()
    prompts = [row.prompt_ids() for row in rows]
    all_ms = (time.perf_counter() - started) * 1000
    last = rows.last().pk
    started = time.perf_counter()
    ModelCallTokens.objects.get(pk=last).prompt_ids()
    return prompts, all_ms, (time.perf_counter() - started) * 1000


def stored(session) -> tuple[int, int]:
    """(prompt ids stored, their JSON's bytes) over a session's rows."""
    from llm.models import ModelCallTokens

    suffixes = list(ModelCallTokens.objects.filter(call__session=session).values_list("prompt_suffix_ids", flat=True))
    return sum(map(len, suffixes)), sum(len(json.dumps(s, separators=(",", ":"))) for s in suffixes)


def measure(shape: str, args, endpoint) -> dict:
    from llm.models import ProxySession

    calls = rollout(random.Random(args.seed), shape, args)
    figures: dict = {"prompt_ids": {}, "json_bytes": {}, "record_ms": {}, "rebuild_all_ms": {}, "rebuild_last_ms": {}}
    agree = True
    for label, chained in (("before", False), ("after", True)):
        session = ProxySession.objects.create(endpoint=endpoint, subject=f"bench:{shape}:{label}", record_tokens=True)
        timings = record(calls, session, chained)
        prompts, all_ms, last_ms = read_back(session)
        agree = agree and prompts == [prompt for prompt, _ in calls]
        figures["prompt_ids"][label], figures["json_bytes"][label] = stored(session)
        figures["record_ms"][label] = {"p50": round(statistics.median(timings), 2), "max": round(max(timings), 2)}
        figures["rebuild_all_ms"][label], figures["rebuild_last_ms"][label] = round(all_ms, 1), round(last_ms, 2)
    for key in ("prompt_ids", "json_bytes"):
        figures[key]["ratio"] = round(figures[key]["before"] / max(figures[key]["after"], 1), 1)
    figures["last_prompt_ids"] = len(calls[-1][0])
    figures["agree"] = agree
    return figures


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40, help="model calls in the rollout")
    parser.add_argument("--context", type=int, default=65536, help="about the last prompt's length in ids")
    parser.add_argument("--first-prompt", type=int, default=4096, help="the first prompt's length in ids")
    parser.add_argument("--completion", type=int, default=256, help="ids each call answers")
    parser.add_argument("--context-message", type=int, default=300, help="the openclaw shape's internal-context ids")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from llm.models import ModelEndpoint

    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False)
    try:
        endpoint = ModelEndpoint.objects.create(name="policy", base_url="http://127.0.0.1:9/v1", model="policy")
        report = {
            "database": connection.vendor,
            "turns": args.turns,
            "context": args.context,
            "first_prompt": args.first_prompt,
            "completion": args.completion,
        }
        for shape in ("chain", "openclaw"):
            report[shape] = measure(shape, args, endpoint)
        report["agree"] = report["chain"]["agree"] and report["openclaw"]["agree"]
    finally:
        teardown_databases(old, verbosity=0)

    for shape in ("chain", "openclaw"):
        ids, rebuild = report[shape]["prompt_ids"], report[shape]["rebuild_all_ms"]
        print(
            f"{shape}: {args.turns} calls, last prompt {report[shape]['last_prompt_ids']:,} ids: stored "
            f"{ids['before']:,} prompt ids before, {ids['after']:,} after ({ids['ratio']}x less); every prompt "
            f"rebuilt in {rebuild['after']} ms (whole rows: {rebuild['before']} ms)",
            file=sys.stderr,
            flush=True,
        )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["agree"] else 1)
