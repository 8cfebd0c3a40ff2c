#!/usr/bin/env python
"""The learning bench: does a real small model get better on held-out tasks through ClawGym's own pipeline?

It drives the commands and jobs a user would, against the database DATABASE_URL names and the web app and workers
already running there (`make run` starts both): nothing here trains, serves or scores by itself.

0. The model and the tasks: `base_models add NAME` (SmolLM2-135M-Instruct converted from its registry package),
   `curriculum import` (the generated task family: a train split, a held-out split of new parameters of the same
   kinds, a held-out split of the same kinds in words no train task uses, and a held-out kind never trained on,
   the three held-out splits frozen as benchmark versions).
1. Base: `base_models serve NAME`, then `evaluate` the held-out split and the unseen kind (builtin harness,
   --repeats, the bench's sampling on the endpoint).
2. Training data, two ways, reported both: (a) expert iteration, `evaluate` the base model on train tasks with
   --samples rollouts each at temperature 1.0; (b) demonstrations, `evaluate` a scripted expert endpoint on the
   train tasks: an OpenAI-compatible server on loopback (llm.testing.ScriptedUpstream, answering from the task
   folder's reference solution: read the inputs, write what the solution holds, say done)
   that works through the proxy like any model. `build_dataset --run A --run B --min-reward 1.0` keeps what scored
   1.0 (both kinds of rows, counted apart in the report).
3. SFT: `train --kind sft --cpu` from the base model on that dataset, `serve_checkpoint`, evaluate both held-out
   sets, `compare` base vs SFT.
4. RL: `train --kind rl --cpu` (GRPO, the live policy server) from the SFT checkpoint on --rl-tasks train tasks (not
   those the training data came from) of the --rl-kinds kinds the SFT checkpoint solves in part on the held-out split
   (mean nearest 0.5), all of them at every step; serve its last checkpoint, evaluate, `compare` SFT vs RL; the reward
   curve is reported (per step, its mean over each half of the steps and its slope).
5. One JSON line last (a contract):
   {"base": {"run", "mean", "ci", "unseen_kind": {"run", "mean", "ci"}}, "sft": {same}, "rl": {same},
    "sft_vs_base": {"mean_difference", "p_value"}, "rl_vs_sft": {same}, "train_tokens_per_s", "serve_tokens_per_s",
    "minutes", "train_speed_vs_bare", "rl_step_vs_bare"}
   and beyond it "base_few_shot" (the base model shown one worked tool call first: the builtin harness's few_shot),
   for each model, "heldout_lexical" ({"run", "mean", "ci"}: the split drawn from words no train task
   uses) and "by_kind" ({split: {kind: mean}}); "comparisons" (sft_vs_base, rl_vs_sft, rl_vs_base, each on every
   split: {"mean_difference", "p_value"}); "serve_backend" (the one backend every compared run was served on, or
   {run: backend} with "serve_backends_same": false when they differ: compared runs must differ only in the model);
   "seeds_independent" (every rollout of each run sampled with its own seed), "data" (rows by source),
   "agent_tokens_per_s" (the rate one agent saw),
   "rl_kinds" (the kinds RL trained, with the SFT checkpoint's held-out means), "rl_reward" (per step) with its mean
   over each half of the steps ("rl_reward_halves") and its slope ("rl_reward_slope"), "speed" (the JSON lines of
   bench/train_speed_bench.py and bench/rl_step_bench.py run on the SFT checkpoint at the end, whose ratios are
   train_speed_vs_bare and rl_step_vs_bare; --no-speed leaves them out, null), "seconds" (each step's wall
   seconds). The runs are ordinary evaluation runs: the leaderboard, compare and the training curves show them.

    DATABASE_URL=... .venv/bin/python bench/learning_bench.py [--base-model smollm2-135m-instruct] [--seed 0]
        [--sizes train=23,heldout=3,unseen_kind=8,heldout_lexical=3] [--repeats 2] [--samples 4] [--self-tasks 7]
        [--expert-tasks 56] [--sft-epochs 2] [--sft-lr 1e-4] [--sft-batch 4] [--rl-steps 8] [--rl-kinds 2]
        [--rl-tasks 4]
        [--rl-lr 2e-5] [--rl-generations 4] [--serve-backend batched] [--no-speed]

Sizes: the defaults are chosen for a 2-core CPU within about 90 minutes (see the README's figures), with the app
started as `CLAWGYM_ROLLOUT_SLOTS=16 CLAWGYM_Q_WORKERS=18 make run` and the models served on `--serve-backend
batched` (ClawGym's batched CPU server samples the agents' calls together and reuses each conversation's cache, so
16 agents at once keep it busier than 4; the builtin harness's agents are light); each step's wall time is printed
to stderr as it goes, so a slower machine shows where its time went.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from demo.plans import expert_plan, instruction_of  # noqa: E402  (the scripted expert's plans)

MANAGE = [sys.executable, str(BASE_DIR / "manage.py")]
EXPERT = "curriculum-expert"
HELDOUT, UNSEEN, LEXICAL = "heldout", "unseen_kind", "heldout_lexical"
SPLITS = (HELDOUT, UNSEEN, LEXICAL)
SPLIT_NAMES = {HELDOUT: "held-out", UNSEEN: "unseen kind", LEXICAL: "lexical held-out"}  # in the runs' names


class BenchError(RuntimeError):
    pass


def log(text: str) -> None:
    print(f"[learning-bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def manage(*args, timeout: float = 4 * 3600, timings: dict | None = None, label: str = "") -> dict | list:
    """Run a management command as a user would; its last stdout line parsed as JSON."""
    started = time.monotonic()
    command = [*MANAGE, *map(str, args)]
    log("$ manage.py " + " ".join(map(str, args))[:300])
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=BASE_DIR)
    if timings is not None:
        key = label or str(args[0])
        timings[key] = round(timings.get(key, 0.0) + time.monotonic() - started, 1)
    if result.returncode != 0:
        raise BenchError(
            f"manage.py {' '.join(map(str, args))[:200]} exited {result.returncode}:\n"
            f"{result.stderr[-3000:]}\n{result.stdout[-1000:]}"
        )
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    if not lines:
        return {}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"text": result.stdout}


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


def kind_of(task_id: str) -> str:
    """A curriculum task's kind: curriculum-s0-SPLIT-KIND-NNN."""
    return task_id.rsplit("-", 2)[-2]


