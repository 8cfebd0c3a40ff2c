#!/usr/bin/env python
"""RL rollout batch benchmark: one GRPO step's rollouts (8 prompts x 8 samples) and the proxy's token-recording cost.

1. The batch. `--prompts` tasks (fruit summaries, each with its real checker) x `--samples` rollouts each, with the
   builtin harness and the rollout option `record_tokens: true`, started as an RL step starts them
   (evaluation.services.rollouts.start_rollouts per prompt: jobs on the `sandbox` queue) and run by a real django-q
   cluster of `--workers` processes (default: slots + 2) on `--slots` rollout slots (CLAWGYM_ROLLOUT_SLOTS): a rollout
   frees its slot when its agent stops, so with more processes than slots the next agent starts while the checker
   scores the last one. Bubblewrap sandbox, relay, the recording proxy
   (the ASGI app under uvicorn), checker. The model is a vLLM-shaped scripted server in a process of its own
   (llm.testing.ScriptedUpstream with vllm_tokens: prompt_token_ids, token_ids, logprobs): a `write` of the right
   summary, then "Done.". Timed from the first enqueue to the last rollout finished. Reported against the slowest
   single rollout (the batch's wall time with unbounded slots and perfect parallelism): `batch_over_slowest`; and
   against the ideal within the slots, max(slowest, sum of rollout times / slots): `efficiency` = ideal / batch;
   and against the ideal of the time rollouts hold a slot (a rollout's time less its checker's):
   `slot_efficiency`. Where the rest goes: `agent_s`, `checker_s` and `other_s` (set-up, storing) per rollout (p50),
   `pickup_p50_s` (from a slot freeing to the job that takes it starting: the engine's poll and the claim).
   Every rollout's samples are then built (training_jobs.rl.samples) and counted: all should be exact.
2. Recording overhead. In the same proxy process, `--overhead-calls` calls of each kind, interleaved: a session that
   records tokens, one that does not, and the same two request bodies sent straight to the upstream. A call's
   proxy cost is its time through the proxy less its time straight to the upstream with the body the proxy sends;
   the recording overhead is that cost with recording less that cost without (medians), per call, for a prompt of
   `--overhead-prompt-tokens` tokens and an answer of `--overhead-answer-tokens`, streamed and not.

Throwaway SQLite database and folders in a temp dir. The last line is one JSON object:
{"prompts", "samples", "rollouts", "slots", "workers", "batch_wall_s", "slowest_rollout_s", "batch_over_slowest",
 "ideal_s", "efficiency", "slot_ideal_s", "slot_efficiency", "agent_s", "checker_s", "other_s", "pickup_p50_s", "rollout_p50_s", "scored", "mean_score", "samples_built", "inexact_samples", "tokens_sampled",
 "queue", "errors" (the first three rollouts that did not score 1.0), "token_overhead": {"stream": {...}, "whole": {...}, "prompt_tokens", "answer_tokens", "calls"}, "cpus"}

    .venv/bin/python bench/rl_rollout_bench.py [--prompts 8] [--samples 8] [--slots 4] [--workers 6] [--overhead-calls 40]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from netutil import free_port, start_app, wait_for_port  # noqa: E402  (bench/ helper)

MODEL = "bench-policy"


def serve_model(port: int) -> None:
    """The vLLM-shaped scripted policy: its answer depends only on the conversation, so every agent can share it."""
    import django
    import uvicorn

    django.setup()  # the task's fixtures module reads models
    from evaluation.testing import RIGHT_SUMMARY
    from llm.testing import Reply, ScriptedUpstream

    class ConversationModel(ScriptedUpstream):
        async def _answer(self, send, path, reply, received):
            body = received.json or {}
            messages = body.get("messages") or []
            if body.get("overhead_answer_chars"):  # the overhead calls: a long answer, no tools
                reply = Reply.text("x" * int(body["overhead_answer_chars"]), chunk_size=4)
            elif any(m.get("role") == "tool" for m in messages if isinstance(m, dict)):
                reply = Reply.text("Done.")
            else:
                reply = Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})
            await super()._answer(send, path, reply, received)

    model = ConversationModel(default=Reply.text("unused"), model=MODEL, vllm_tokens=True)
    uvicorn.run(model, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


# --- 1. the batch ------------------------------------------------------------------------------------------------


def make_tasks(n: int) -> list:
    import dataclasses

    from evaluation.testing import fruit_package
    from tasks.services import save_package

    revisions = []
    for i in range(n):
        package = fruit_package(f"bench-rl-{i:03d}")
        package = dataclasses.replace(package, instruction=f"{package.instruction} (prompt {i})")
        revisions.append(save_package(package).revision)
    return revisions


def batch(revisions, endpoint, samples: int, slots: int, timeout: float) -> dict:
    from evaluation.models import Rollout
    from evaluation.services.rollouts import start_rollouts
    from training_jobs.rl.samples import samples_for_rollout

    started = time.monotonic()
    ids = []
    for revision in revisions:
        created = start_rollouts(
            revision,
            endpoint,
            harness="builtin",
            repeats=samples,
            options={"record_tokens": True, "timeout": 300},
            user=None,
        )
        ids += [r.pk for r in created]
    while Rollout.objects.filter(pk__in=ids, status__in=Rollout.FINISHED).count() < len(ids):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the batch's rollouts did not finish within {timeout} s")
        time.sleep(0.1)
    wall = time.monotonic() - started
    finished = list(Rollout.objects.filter(pk__in=ids).select_related("job_run"))
    timed = [r for r in finished if r.started_at and r.finished_at]
    seconds = [(r.finished_at - r.started_at).total_seconds() for r in timed]
    checker = [r.checker_seconds or 0.0 for r in timed]
    agent = [r.agent_seconds or 0.0 for r in timed]
    held = [
        total - check for total, check in zip(seconds, checker, strict=True)
    ]  # the slot is freed before the checker
    slot_ideal = max(max(held), sum(held) / slots)
    # A slot freed at an agent's end is taken by the next rollout that starts: the gaps between consecutive
    # (agent end, next start) pairs in time order, once every slot has been busy, are what the engine's pickup costs.
    ends = sorted((r.started_at.timestamp() + h) for r, h in zip(timed, held, strict=True))
    starts = sorted(r.started_at.timestamp() for r in timed)[slots:]
    pickup = [start - end for start, end in zip(starts, ends, strict=False) if start >= end]
    scores = [r.score for r in finished if r.status == Rollout.Status.SCORED]
    built = [s for r in finished for s in samples_for_rollout(r)]
    slowest = max(seconds)
    ideal = max(slowest, sum(seconds) / slots)
    errors = [f"#{r.pk} {r.status} {r.exit_reason}: {r.error}"[:300] for r in finished if r.score != 1.0]
    return {
        "rollouts": len(ids),
        "batch_wall_s": round(wall, 2),
        "slowest_rollout_s": round(slowest, 2),
        "batch_over_slowest": round(wall / slowest, 2),
        "ideal_s": round(ideal, 2),
        "efficiency": round(ideal / wall, 3),
        "slot_ideal_s": round(slot_ideal, 2),
        "slot_efficiency": round(slot_ideal / wall, 3),
        "agent_s": round(statistics.median(agent), 2),
        "checker_s": round(statistics.median(checker), 2),
        "other_s": round(statistics.median(h - a for h, a in zip(held, agent, strict=True)), 2),
        "pickup_p50_s": round(statistics.median(pickup), 3) if pickup else None,
        "rollout_p50_s": round(statistics.median(seconds), 2),
        "scored": len(scores),
        "mean_score": round(statistics.mean(scores), 3) if scores else None,
        "samples_built": len(built),
        "inexact_samples": sum(1 for s in built if not s.exact),
        "tokens_sampled": sum(s.policy_tokens for s in built),
        "queue": sorted({r.job_run.queue for r in finished if r.job_run}),
        "errors": errors[:3],
    }


# --- 2. the recording overhead -----------------------------------------------------------------------------------


def overhead(endpoint, upstream_url: str, calls: int, prompt_tokens: int, answer_tokens: int) -> dict:
    import httpx

    from llm.services import open_proxy_session, proxy_base_url
    from llm.tokens import ask_for_tokens

    # The toy template is one token per byte: a prompt of N tokens is a message of about N characters.
    messages = [
        {"role": "system", "content": "You work in a workspace."},
        {"role": "user", "content": ("Summarise the rows. " * (prompt_tokens // 20 + 1))[:prompt_tokens]},
    ]
    recording = proxy_base_url(open_proxy_session(endpoint, subject="bench:recording", record_tokens=True))
    plain = proxy_base_url(open_proxy_session(endpoint, subject="bench:plain"))
    out = {"prompt_tokens": prompt_tokens, "answer_tokens": answer_tokens, "calls": calls}
    with httpx.Client(timeout=60, trust_env=False) as client:
        for stream in (True, False):
            body = {"model": MODEL, "messages": messages, "stream": stream, "overhead_answer_chars": answer_tokens}
            asked = dict(body)
            ask_for_tokens("chat", asked)  # what the proxy sends upstream for a recording session
            kinds = {
                "recording": (recording, body),
                "plain": (plain, body),
                "direct_recording": (upstream_url, asked),
                "direct_plain": (upstream_url, body),
            }
            times = {kind: [] for kind in kinds}
            for n in range(calls + 2):  # the first two rounds warm up connections and caches, untimed
                for kind, (base, sent) in kinds.items():
                    begun = time.perf_counter()
                    with client.stream("POST", base + "/chat/completions", json=sent) as response:
                        response.read()
                        if response.status_code != 200:
                            raise RuntimeError(f"{kind} call: HTTP {response.status_code}: {response.text[:300]}")
                    if n >= 2:
                        times[kind].append((time.perf_counter() - begun) * 1000)
            p50 = {kind: statistics.median(values) for kind, values in times.items()}
            added_recording = p50["recording"] - p50["direct_recording"]
            added_plain = p50["plain"] - p50["direct_plain"]
            out["stream" if stream else "whole"] = {
                "p50_ms": {kind: round(value, 2) for kind, value in p50.items()},
                "proxy_ms_recording": round(added_recording, 2),
                "proxy_ms_plain": round(added_plain, 2),
                "recording_overhead_ms_per_call": round(added_recording - added_plain, 2),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="rollouts per prompt (GRPO's num_generations)")
    parser.add_argument("--slots", type=int, default=4, help="rollout slots (CLAWGYM_ROLLOUT_SLOTS)")
    parser.add_argument("--workers", type=int, help="django-q worker processes (default: slots + 2)")
    parser.add_argument("--overhead-calls", type=int, default=40, help="calls of each kind (0: leave part 2 out)")
    parser.add_argument("--overhead-prompt-tokens", type=int, default=16000)
    parser.add_argument("--overhead-answer-tokens", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve_model(args.serve_model)
        return
    args.workers = args.workers or args.slots + 2

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-rl-bench-"))
    model_port, app_port = free_port(), free_port()
    os.environ.update(
        {
            "CLAWGYM_VAR_DIR": str(workdir),
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{app_port}",
            "CLAWGYM_JOB_ENGINE": "django_q",
            "CLAWGYM_Q_WORKERS": str(args.workers),
            "CLAWGYM_ROLLOUT_SLOTS": str(args.slots),
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
        }
    )
    child_env = {**os.environ}
    procs: list[subprocess.Popen] = []
    worker = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from evaluation.harnesses import get_harness
        from jobs.testing import WorkerProcess
        from llm.services import create_endpoint

        get_harness("builtin").check_available()
        call_command("migrate", verbosity=0)
        model_url = f"http://127.0.0.1:{model_port}/v1"
        endpoint = create_endpoint(
            "bench-policy", base_url=model_url, model=MODEL, max_concurrent=1000, roles=["agent"]
        )
        revisions = make_tasks(args.prompts)
        procs.append(
            subprocess.Popen([sys.executable, __file__, "--serve-model", str(model_port)], cwd=BASE_DIR, env=child_env)
        )
        procs.append(start_app(app_port, child_env, BASE_DIR))
        wait_for_port(model_port, procs[0])
        wait_for_port(app_port, procs[1])
        worker = WorkerProcess("django-q", [sys.executable, "manage.py", "qcluster"], child_env).start()
        worker.wait_ready("django_q")
        report = batch(revisions, endpoint, args.samples, args.slots, args.timeout)
        # After the batch, with the workers idle: the overhead calls measure the proxy, not the machine's load.
        worker.stop()
        tokens = (
            overhead(endpoint, model_url, args.overhead_calls, args.overhead_prompt_tokens, args.overhead_answer_tokens)
            if args.overhead_calls
            else None
        )
    finally:
        if worker is not None:
            if worker.alive():
                worker.stop()
            worker.cleanup()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)

    result = {
        "prompts": args.prompts,
        "samples": args.samples,
        "slots": args.slots,
        "workers": args.workers,
        **report,
        "token_overhead": tokens,
        "cpus": os.cpu_count(),
    }
    print(
        f"{report['rollouts']} rollouts in {report['batch_wall_s']} s on {args.slots} slots; slowest one "
        f"{report['slowest_rollout_s']} s (x{report['batch_over_slowest']}); efficiency {report['efficiency']} "
        f"(of slot time {report['slot_efficiency']}; pickup p50 {report['pickup_p50_s']} s); "
        f"{report['samples_built']} samples, {report['inexact_samples']} inexact"
    )
    if tokens:
        print(
            f"token recording: {tokens['stream']['recording_overhead_ms_per_call']} ms per streamed call, "
            f"{tokens['whole']['recording_overhead_ms_per_call']} ms per whole one"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
