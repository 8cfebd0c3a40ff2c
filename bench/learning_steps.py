"""The learning bench's steps (learning_bench.py drives them): each one a management command a user would run, in a
process of its own, and the figures the bench reads back from what the commands left in the database. Nothing here
trains, serves or scores by itself.

- manage(...): a command, its last stdout line parsed as JSON, its wall time added to the bench's timings.
- The model side: serving the base model or a checkpoint with the bench's sampling (set_sampling, serve_base,
  serve_checkpoint), evaluating it (evaluate, evaluate_model: the three held-out splits), the scripted expert that
  plays the demonstrations (start_expert).
- The figures: a model's figures on the splits (figures, kind_means), paired comparisons through `compare` (compared,
  compare_json: the per-task pairs the pooled figures are made of), the runs' serving backends and seeds, rates,
  the RL reward curves.
"""

import json
import statistics
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from learning_protocol import HELDOUT, LEXICAL, SPLITS, UNSEEN, kind_of, spread  # noqa: E402
from manage_runner import BenchError, run_manage  # noqa: E402

from demo.plans import expert_plan, instruction_of  # noqa: E402  (the scripted expert's plans)

EXPERT = "curriculum-expert"
SPLIT_NAMES = {HELDOUT: "held-out", UNSEEN: "unseen kind", LEXICAL: "lexical held-out"}  # in the runs' names


