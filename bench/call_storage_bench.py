#!/usr/bin/env python
"""Storage per rollout: the bytes one long OpenClaw rollout leaves in the database, per rollout and per model call.

One real OpenClaw rollout (the CLI `make harness` installs, in the bubblewrap sandbox, through the recording proxy
served by uvicorn) of the fruit task, its model a scripted server in a process of its own that answers from the
conversation: `exec` calls until the agent has `--turns - 2` tool results, then a `write` of the right summary,
then "Done." So the rollout makes `--turns` model calls (40 by default), each request carrying OpenClaw's own
system prompt, its tools and the whole history so far.

"before" is what storing each request whole (as ClawGym did before llm.request_chain) takes: the characters of each
call's whole request as Django's JSONField writes it (json.dumps, ASCII-escaped: on SQLite characters are bytes),
with its response, its token row when there is one, and the rollout's own rows (transcript, the trajectory's
messages). "after" is what is stored now, read back from the database: each call's `request_part` (its request, or
what it adds to its base), its reference to the base (REFERENCE_BYTES and the inherited keys' names), and the same
responses, token rows and rollout rows. `rebuilt_equal`: every request rebuilt from the stored rows (`call.request`)
equals, as canonical JSON, the body the model server received for that call (it writes each one to a file).

It runs on a throwaway SQLite database in a temp folder and prints its figures as one JSON object on the last line:
{"turns", "model_calls", "score", "before": {...}, "after": {...}, "ratio", "rebuilt_equal"}.

    .venv/bin/python bench/call_storage_bench.py [--turns 40]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from benchstats import percentile  # noqa: E402  (bench/ helper)
from netutil import free_port, start_app, wait_for_port  # noqa: E402  (bench/ helper)

MODEL = "bench-model"
REFERENCE_BYTES = 16  # what a base call id and a shared count cost in a row: two integer columns, generously


def serve_model(port: int, turns: int, received_file: str) -> None:
    """The scripted model process: `exec` calls until turns - 2 tool results, then a write, then a final answer."""
    import django
    import uvicorn

    django.setup()
    from evaluation.testing import RIGHT_SUMMARY
    from llm.testing import Reply, ScriptedUpstream

    class ConversationModel(ScriptedUpstream):
        async def _answer(self, send, path, reply, received):
            with open(received_file, "a") as out:  # what came upstream, for the rebuilt requests to be checked on
                out.write(json.dumps(received.json) + "\n")
            messages = (received.json or {}).get("messages") or []
            results = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
            if results < turns - 2:
                command = f"echo step {results + 1}; cat fruit.csv; ls -la"
                reply = Reply.tool_call("exec", {"command": command})
            elif results == turns - 2:
                reply = Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})
            else:
                reply = Reply.text("Done: summary.txt holds the counts.")
            await super()._answer(send, path, reply, received)

    model = ConversationModel(default=Reply.text("unused"), model=MODEL)
    uvicorn.run(model, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


def dumped(value) -> int:
    """Characters of a value as Django's JSONField writes it (json.dumps, ASCII-escaped)."""
    return len(json.dumps(value))


def stats(values: list[int]) -> dict:
    ordered = sorted(values)
    return {
        "total": sum(values),
        "per_call_mean": round(sum(values) / max(len(values), 1)),
        "first": values[0] if values else 0,
        "last": values[-1] if values else 0,
        "max": ordered[-1] if ordered else 0,
    }


def measure(rollout_id: int, received: list[dict]) -> dict:
    from django.db.models import TextField
    from django.db.models.functions import Cast, Length

    from evaluation.models import Rollout, Trajectory
    from llm.models import ModelCall, ModelCallTokens
    from llm.request_chain import canonical

    rollout = Rollout.objects.get(pk=rollout_id)
    calls = ModelCall.objects.filter(session=rollout.proxy_session).order_by("created_at", "id")
    stored = {
        row["id"]: row
        for row in calls.annotate(
            part_chars=Length(Cast("request_part", TextField())), response_chars=Length(Cast("response", TextField()))
        ).values("id", "part_chars", "response_chars", "request_base", "request_inherited")
    }
    rebuilt = list(calls.with_requests())
    whole = [dumped(call.request) for call in rebuilt]
    after_requests = [
        (stored[c.pk]["part_chars"] or 0)
        + (REFERENCE_BYTES + dumped(stored[c.pk]["request_inherited"]) if stored[c.pk]["request_base"] else 0)
        for c in rebuilt
    ]
    responses = [stored[c.pk]["response_chars"] or 0 for c in rebuilt]
    tokens = [
        dumped(t.prompt_suffix_ids) + dumped(t.completion_token_ids) + dumped(t.completion_logprobs)
        for t in ModelCallTokens.objects.filter(call__in=calls)
    ]
    trajectories = sum(dumped(t.messages) + dumped(t.tools) for t in Trajectory.objects.filter(rollout=rollout))
    rollout_rows = dumped(rollout.transcript) + trajectories
    # Each call's rebuilt request is the body that reached the model (the proxy records what it sent upstream).
    rebuilt_equal = len(rebuilt) == len(received) and all(
        canonical(call.request) == canonical(body) for call, body in zip(rebuilt, received, strict=False)
    )
    costs = write_and_read_costs(rollout.proxy_session, [call.request for call in rebuilt])
    messages = [len((call.request or {}).get("messages") or []) for call in rebuilt]
    before_calls = sum(whole) + sum(responses) + sum(tokens)
    after_calls = sum(after_requests) + sum(responses) + sum(tokens)
    n = max(len(rebuilt), 1)
    return {
        "model_calls": len(rebuilt),
        "with_a_base": sum(1 for row in stored.values() if row["request_base"]),
        "messages_in_last_request": messages[-1] if messages else 0,
        "score": rollout.score,
        "status": rollout.status,
        "agent_seconds": rollout.agent_seconds,
        "before": {
            "request_chars": stats(whole),
            "response_chars": stats(responses),
            "token_row_chars": sum(tokens),
            "rollout_rows_chars": rollout_rows,  # transcript and trajectory messages, the same before and after
            "per_model_call": round(before_calls / n),
            "per_rollout": before_calls + rollout_rows,
        },
        "after": {
            "request_chars": stats(after_requests),
            "per_model_call": round(after_calls / n),
            "per_rollout": after_calls + rollout_rows,
        },
        "ratio": {
            "requests": round(sum(whole) / max(sum(after_requests), 1), 1),
            "per_rollout": round((before_calls + rollout_rows) / max(after_calls + rollout_rows, 1), 1),
        },
        "rebuilt_equal": rebuilt_equal,
        "costs": costs,
    }


