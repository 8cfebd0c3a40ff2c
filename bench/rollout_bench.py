#!/usr/bin/env python
"""Rollout runner benchmark: K rollouts of a small task through the runner, against a bare loop of the same harness.

- The task: summarise fruit.csv into summary.txt (a real checker scores it). The model is a scripted OpenAI-compatible
  server in a process of its own that answers from the conversation, so any number of agents can share it: no tool
  result yet -> a `write` call with the right file; otherwise -> a final "Done." (streamed when asked, as OpenClaw
  asks).
- Bare loop: `openclaw agent exec` (or, with --harness builtin, builtin_agent.py) run directly on the host,
  `--concurrency` at a time, each with its own workspace, config and state, talking straight to the scripted model:
  no sandbox, no proxy, no jobs, no scoring.
- Runner: the same K rollouts as jobs on a real django-q cluster with `--concurrency` workers (and as many sandbox
  slots), through everything a rollout does: bubblewrap sandbox, relay, recording proxy (the ASGI app under uvicorn),
  workspace diff, checker, trajectories. Timed from enqueueing to the last one finished.
Both run on a throwaway SQLite database in a temp folder, after one untimed bare warm-up run (cold file caches would
otherwise charge whichever side runs first). Throughput is rollouts per minute; the ratio is runner over bare. Peak
memory per rollout is the largest resident set of the agent process (Node holds the whole agent), per rollout.
The last line is one JSON object.

With --deadline SECONDS it measures instead how soon an agent past its deadline is stopped: the model's first answer
is `exec sleep 600`, each rollout runs with that timeout, and the report gives each rollout's agent seconds; the aim
is every rollout ended "timeout" within the deadline plus the driver's grace between SIGTERM and SIGKILL (plus one
second). (The tests check the exit reason and that the work before the deadline is scored, not how long it took.)

    .venv/bin/python bench/rollout_bench.py [--rollouts 4] [--concurrency 2] [--harness openclaw|builtin]
    .venv/bin/python bench/rollout_bench.py --harness builtin --deadline 3 [--rollouts 2]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from netutil import free_port, start_app, wait_for_port  # noqa: E402  (bench/ helper)

AIM_THROUGHPUT_RATIO = 0.9
MODEL = "bench-model"
MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)"
)


def serve_model(port: int, stall: bool = False) -> None:
    """The scripted model process: its answer depends only on the conversation it is sent. `stall`: the first answer
    is a command that outlasts any deadline."""
    import django
    import uvicorn

    django.setup()  # the task's fixtures module reads models
    from evaluation.testing import RIGHT_SUMMARY
    from llm.testing import Reply, ScriptedUpstream

    class ConversationModel(ScriptedUpstream):
        async def _answer(self, send, path, reply, received):
            messages = (received.json or {}).get("messages") or []
            if any(m.get("role") == "tool" for m in messages if isinstance(m, dict)):
                reply = Reply.text("Done.")
            elif stall:
                reply = Reply.tool_call("exec", {"command": "sleep 600"})
            else:
                reply = Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})
            await super()._answer(send, path, reply, received)

    model = ConversationModel(default=Reply.text("unused"), model=MODEL)
    uvicorn.run(model, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


# --- the bare loop ----------------------------------------------------------------------------------------------


def bare_command(harness: str, run_dir: Path, workspace: Path, model_url: str, instruction: str) -> tuple[list, dict]:
    if harness == "builtin":
        config = {
            "base_url": model_url,
            "api_key": "bench",
            "model": MODEL,
            "instruction": instruction,
            "workspace": str(workspace),
            "max_turns": 10,
            "output": str(run_dir / "out.json"),
        }
        (run_dir / "agent.json").write_text(json.dumps(config))
        inside = BASE_DIR / "evaluation" / "harnesses" / "inside" / "builtin_agent.py"
        return ["/usr/bin/python3", str(inside), str(run_dir / "agent.json")], {"PATH": "/usr/bin:/bin"}
    from evaluation.harnesses.base import AgentTask
    from evaluation.harnesses.openclaw import PROVIDER, harness_paths, openclaw_config

    config = openclaw_config(AgentTask(instruction, MODEL, "chat", "bench", 300))
    config["models"]["providers"][PROVIDER]["baseUrl"] = model_url
    (run_dir / "openclaw.json").write_text(json.dumps(config))
    (run_dir / "state").mkdir()
    (run_dir / "home").mkdir()
    node, openclaw = harness_paths()
    argv = [
        str(node / "bin" / "node"),
        str(openclaw / "node_modules" / "openclaw" / "openclaw.mjs"),
        "agent",
        "exec",
        "--config",
        str(run_dir / "openclaw.json"),
        "--state-dir",
        str(run_dir / "state"),
        "--cwd",
        str(workspace),
        "--model",
        f"{PROVIDER}/{MODEL}",
        "--timeout",
        "300",
        "--json",
        instruction,
    ]
    env = {
        "PATH": f"{node / 'bin'}:/usr/bin:/bin",
        "HOME": str(run_dir / "home"),
        "OPENCLAW_OFFLINE": "1",
        "LANG": "C.UTF-8",
        "TMPDIR": str(run_dir),
    }
    return argv, env


def bare_one(harness: str, workdir: Path, n: int, model_url: str, inputs: dict, instruction: str) -> dict:
    run_dir = workdir / f"bare-{n}"
    workspace = run_dir / "workspace"
    workspace.mkdir(parents=True)
    for path, data in inputs.items():
        (workspace / path).write_bytes(data)
    argv, env = bare_command(harness, run_dir, workspace, model_url, instruction)
    # Through a small launcher that reports its child's peak RSS: measured from this (large) process, the agent's
    # ru_maxrss would start at this process's own, since a vforked child shares our memory until it execs.
    launcher = ["/usr/bin/python3", "-c", MEASURE, str(run_dir / "maxrss"), *argv]
    with open(run_dir / "stdout", "wb") as out, open(run_dir / "stderr", "wb") as err:
        returncode = subprocess.call(launcher, stdout=out, stderr=err, env=env, cwd=workspace)
    written = (workspace / "summary.txt").exists()
    rss = int((run_dir / "maxrss").read_text()) * 1024 if (run_dir / "maxrss").exists() else 0
    return {
        "ok": returncode == 0 and written,
        "rss": rss,
        "error": "" if written else (run_dir / "stderr").read_text(errors="replace")[-500:],
    }


def bare_loop(harness, workdir, model_url, inputs, instruction, rollouts, concurrency, offset=0) -> dict:
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(
            pool.map(lambda n: bare_one(harness, workdir, offset + n, model_url, inputs, instruction), range(rollouts))
        )
    seconds = time.monotonic() - started
    failed = [r["error"] for r in results if not r["ok"]]
    return summary(seconds, rollouts, [r["rss"] for r in results], ok=rollouts - len(failed), errors=failed[:2])


# --- the runner -------------------------------------------------------------------------------------------------


def runner(harness, revision, endpoint, rollouts, concurrency, timeout) -> dict:
    from evaluation.models import Rollout
    from evaluation.services.rollouts import start_rollouts

    started = time.monotonic()
    created = start_rollouts(revision, endpoint, harness=harness, repeats=rollouts, options={"timeout": 300}, user=None)
    ids = [r.pk for r in created]
    while True:
        done = Rollout.objects.filter(pk__in=ids, status__in=Rollout.FINISHED)
        if done.count() == len(ids):
            break
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the runner's rollouts did not finish within {timeout} s")
        time.sleep(0.2)
    seconds = time.monotonic() - started
    finished = list(Rollout.objects.filter(pk__in=ids))
    scores = [r.score for r in finished if r.status == Rollout.Status.SCORED]
    errors = [f"#{r.pk} {r.status} {r.exit_reason}: {r.error}"[:300] for r in finished if r.score != 1.0]
    rss = [r.max_rss_bytes or 0 for r in finished]
    report = summary(seconds, rollouts, rss, ok=scores.count(1.0), errors=errors[:2])
    report["mean_score"] = round(statistics.mean(scores), 3) if scores else None
    report["model_calls"] = sum(r.model_calls for r in finished)
    report["mean_agent_seconds"] = round(statistics.mean(r.agent_seconds or 0 for r in finished), 2)
    return report


def deadline_runs(harness, revision, endpoint, rollouts, concurrency, deadline, timeout) -> dict:
    """K rollouts whose agent runs past `deadline`: how long each agent ran before it was stopped."""
    from evaluation.harnesses.inside.driver import GRACE_SECONDS
    from evaluation.models import Rollout
    from evaluation.services.rollouts import start_rollouts

    started = time.monotonic()
    created = start_rollouts(
        revision, endpoint, harness=harness, repeats=rollouts, options={"timeout": deadline}, user=None
    )
    ids = [r.pk for r in created]
    while Rollout.objects.filter(pk__in=ids, status__in=Rollout.FINISHED).count() < len(ids):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the deadline rollouts did not finish within {timeout} s")
        time.sleep(0.2)
    finished = list(Rollout.objects.filter(pk__in=ids).order_by("pk"))
    agent_seconds = [r.agent_seconds or 0.0 for r in finished]
    aim = deadline + GRACE_SECONDS + 1
    return {
        "deadline_seconds": deadline,
        "concurrency": concurrency,
        "exit_reasons": [r.exit_reason for r in finished],
        "agent_seconds": [round(x, 2) for x in agent_seconds],
        "max_agent_seconds": round(max(agent_seconds), 2),
        "aim_max_agent_seconds": aim,
        "end_to_end_seconds": round(time.monotonic() - started, 2),
        "met": all(r.exit_reason == "timeout" for r in finished) and max(agent_seconds) <= aim,
    }


def summary(seconds: float, rollouts: int, rss: list[int], *, ok: int, errors: list[str]) -> dict:
    return {
        "rollouts": rollouts,
        "seconds": round(seconds, 2),
        "rollouts_per_minute": round(60 * rollouts / seconds, 2),
        "ok": ok,
        "peak_rss_mb": round(max(rss) / 2**20, 1) if rss else None,
        "mean_rss_mb": round(statistics.mean(rss) / 2**20, 1) if rss else None,
        "errors": errors,
    }


def combined(rounds: list[dict]) -> dict:
    """Rounds of one side as one: times and counts summed, memory and scores over all."""
    seconds = sum(r["seconds"] for r in rounds)
    rollouts = sum(r["rollouts"] for r in rounds)
    out = {
        "seconds": round(seconds, 2),
        "rollouts_per_minute": round(60 * rollouts / seconds, 2),
        "ok": sum(r["ok"] for r in rounds),
        "peak_rss_mb": max(r["peak_rss_mb"] or 0 for r in rounds),
        "mean_rss_mb": round(statistics.mean(r["mean_rss_mb"] or 0 for r in rounds), 1),
        "errors": [e for r in rounds for e in r["errors"]][:3],
        "rounds_seconds": [r["seconds"] for r in rounds],
    }
    for key in ("model_calls",):
        if key in rounds[0]:
            out[key] = sum(r[key] for r in rounds)
    for key in ("mean_score", "mean_agent_seconds"):
        values = [r[key] for r in rounds if r.get(key) is not None]
        if key in rounds[0]:
            out[key] = round(statistics.mean(values), 3) if values else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=4, help="K: rollouts on each side")
    parser.add_argument("--concurrency", type=int, default=2, help="at once, on each side (workers and slots)")
    parser.add_argument("--harness", default="openclaw", choices=["openclaw", "builtin"])
    parser.add_argument("--rounds", type=int, default=1, help="alternating bare/runner rounds, summed (default 1)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--deadline",
        type=int,
        metavar="SECONDS",
        help="measure how soon agents past this deadline are stopped (instead of the throughput)",
    )
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--stall", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve_model(args.serve_model, stall=args.stall)
        return

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-rollout-bench-"))
    model_port, app_port = free_port(), free_port()
    env = {
        "CLAWGYM_VAR_DIR": str(workdir),
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{app_port}",
        "CLAWGYM_JOB_ENGINE": "django_q",
        "CLAWGYM_Q_WORKERS": str(args.concurrency),
        "CLAWGYM_ROLLOUT_SLOTS": str(args.concurrency),
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
    }
    os.environ.update(env)
    child_env = {**os.environ}
    procs: list[subprocess.Popen] = []
    worker = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from evaluation.harnesses import get_harness
        from evaluation.testing import fruit_package
        from jobs.testing import WorkerProcess
        from llm.services import create_endpoint
        from tasks.services import save_package

        get_harness(args.harness).check_available()
        call_command("migrate", verbosity=0)
        model_url = f"http://127.0.0.1:{model_port}/v1"
        endpoint = create_endpoint("bench-model", base_url=model_url, model=MODEL, max_concurrent=1000)
        revision = save_package(fruit_package("bench-fruit")).revision
        inputs = {f.path: f.blob.content for f in revision.files_by_role("input")}

        stall = ["--stall"] if args.deadline else []
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--serve-model", str(model_port), *stall], cwd=BASE_DIR, env=child_env
            )
        )
        procs.append(start_app(app_port, child_env, BASE_DIR))
        wait_for_port(model_port, procs[0])
        wait_for_port(app_port, procs[1])

        # The worker cluster runs from the start, so both sides share one machine state (its idle polling too).
        worker = WorkerProcess("django-q", [sys.executable, "manage.py", "qcluster"], child_env).start()
        worker.wait_ready("django_q")
        if args.deadline:
            deadline = deadline_runs(
                args.harness, revision, endpoint, args.rollouts, args.concurrency, args.deadline, args.timeout
            )
            print(
                f"deadline {args.deadline} s: agents stopped after {deadline['agent_seconds']} s "
                f"(aim at most {deadline['aim_max_agent_seconds']} s): {deadline['exit_reasons']}"
            )
            print(json.dumps({"harness": args.harness, "cpus": os.cpu_count(), **deadline}))
            return
        warm = bare_loop(args.harness, workdir, model_url, inputs, revision.instruction, 1, 1, offset=10_000)
        if not warm["ok"]:
            raise RuntimeError(f"the warm-up run failed: {warm['errors']}")
        bares, runs = [], []
        for round_number in range(args.rounds):
            # Alternate which side goes first: a machine shared with other work drifts.
            sides = ["bare", "runner"] if round_number % 2 == 0 else ["runner", "bare"]
            for side in sides:
                if side == "bare":
                    bares.append(
                        bare_loop(
                            args.harness,
                            workdir,
                            model_url,
                            inputs,
                            revision.instruction,
                            args.rollouts,
                            args.concurrency,
                            offset=round_number * args.rollouts,
                        )
                    )
                else:
                    runs.append(runner(args.harness, revision, endpoint, args.rollouts, args.concurrency, args.timeout))
        bare, ran = combined(bares), combined(runs)
    finally:
        if worker is not None:
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

    ratio = ran["rollouts_per_minute"] / bare["rollouts_per_minute"]
    report = {
        "harness": args.harness,
        "rollouts": args.rollouts,
        "concurrency": args.concurrency,
        "cpus": os.cpu_count(),
        "bare": bare,
        "runner": ran,
        "throughput_ratio": round(ratio, 3),
        "aim_throughput_ratio": AIM_THROUGHPUT_RATIO,
        "rounds": args.rounds,
        "met": ratio >= AIM_THROUGHPUT_RATIO and ran["ok"] == bare["ok"] == args.rollouts * args.rounds,
        "peak_rss_mb_per_rollout": {"bare": bare["peak_rss_mb"], "runner": ran["peak_rss_mb"]},
    }
    print(
        f"bare: {bare['seconds']} s for {args.rollouts * args.rounds} ({bare['rollouts_per_minute']}/min); runner: "
        f"{ran['seconds']} s ({ran['rollouts_per_minute']}/min, {ran['ok']} scored 1.0); ratio {ratio:.2f}"
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