def spread(ids: list[str], n: int) -> list[str]:
    """The first n of `ids` taken round-robin over their kinds, so that a subset holds every kind."""
    by_kind: dict[str, list[str]] = {}
    for task_id in ids:
        by_kind.setdefault(kind_of(task_id), []).append(task_id)
    queues = [list(v) for v in by_kind.values()]
    out: list[str] = []
    while len(out) < n and any(queues):
        for queue in queues:
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


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


# --- the steps -------------------------------------------------------------------------------------------------


def endpoint_row(name: str) -> dict:
    rows = manage("endpoints", "list", "--json")
    row = next((r for r in rows if r["name"] == name), None)
    if row is None:
        raise BenchError(f"no endpoint {name!r} after serving it")
    return row


def set_sampling(name: str, sampling: dict, *, as_name: str | None = None) -> str:
    """The endpoint (or a copy of it under `as_name`) with the bench's sampling: the run's, which the proxy holds."""
    row = endpoint_row(name)
    target = as_name or name
    manage(
        "endpoints",
        "add",
        target,
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
    return target


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


def run_pair(text: str) -> tuple[int, ...]:
    """HELD,UNSEEN[,LEXICAL]: earlier evaluation runs of the splits, in that order."""
    runs = tuple(int(part) for part in text.split(","))
    if len(runs) not in (2, 3):
        raise argparse.ArgumentTypeError(f"give HELD,UNSEEN or HELD,UNSEEN,LEXICAL run ids; got {text!r}")
    return runs


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


def comparisons(models: dict[str, dict]) -> dict:
    """The paired comparison of every pair the bench reports (sft vs base, rl vs sft, rl vs base), on each split
    both models were evaluated on: {"sft_vs_base": {split: {"mean_difference", "p_value"}}, ...}; sft_vs_base_few_shot
    compares SFT with the base model shown one worked tool call."""
    found = {}
    for later, earlier in (("sft", "base"), ("sft", "base_few_shot"), ("rl", "sft"), ("rl", "base")):
        if later not in models or earlier not in models:
            continue
        a, b = split_runs(models[later]), split_runs(models[earlier])
        found[f"{later}_vs_{earlier}"] = {
            split: compared(a[split], b[split]) for split in SPLITS if split in a and split in b
        }
    return found


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


def compared(a: int, b: int) -> dict:
    report = manage("compare", a, b, "--json")
    return {"mean_difference": report["mean_difference"], "p_value": report["p_value"]}


def evaluate_model(
    endpoint: str, benchmarks: dict, args, timings: dict, tag: str, options: tuple[str, ...] = ()
) -> tuple[dict, dict]:
    """The endpoint's figures on the three held-out sets, and the held-out split's report (its per-task figures).
    `options`: harness options (KEY=VALUE) for every rollout."""
    reports = {
        split: evaluate(
            endpoint,
            benchmark=benchmarks[split],
            repeats=args.repeats,
            max_turns=args.max_turns,
            name=f"learning-bench {tag} {SPLIT_NAMES[split]}",
            timings=timings,
            label=f"eval-{tag}",
            options=options,
        )
        for split in SPLITS
    }
    held, unseen, lexical = (reports[split] for split in SPLITS)
    return figures(held, unseen, lexical), held


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-model", default="smollm2-135m-instruct")
    parser.add_argument(
        "--serve-backend",
        choices=["batched", "transformers", "vllm", "auto"],
        default="batched",
        help="how the base model and the checkpoints are served (auto: the settings' CLAWGYM_SERVE_BACKEND)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the curriculum's seed")
    parser.add_argument(
        "--sizes",
        default="train=23,heldout=3,unseen_kind=8,heldout_lexical=3",
        help="the curriculum's tasks per kind ('': the curriculum's own, train=23,heldout=6,unseen_kind=16,"
        "heldout_lexical=6)",
    )
    parser.add_argument("--benchmark", default="learning-bench", help="the held-out benchmarks' name start")
    parser.add_argument("--repeats", type=int, default=2, help="rollouts per held-out task")
    parser.add_argument("--samples", type=int, default=4, help="expert iteration: base-model rollouts per task")
    parser.add_argument("--self-tasks", type=int, default=7, help="expert iteration: train tasks (0: none)")
    parser.add_argument("--expert-tasks", type=int, default=56, help="demonstrations: train tasks (0: none)")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=192, help="per model call")
    parser.add_argument("--temperature", type=float, default=0.7, help="evaluation sampling (expert iteration: 1.0)")
    parser.add_argument("--sft-epochs", type=float, default=2.0)
    parser.add_argument("--sft-lr", type=float, default=1e-4)
    parser.add_argument("--sft-batch", type=int, default=4, help="SFT global batch size (packed rows)")
    parser.add_argument("--rl-steps", type=int, default=8)
    parser.add_argument("--rl-kinds", type=int, default=2, help="RL: the kinds trained (the SFT checkpoint's frontier)")
    parser.add_argument("--rl-tasks", type=int, default=4, help="RL: train tasks of those kinds, all drawn every step")
    # 5e-5 collapsed one run's policy at its first update (every rollout after it answered "Done." without writing,
    # reward 0.72 then 0.0, and nothing left to learn from); 2e-5 on the same checkpoint rose from 0.44 to 0.88.
    parser.add_argument("--rl-lr", type=float, default=2e-5)
    parser.add_argument("--rl-generations", type=int, default=4, help="RL: rollouts a task (the group)")
    parser.add_argument(
        "--speed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end with the SFT and RL speed benches on the SFT checkpoint (train_speed_vs_bare, rl_step_vs_bare)",
    )
    parser.add_argument("--work", type=Path, default=None, help="where the curriculum is built (default: VAR_DIR)")
    # Going on from an earlier invocation (one that stopped or was stopped part way): its finished steps by id.
    parser.add_argument("--base-runs", type=run_pair, help="HELD,UNSEEN[,LEXICAL]: the base model's evaluation runs")
    parser.add_argument("--sft-train-run", type=int, help="the SFT training run (its last checkpoint is used)")
    parser.add_argument("--sft-runs", type=run_pair, help="HELD,UNSEEN[,LEXICAL]: the SFT checkpoint's evaluation runs")
    parser.add_argument("--minutes-before", type=float, default=0.0, help="the earlier invocation's minutes")
    args = parser.parse_args(argv)
    # The steps are commands (subprocesses); this process reads the figures they leave (and the expert server the
    # task folders) through the same settings and DATABASE_URL.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()
    from django.conf import settings

    args.work = args.work or Path(settings.VAR_DIR) / "learning-bench"
    started = time.monotonic()
    timings: dict = {}

    manage("check_workers", label="setup", timings=timings)
    manage("base_models", "add", args.base_model, label="setup", timings=timings, timeout=3600)
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = ["--sizes", args.sizes] if args.sizes else []
    folder = args.work / f"curriculum-s{args.seed}-{args.sizes or 'default'}"
    built = (
        json.loads((folder / "manifest.json").read_text())
        if (folder / "manifest.json").is_file()
        else manage(
            "curriculum",
            "build",
            "--out",
            folder,
            "--seed",
            args.seed,
            *sizes,
            "--json",
            label="setup",
            timings=timings,
        )
    )
    imported = manage(
        "curriculum",
        "import",
        "--seed",
        args.seed,
        *sizes,
        "--benchmark",
        args.benchmark,
        "--json",
        label="setup",
        timings=timings,
        timeout=3600,
    )
    splits = imported["tasks"]
    benchmarks = {split: imported["benchmarks"][split]["name"] for split in SPLITS}
    train = list(splits["train"])

    sampling = {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed}
    data: dict = {}
    if args.base_runs:
        base = figures(*map(reported, args.base_runs))
        log(f"base: the earlier runs {args.base_runs}")
    else:
        base, _ = evaluate_model(serve_base(args, sampling, timings), benchmarks, args, timings, "base")
    # A fairer base beside it: the same model shown one worked tool call first (the builtin harness's few_shot), so
    # that the SFT gain is over a base that has seen the tool-call format, not only over one that never has.
    base_few_shot, _ = evaluate_model(
        serve_base(args, sampling, timings), benchmarks, args, timings, "base-few-shot", options=("few_shot=true",)
    )
    if args.sft_train_run:
        sft_run = earlier_sft(args.sft_train_run)
        data = {"from_sft_run": args.sft_train_run}
    else:
        sft_run = train_sft(args, sampling, train, folder, timings, data)
    if sft_run["status"] != "succeeded" or not sft_run["checkpoints"]:
        raise BenchError(f"the SFT run did not succeed: {json.dumps(sft_run)[:600]}")
    sft_checkpoint = sft_run["checkpoints"][-1]
    if args.sft_runs:
        sft = figures(*map(reported, args.sft_runs))
    else:
        served = manage(
            "serve_checkpoint",
            sft_checkpoint["id"],
            *serve_options(args),
            "--json",
            label="serve",
            timings=timings,
        )
        sft_endpoint = set_sampling(served["endpoint"], sampling)
        sft, sft_held = evaluate_model(sft_endpoint, benchmarks, args, timings, "sft")
        manage("serve_checkpoint", "--stop", sft_endpoint, label="serve", timings=timings)
    # Not the tasks the SFT data came from: the checkpoint has learnt those answers by heart (four of them drawn at
    # temperature 1.0 scored 0.94 at the first step, against 0.67 and 0.33 for their kinds held out).
    trained = set(spread(train, args.expert_tasks)) | set(spread(train, args.self_tasks))
    fresh = [t for t in train if t not in trained] or train
    rl_tasks, rl_kinds = frontier(sft_held, fresh, args.rl_kinds, args.rl_tasks)
    if not rl_tasks:
        raise BenchError("no train task for RL: the SFT checkpoint's held-out run scored no task of a trained kind")
    log(f"rl: {len(rl_tasks)} tasks of the kinds {rl_kinds} (the SFT checkpoint's held-out means)")
    rl_run, rl = train_rl(args, sft_checkpoint, rl_tasks, sampling, benchmarks, timings)
    rewards = [m.get("reward_mean") for m in rl_run.get("metrics") or []]
    # Training at the floor: the SFT path and an RL step against bare loops, on the SFT checkpoint (the model's shape).
    speed = {}
    if args.speed:
        speed["sft"] = speed_bench("train_speed_bench.py", sft_checkpoint["path"], timings=timings)
        speed["rl"] = speed_bench(
            "rl_step_bench.py",
            sft_checkpoint["path"],
            "--prompts",
            min(len(rl_tasks), 4),
            "--generations",
            args.rl_generations,
            "--gradient-checkpointing",
            timings=timings,
        )

    evaluation_runs = [run for found in (base, base_few_shot, sft, rl) for run in split_runs(found).values()]
    # Compared runs must differ only in the model: every evaluation served on one backend, or the bench says so.
    backends = serving_backends(*evaluation_runs)
    if len(set(backends.values())) != 1:
        log(f"serving backends differ between the compared runs: {backends}")
    result = {
        "base": base,
        "sft": sft,
        "rl": rl,
        "sft_vs_base": compared(sft["run"], base["run"]),
        "rl_vs_sft": compared(rl["run"], sft["run"]),
        "train_tokens_per_s": train_tokens_per_s(sft_run),
        "serve_tokens_per_s": serve_tokens_per_s(*evaluation_runs),
        "minutes": round(args.minutes_before + (time.monotonic() - started) / 60, 1),
        "train_speed_vs_bare": speed["sft"]["train_speed_vs_bare"] if speed else None,
        "rl_step_vs_bare": speed["rl"]["rl_step_vs_bare"] if speed else None,
        # Beyond the contract:
        "speed": speed,
        "data": data,
        "agent_tokens_per_s": agent_tokens_per_s(*evaluation_runs),
        "serve_backend": sorted(set(backends.values()))[0] if len(set(backends.values())) == 1 else backends,
        "serve_backends_same": len(set(backends.values())) == 1,
        "seeds_independent": seeds_independent(*evaluation_runs),
        "base_few_shot": base_few_shot,
        "comparisons": comparisons({"base": base, "base_few_shot": base_few_shot, "sft": sft, "rl": rl}),
        "rl_run": rl_run.get("run"),
        "rl_kinds": rl_kinds,
        "rl_reward": rewards,
        "rl_reward_mean": mean_of(rewards),
        # Whether the curve rose: its mean over the first and the second half of the steps.
        "rl_reward_halves": [mean_of(rewards[: len(rewards) // 2]), mean_of(rewards[len(rewards) // 2 :])],
        "rl_reward_slope": slope(rewards),
        "curriculum": {k: len(v) for k, v in splits.items()} | {"seed": args.seed, "sizes": built.get("sizes")},
        "seconds": timings,
    }
    print(json.dumps(result))
    return 0


def frontier(held: dict, train: list[str], kinds: int, count: int) -> tuple[list[str], dict]:
    """RL's tasks: `count` train tasks of the `kinds` kinds whose held-out mean under the SFT checkpoint is nearest
    0.5, and those means. GRPO learns only from a group whose rollouts differ in reward: a kind the checkpoint
    always or never solves gives it almost nothing. The same tasks are drawn at every step, so that the reward
    curve compares like with like (drawn afresh, a step's reward was set by which tasks it drew)."""
    scores: dict[str, list[float]] = {}
    for task, task_figures in held["tasks"].items():
        if task_figures["mean"] is not None:
            scores.setdefault(kind_of(task), []).append(task_figures["mean"])
    trained = {kind_of(t) for t in train}
    means = {kind: sum(v) / len(v) for kind, v in scores.items() if kind in trained}
    chosen = sorted(means, key=lambda kind: (abs(means[kind] - 0.5), kind))[:kinds]
    return spread([t for t in train if kind_of(t) in chosen], count), {k: round(means[k], 3) for k in chosen}


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


def train_sft(args, sampling: dict, train: list[str], folder: Path, timings: dict, data: dict) -> dict:
    """Training data two ways (expert iteration, demonstrations), the dataset of what scored 1.0, the SFT run."""
    data_runs = []
    if args.self_tasks:
        base_endpoint = serve_base(args, sampling, timings)
        hot = set_sampling(base_endpoint, {**sampling, "temperature": 1.0}, as_name=f"{base_endpoint}-t1")
        report = evaluate(
            hot,
            tasks=spread(train, args.self_tasks),
            repeats=args.samples,
            max_turns=args.max_turns,
            name="learning-bench expert iteration",
            timings=timings,
            label="data-self",
        )
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
                tasks=spread(train, args.expert_tasks),
                repeats=1,
                max_turns=args.max_turns + 4,
                name="learning-bench demonstrations",
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
        f"learning-bench seed {args.seed}",
        "--json",
        label="dataset",
        timings=timings,
    )
    data["dataset"] = dataset
    log(f"dataset: {json.dumps(dataset)[:400]}")

    sft_run = manage(
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
        f"num_train_epochs={args.sft_epochs}",
        "--set",
        f"learning_rate={args.sft_lr}",
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
        "learning-bench sft",
        "--json",
        label="sft",
        timings=timings,
    )
    return sft_run


def train_rl(
    args, sft_checkpoint: dict, tasks: list[str], sampling: dict, benchmarks: dict, timings: dict
) -> tuple[dict, dict]:
    """GRPO from the SFT checkpoint on `tasks` (all of them at every step), its last checkpoint served and
    evaluated."""
    rl_tasks = [a for t in tasks for a in ("--task", t)]
    rl_run = manage(
        "train",
        "--kind",
        "rl",
        "--base-model",
        sft_checkpoint["path"],
        *rl_tasks,
        "--harness",
        "builtin",
        "--preset",
        "tiny-cpu",
        "--cpu",
        "--set",
        f"max_steps={args.rl_steps}",
        "--set",
        f"learning_rate={args.rl_lr}",
        "--set",
        f"prompts_per_step={len(tasks)}",
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
        "learning-bench rl",
        "--json",
        label="rl",
        timings=timings,
    )
    if rl_run["status"] != "succeeded" or not rl_run["checkpoints"]:
        raise BenchError(f"the RL run did not succeed: {json.dumps(rl_run)[:600]}")
    served = manage(
        "serve_checkpoint",
        rl_run["checkpoints"][-1]["id"],
        *serve_options(args),
        "--json",
        label="serve",
        timings=timings,
    )
    rl_endpoint = set_sampling(served["endpoint"], sampling)
    rl, _ = evaluate_model(rl_endpoint, benchmarks, args, timings, "rl")
    manage("serve_checkpoint", "--stop", rl_endpoint, label="serve", timings=timings)
    return rl_run, rl


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        log(f"FAILED: {exc}")
        sys.exit(1)