def write_and_read_costs(session, requests: list[dict], rounds: int = 3) -> dict:
    """What the difference costs in time: the rollout's requests recorded again into two fresh sessions of the same
    endpoint, whole (`create`, as before) and as differences (`record`, as the proxy does), one call of each in turn;
    then each session's calls read back with their whole requests (`with_requests()` for the chained ones). Best of
    `rounds` for the reads; per-call write times pooled over the rounds."""
    from llm.models import ModelCall, ProxySession

    writes: dict[str, list[float]] = {"whole": [], "difference": []}
    reads: dict[str, float] = {}
    for _ in range(rounds):
        sessions = {kind: ProxySession.objects.create(endpoint=session.endpoint) for kind in writes}
        for request in requests:
            for kind, make in (("whole", ModelCall.objects.create), ("difference", ModelCall.objects.record)):
                started = time.perf_counter()
                make(endpoint_name="bench", purpose="proxy", session=sessions[kind], request=request, status_code=200)
                writes[kind].append(time.perf_counter() - started)
        for kind, session_ in sessions.items():
            calls = ModelCall.objects.filter(session=session_).order_by("pk")
            started = time.perf_counter()
            read = [c.request for c in (calls.with_requests() if kind == "difference" else calls)]
            took = time.perf_counter() - started
            assert len(read) == len(requests)
            reads[kind] = min(reads.get(kind, took), took)
    return {
        "write_ms_p50": {kind: round(percentile(values, 0.5) * 1000, 2) for kind, values in writes.items()},
        "read_all_ms": {kind: round(value * 1000, 1) for kind, value in reads.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="model calls in the rollout (at least 3)")
    parser.add_argument(
        "--timeout", type=int, default=3600, help="the rollout's deadline (s): OpenClaw is slow on a busy machine"
    )
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--received", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve_model(args.serve_model, args.turns, args.received)
        return
    if args.turns < 3:
        parser.error("--turns must be at least 3 (exec calls, a write, the final answer)")

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-call-storage-bench-"))
    model_port, app_port = free_port(), free_port()
    received_file = workdir / "received.jsonl"
    os.environ.update(
        {
            "CLAWGYM_VAR_DIR": str(workdir),
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{app_port}",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
        }
    )
    procs: list[subprocess.Popen] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from evaluation.harnesses import get_harness
        from evaluation.services.rollouts import create_rollouts, execute_rollout
        from evaluation.testing import fruit_package
        from llm.services import create_endpoint
        from tasks.services import save_package

        get_harness("openclaw").check_available()
        call_command("migrate", verbosity=0)
        endpoint = create_endpoint("bench-model", base_url=f"http://127.0.0.1:{model_port}/v1", model=MODEL)
        revision = save_package(fruit_package("bench-fruit")).revision
        child_env = {**os.environ}
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--serve-model", str(model_port), "--turns", str(args.turns)]
                + ["--received", str(received_file)],
                cwd=BASE_DIR,
                env=child_env,
            )
        )
        procs.append(start_app(app_port, child_env, BASE_DIR))
        wait_for_port(model_port, procs[0])
        wait_for_port(app_port, procs[1])
        # The app imports its views on the first request: on a busy machine that outlasts the rollout's own check.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{app_port}/healthz", timeout=300).close()
        except urllib.error.HTTPError:
            pass  # an answer (503: no job workers here) is all this waits for
        [rollout] = create_rollouts(
            revision, endpoint, harness="openclaw", options={"timeout": args.timeout}, user=None
        )
        started = time.monotonic()
        rollout = execute_rollout(rollout.pk)
        received = (
            [json.loads(line) for line in received_file.read_text().splitlines()] if received_file.exists() else []
        )
        report = {
            "turns": args.turns,
            "rollout_s": round(time.monotonic() - started, 1),
            **measure(rollout.pk, received),
        }
        if rollout.error:
            report["error"] = rollout.error[:500]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)

    before, after = report["before"], report["after"]
    print(
        f"{report['model_calls']} model calls: {before['per_rollout']} chars per rollout "
        f"({before['per_model_call']} per call) with whole requests; {after['per_rollout']} "
        f"({after['per_model_call']} per call) stored, requests as differences",
        file=sys.stderr,
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