def log(text: str) -> None:
    print(f"[learning-bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def manage(*args, timeout: float = 4 * 3600, timings: dict | None = None, label: str = "") -> dict | list:
    """Run a management command as a user would; its last stdout line parsed as JSON."""
    started = time.monotonic()
    try:
        return run_manage(args, timeout=timeout, log=log)
    finally:
        if timings is not None:
            key = label or str(args[0])
            timings[key] = round(timings.get(key, 0.0) + time.monotonic() - started, 1)


def speed_bench(script: str, model_path: str, *options, timings: dict) -> dict:
    """One of the speed benches (train_speed_bench, rl_step_bench) on the run's model, in a process of its own while
    nothing else trains: its JSON line."""
    started = time.monotonic()
    command = [sys.executable, str(BASE_DIR / "bench" / script), "--model", model_path, *map(str, options)]
    log("$ " + " ".join(command[1:]))
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=BASE_DIR)
    timings["speed"] = round(timings.get("speed", 0.0) + time.monotonic() - started, 1)
    if result.returncode != 0:
        raise BenchError(f"{script} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the scripted expert ---------------------------------------------------------------------------------------


def start_expert(task_dirs: list[Path]):
    """The scripted expert on loopback: stateless, it answers a conversation from its first user turn (which task)
    and its number of assistant turns (which step of the plan)."""
    from llm.testing import Reply, ScriptedUpstream

    plans = {instruction_of(d): expert_plan(d) for d in task_dirs}

    def respond(body: dict):
        messages = (body or {}).get("messages") or []
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        prompt = "\n".join(users)
        plan = next((p for text, p in plans.items() if text and text in prompt), None)
        if plan is None:
            return Reply.text("I do not know this task.")
        step = sum(1 for m in messages if m.get("role") == "assistant")
        if step < len(plan):
            name, arguments = plan[step]
            return Reply.tool_call(name, arguments)
        return Reply.text("Done.")

    server = ScriptedUpstream(model=EXPERT)
    server.responder = respond
    return server.start()


# --- the steps ----------------------------------------------------------------------------------------------


def endpoint_row(name: str) -> dict:
    rows = manage("endpoints", "list", "--json")
    row = next((r for r in rows if r["name"] == name), None)
    if row is None:
        raise BenchError(f"no endpoint {name!r} after serving it")
    return row


def set_sampling(name: str, sampling: dict) -> str:
    """The endpoint with the bench's sampling: the run's, which the proxy holds."""
    row = endpoint_row(name)
    manage(
        "endpoints",
        "add",
        name,
        "--base-url",
        row["base_url"],
        "--model",
        row["model"],
        "--api-key-env",
        row.get("api_key_env") or "",
        "--role",
        "agent",
        "--max-concurrent",
        str(row.get("max_concurrent") or 4),
        "--timeout",
        str(row.get("timeout_seconds") or 120),
        "--sampling",
        json.dumps(sampling),
        "--update",
        "--json",
    )
    return name


def evaluate(
    endpoint: str,
    *,
    benchmark: str | None = None,
    tasks: list[str] | None = None,
    repeats: int,
    max_turns: int,
    name: str,
    timings: dict,
    label: str,
    options: tuple[str, ...] = (),
) -> dict:
    selection = ["--benchmark", benchmark] if benchmark else ["--task", *tasks]
    selection += [part for option in options for part in ("--option", option)]
    report = manage(
        "evaluate",
        *selection,
        "--endpoint",
        endpoint,
        "--harness",
        "builtin",
        "--repeats",
        repeats,
        "--max-turns",
        max_turns,
        "--name",
        name,
        "--fresh",
        "--json",
        timings=timings,
        label=label,
    )
    overall = report["overall"]
    log(f"{label}: run #{report['run']} mean {overall['mean']} ci {overall['ci']} outcomes {report['outcomes']}")
    return report


def reported(run_id: int) -> dict:
    """An earlier evaluation run's figures, as `evaluate --json` printed them (eval_report's export holds them)."""
    return manage("eval_report", run_id, "--json")


def earlier_sft(run_id: int) -> dict:
    """An earlier SFT run in `train --json`'s shape (the fields the bench reads)."""
    from training_jobs.models import Checkpoint, TrainingRun

    run = TrainingRun.objects.get(pk=run_id)
    checkpoints = [
        {"id": c.pk, "step": c.step, "path": c.path} for c in Checkpoint.objects.filter(run=run).order_by("step")
    ]
    return {"run": run.pk, "status": run.status, "checkpoints": checkpoints}


def figures(held: dict, unseen: dict, lexical: dict | None = None) -> dict:
    """A model's figures: the held-out split's run, mean and CI at the top (the contract), each other split beside
    them, and the mean of every kind on each split."""
    found = {
        "run": held["run"],
        "mean": held["overall"]["mean"],
        "ci": held["overall"]["ci"],
        "unseen_kind": {"run": unseen["run"], "mean": unseen["overall"]["mean"], "ci": unseen["overall"]["ci"]},
    }
    if lexical is not None:
        found[LEXICAL] = {"run": lexical["run"], "mean": lexical["overall"]["mean"], "ci": lexical["overall"]["ci"]}
    found["by_kind"] = {
        split: kind_means(report) for split, report in zip(SPLITS, (held, unseen, lexical)) if report is not None
    }
    return found


def kind_means(report: dict) -> dict:
    """{kind: mean over its scored tasks} of an evaluation report's per-task figures."""
    scores: dict[str, list[float]] = {}
    for task, task_figures in (report.get("tasks") or {}).items():
        if task_figures.get("mean") is not None:
            scores.setdefault(kind_of(task), []).append(task_figures["mean"])
    return {kind: round(sum(v) / len(v), 4) for kind, v in sorted(scores.items())}


def split_runs(found: dict) -> dict[str, int]:
    """{split: run id} of a model's figures."""
    runs = {HELDOUT: found["run"], UNSEEN: found["unseen_kind"]["run"]}
    if LEXICAL in found:
        runs[LEXICAL] = found[LEXICAL]["run"]
    return runs


def seeds_independent(*run_ids: int) -> bool:
    """Whether every rollout of each run sampled with a seed of its own (repeats are independent samples: the seed a
    rollout's calls carry is derived from the run's seed, its task and its repeat; evaluation.Rollout.seed)."""
    from evaluation.models import Rollout

    for run_id in run_ids:
        seeds = [s for s in Rollout.objects.filter(eval_run_id=run_id).values_list("seed", flat=True) if s is not None]
        if len(set(seeds)) != len(seeds):  # a rollout without a seed samples freely: independent too
            return False
    return True


def serving_backends(*run_ids: int) -> dict[int, str]:
    """{run: the backend of the server that served its endpoint} (training_jobs.ModelServer), "" when unknown."""
    from evaluation.models import EvalRun
    from training_jobs.models import ModelServer

    found = {}
    for run in EvalRun.objects.filter(pk__in=run_ids):
        server = ModelServer.objects.filter(endpoint_id=run.endpoint_id).exclude(backend="").order_by("-pk")
        found[run.pk] = server.values_list("backend", flat=True).first() or ""
    return found


@cache
def compare_json(a: int, b: int) -> dict:
    """`compare A B --json` (run once a pair): the paired comparison evaluation makes, its per-task rows among it."""
    return manage("compare", a, b, "--json")


def compared(a: int, b: int) -> dict:
    report = compare_json(a, b)
    return {
        "mean_difference": report["mean_difference"],
        "p_value": report["p_value"],
        "tasks": report["tasks_compared"],
    }


def evaluate_model(
    endpoint: str, benchmarks: dict, args, timings: dict, tag: str, options: tuple[str, ...] = ()
) -> tuple[dict, dict]:
    """The endpoint's figures on the three held-out sets, and their reports ({split: `evaluate --json`}: the per-task
    figures). `options`: harness options (KEY=VALUE) for every rollout."""
    reports = {
        split: evaluate(
            endpoint,
            benchmark=benchmarks[split],
            repeats=args.repeats,
            max_turns=args.max_turns,
            name=f"learning-bench {tag} {SPLIT_NAMES[split]}",
            timings=timings,
            label=f"eval-{tag.split()[-1]}",
            options=options,
        )
        for split in SPLITS
    }
    return figures(*(reports[split] for split in SPLITS)), reports


def task_means(report: dict) -> dict[str, float]:
    """{task: its mean} of an evaluation report's scored tasks."""
    return {task: f["mean"] for task, f in (report.get("tasks") or {}).items() if f.get("mean") is not None}


def serve_tokens_per_s(*run_ids: int) -> float | None:
    """The servers' rate over the evaluation runs: output tokens over the runs' wall seconds (start to finish, the
    checkers' time included: a lower bound), all agents together."""
    from evaluation.models import EvalRun

    runs = [r for r in EvalRun.objects.filter(pk__in=run_ids) if r.started_at and r.finished_at]
    seconds = sum((r.finished_at - r.started_at).total_seconds() for r in runs)
    return round(sum(r.output_tokens for r in runs) / seconds, 2) if seconds else None


def agent_tokens_per_s(*run_ids: int) -> float | None:
    """Output tokens over the agents' seconds: the rate one agent saw (lower with more agents at once)."""
    from evaluation.models import EvalRun

    runs = list(EvalRun.objects.filter(pk__in=run_ids))
    tokens = sum(r.output_tokens for r in runs)
    seconds = sum(r.agent_seconds or 0 for r in runs)
    return round(tokens / seconds, 2) if seconds else None


def train_tokens_per_s(report: dict) -> float | None:
    """The SFT trainer's tokens/s (its metric events), the median over the logged steps."""
    from training_jobs.models import TrainingMetric

    rates = [m.values.get("tokens_per_second") for m in TrainingMetric.objects.filter(run_id=report["run"])]
    rates = [float(r) for r in rates if isinstance(r, int | float) and r > 0]
    return round(statistics.median(rates), 1) if rates else None


def slope(values: list) -> float | None:
    """The least-squares slope of the known values over their step numbers (reward per step)."""
    points = [(step, v) for step, v in enumerate(values) if v is not None]
    if len(points) < 2:
        return None
    steps, known = zip(*points, strict=True)
    return round(statistics.linear_regression(steps, known).slope, 4)


def mean_of(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def serve_base(args, sampling: dict, timings: dict) -> str:
    """The base model served (`base_models serve`: the same server again when it runs) with the bench's sampling."""
    served = manage(
        "base_models", "serve", args.base_model, *serve_options(args), "--json", label="serve", timings=timings
    )
    return set_sampling(served["endpoint"], sampling)


def serve_options(args) -> list[str]:
    """The serving backend, named on the command: the serving commands run in the bench's own environment, where
    the app's CLAWGYM_SERVE_BACKEND is not (one invocation served on transformers serve unnoticed that way)."""
    return [] if args.serve_backend == "auto" else ["--backend", args.serve_backend]


def serve_checkpoint(checkpoint_id: int, args, sampling: dict, timings: dict) -> str:
    """A checkpoint served (`serve_checkpoint`) with the bench's sampling: its endpoint's name."""
    served = manage("serve_checkpoint", checkpoint_id, *serve_options(args), "--json", label="serve", timings=timings)
    return set_sampling(served["endpoint"], sampling)


def stop_serving(endpoint: str, timings: dict) -> None:
    manage("serve_checkpoint", "--stop", endpoint, label="serve", timings=timings)


def rl_rewards(run_id: int, mix_tasks: list[str]) -> dict:
    """The RL run's mean reward per step over its own tasks' groups and over its mix's: {"own": [...], "mix": [...]}
    (a step without a scored rollout of a pool: None). The own curve compares like with like: the same tasks every
    step."""
    from training_jobs.models import RLRollout

    rows = RLRollout.objects.filter(run_id=run_id, reward__isnull=False)
    steps: dict[int, dict[str, list[float]]] = {}
    for step, reward, task in rows.values_list("step", "reward", "rollout__revision__task__external_id"):
        steps.setdefault(step, {"own": [], "mix": []})["mix" if task in mix_tasks else "own"].append(reward)
    last = max(steps, default=0)
    return {
        pool: [mean_of(steps.get(step, {}).get(pool) or []) for step in range(1, last + 1)] for pool in ("own", "mix")
    }


# --- training ------------------------------------------------------------------------------------------------


def validate(checkpoint_id: int, validation: list[str], args, sampling: dict, timings: dict, tag: str) -> dict:
    """A checkpoint's report on the validation split (served, evaluated, stopped)."""
    endpoint = serve_checkpoint(checkpoint_id, args, sampling, timings)
    report = evaluate(
        endpoint,
        tasks=validation,
        repeats=args.repeats,
        max_turns=args.max_turns,
        name=f"learning-bench {tag} validation",
        timings=timings,
        label="eval-validation",
    )
    stop_serving(endpoint, timings)
    return report


def build_data(args, seed: int, tasks: list[str], folder: Path, sampling: dict, timings: dict, data: dict) -> dict:
    """Training data two ways (expert iteration, demonstrations) on `tasks`, and the dataset of what scored 1.0."""
    data_runs = []
    if args.self_tasks:
        base_endpoint = serve_base(args, sampling, timings)
        # The served model's own endpoint at temperature 1.0 while the run samples (its evaluate waits for the end),
        # then back: a copy under another name is refused, since a served model's key is registered by ClawGym alone.
        set_sampling(base_endpoint, {**sampling, "temperature": 1.0})
        try:
            report = evaluate(
                base_endpoint,
                tasks=spread(tasks, args.self_tasks),
                repeats=args.samples,
                max_turns=args.max_turns,
                name=f"learning-bench s{seed} expert iteration",
                timings=timings,
                label="data-self",
            )
        finally:
            set_sampling(base_endpoint, sampling)
        data_runs.append(report["run"])
        data["expert_iteration"] = {
            "run": report["run"],
            "rollouts": sum(report["outcomes"].values()),
            "mean": report["overall"]["mean"],
        }
    if args.expert_tasks:
        task_dirs = [p.parent for p in sorted(folder.rglob("data_entry.json"))]
        expert = start_expert(task_dirs)
        try:
            manage(
                "endpoints",
                "add",
                EXPERT,
                "--base-url",
                expert.base_url,
                "--model",
                EXPERT,
                "--role",
                "agent",
                "--max-concurrent",
                "8",
                "--sampling",
                json.dumps({"max_tokens": 4096}),
                "--update",
                "--json",
            )
            report = evaluate(
                EXPERT,
                tasks=spread(tasks, args.expert_tasks),
                repeats=1,
                max_turns=args.max_turns + 4,
                name=f"learning-bench s{seed} demonstrations",
                timings=timings,
                label="data-expert",
            )
        finally:
            expert.stop()
        data_runs.append(report["run"])
        data["demonstrations"] = {
            "run": report["run"],
            "rollouts": sum(report["outcomes"].values()),
            "mean": report["overall"]["mean"],
        }
    manage("base_models", "stop", args.base_model, label="serve", timings=timings)  # its RAM and cores to training
    if not data_runs:
        raise BenchError("no training data: give --self-tasks or --expert-tasks")
    dataset = manage(
        "build_dataset",
        *[a for r in data_runs for a in ("--run", r)],
        "--min-reward",
        "1.0",
        "--base-model",
        args.base_model,
        "--validation-share",
        "0.0",
        "--name",
        f"learning-bench seed {seed}",
        "--json",
        label="dataset",
        timings=timings,
    )
    data["dataset"] = dataset
    log(f"dataset: {json.dumps(dataset)[:400]}")
    return dataset


def train_sft(args, seed: int, dataset: dict, settings: dict, timings: dict) -> dict:
    """One SFT candidate: `train --kind sft` from the base model at the candidate's learning rate and epochs."""
    return manage(
        "train",
        "--kind",
        "sft",
        "--dataset",
        dataset["dataset"],
        "--base-model",
        args.base_model,
        "--preset",
        "tiny-cpu",
        "--cpu",
        "--set",
        f"num_train_epochs={settings['epochs']}",
        "--set",
        f"learning_rate={settings['learning_rate']}",
        "--set",
        "max_steps=-1",
        "--set",
        "max_length=2048",
        "--set",
        f"global_batch_size={args.sft_batch}",
        "--set",
        "save_steps=100000",
        "--set",
        "lr_scheduler_type=constant",
        "--name",
        f"learning-bench s{seed} sft lr {settings['learning_rate']:g} x{settings['epochs']:g}",
        "--json",
        label="sft",
        timings=timings,
    )


def train_rl(args, seed: int, sft_checkpoint: dict, tasks: list[str], mix: dict, settings: dict, timings: dict) -> dict:
    """One RL candidate: GRPO from the SFT checkpoint on `tasks` (all of them at every step) and the mix's share of
    each step from its tasks, at the candidate's learning rate and KL weight (beta: against the SFT checkpoint, the
    run's base model)."""
    mixed = [a for t in mix["tasks"] for a in ("--mix-task", t)]
    rl_run = manage(
        "train",
        "--kind",
        "rl",
        "--base-model",
        sft_checkpoint["path"],
        *[a for t in tasks for a in ("--task", t)],
        *mixed,
        "--harness",
        "builtin",
        "--preset",
        "tiny-cpu",
        "--cpu",
        "--set",
        f"max_steps={args.rl_steps}",
        "--set",
        f"learning_rate={settings['learning_rate']}",
        "--set",
        f"beta={settings['beta']}",
        "--set",
        f"mix_share={mix['share'] if mixed else 0.0}",
        "--set",
        f"prompts_per_step={mix['prompts_per_step']}",
        "--set",
        f"num_generations={args.rl_generations}",
        "--set",
        f"max_completion_length={args.max_tokens}",
        "--set",
        f"max_turns={args.max_turns}",
        "--set",
        "temperature=1.0",
        "--set",
        f"save_steps={args.rl_steps}",
        # A step's rollouts can hold twice as many samples as rollouts (a call whose tokens do not re-render the same
        # breaks the chain), and TRL forwards a micro-batch whole: without checkpointing, 14 samples of about 1,500
        # tokens took the trainer past 22 GB here and the kernel killed it.
        "--set",
        "gradient_checkpointing=true",
        "--name",
        f"learning-bench s{seed} rl lr {settings['learning_rate']:g} beta {settings['beta']:g}",
        "--json",
        label="rl",
        timings=timings,
    )
    if rl_run["status"] != "succeeded" or not rl_run["checkpoints"]:
        raise BenchError(f"the RL run did not succeed: {json.dumps(rl_run)[:600]}")
    return rl_run
