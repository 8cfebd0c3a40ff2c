"""What the learning bench decides, and on what, apart from the loop it drives (learning_bench.py): plain functions of
task ids and of the runs' figures, so that its tests check them without the loop.

- The tasks it trains on: a seed's train split less the tasks that are near-duplicates of a held-out task (the bench
  finds them with the contamination guard's own check, training_jobs.contamination, and never trains on them), less
  a validation split of `n` tasks a kind (carve_validation) on which every setting is chosen: never on a held-out
  split.
- The settings' candidates (--sft-grid, --rl-grid) and the choice among them (choose: the best validation mean, a tie
  to the earlier candidate).
- The RL run's task mix (mix_plan): its share of each step drawn from the kinds it does not aim at.
- The aims and their verdicts (verdict): met or missed and why, in words ("+0.310 at p = 0.0150 over 42 tasks: p not
  below 0.01"), for one seed and pooled over the seeds (the tasks of every seed together: paired, pooled_mean).
"""

from __future__ import annotations

import argparse

HELDOUT, UNSEEN, LEXICAL = "heldout", "unseen_kind", "heldout_lexical"
SPLITS = (HELDOUT, UNSEEN, LEXICAL)
MODELS = ("base", "base_few_shot", "sft", "rl")

# The aims the bench reports (issue 39): name -> (what, least mean difference, the p-value it must be below, split).
# "at least" aims need a difference of at least `least` and p below `alpha`; "not below" aims (alpha None) need a
# difference of at least 0 whatever its p-value.
AIMS = {
    "sft_over_base": ("SFT over the base model on the held-out split: at least +0.25, p < 0.01", 0.25, 0.01),
    "rl_over_sft_trained_kinds": (
        "RL over SFT on the held-out split's tasks of the kinds RL trained: above 0, p < 0.05",
        0.0,
        0.05,
    ),
    "rl_keeps_unseen_kind": ("RL not below SFT on the unseen kind", 0.0, None),
}
# Which comparison and split each aim reads.
AIM_ON = {
    "sft_over_base": ("sft_vs_base", HELDOUT),
    "rl_over_sft_trained_kinds": ("rl_vs_sft_trained_kinds", HELDOUT),
    "rl_keeps_unseen_kind": ("rl_vs_sft", UNSEEN),
}


def kind_of(task_id: str) -> str:
    """A curriculum task's kind: curriculum-sN-SPLIT-KIND-NNN."""
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


def carve_validation(ids: list[str], per_kind: int) -> tuple[list[str], list[str]]:
    """(validation, the rest): the first `per_kind` tasks of each kind of `ids`, in their order, and the others."""
    taken: dict[str, int] = {}
    validation, rest = [], []
    for task_id in ids:
        kind = kind_of(task_id)
        if taken.get(kind, 0) < per_kind:
            taken[kind] = taken.get(kind, 0) + 1
            validation.append(task_id)
        else:
            rest.append(task_id)
    return validation, rest


def parse_seeds(text: str) -> list[int]:
    """ "1,2,3": the curricula's seeds, each once, in the order given."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are whole numbers separated by commas; got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"give one or more distinct seeds, each 0 or more; got {text!r}")
    return seeds


def parse_sft_grid(text: str) -> list[dict]:
    """ "1e-4x2,2e-4x2": SFT's candidates as learning rate x epochs."""
    return [_candidate(part, "x", ("learning_rate", "epochs"), text) for part in _parts(text)]


def parse_rl_grid(text: str) -> list[dict]:
    """ "2e-5:0.04,1e-5:0.04": RL's candidates as learning rate:KL weight (beta; 0 for none)."""
    return [_candidate(part, ":", ("learning_rate", "beta"), text) for part in _parts(text)]


def _parts(text: str) -> list[str]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("give at least one candidate")
    return parts


def _candidate(part: str, sep: str, names: tuple[str, str], text: str) -> dict:
    first, _, second = part.partition(sep)
    try:
        values = (float(first), float(second))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a candidate is {names[0]}{sep}{names[1]} (e.g. 1e-4{sep}2); got {part!r} in {text!r}"
        ) from None
    if values[0] <= 0 or values[1] < 0 or (names[1] == "epochs" and values[1] == 0):
        raise argparse.ArgumentTypeError(f"{part!r}: the learning rate is above 0, the other at least 0 (epochs above)")
    return dict(zip(names, values, strict=True))


def choose(candidates: list[dict]) -> int:
    """The index of the candidate with the best "validation_mean" (an unscored one never wins; a tie goes to the
    earlier candidate, the grid's order)."""
    best = None
    for index, candidate in enumerate(candidates):
        mean = candidate.get("validation_mean")
        if mean is not None and (best is None or mean > candidates[best]["validation_mean"]):
            best = index
    return 0 if best is None else best


def mix_plan(own_tasks: int, share: float) -> tuple[int, float]:
    """(prompts a step, the mix's exact share of them) for an RL run that draws all of its `own_tasks` at every step
    and `share` of each step from other kinds: the mix adds prompts rather than taking the run's own ones' places."""
    if share <= 0:
        return own_tasks, 0.0
    if share >= 1:
        raise ValueError("the mix's share is below 1: a step keeps the run's own tasks")
    prompts = max(own_tasks + 1, round(own_tasks / (1 - share)))
    return prompts, (prompts - own_tasks) / prompts


def check_tasks(held_out_report: dict, kinds: set[str]) -> list[str]:
    """The held-out split's tasks (an `evaluate --json` report's) of `kinds`: those RL's aim is checked on. At
    --repeats rollouts a task the held-out run is too coarse for it: RL moved 3 of 12 such tasks up and none down on
    one seed (+0.167, p = 0.25), and the exact sign-flip test over 12 tasks cannot go below 0.05 until 6 move one
    way."""
    return sorted(task for task in held_out_report.get("tasks") or {} if kind_of(task) in kinds)


def pairs_of(comparison: dict, kinds: set[str] | None = None) -> list[tuple[float, float]]:
    """(A's mean, B's mean) of each task `compare --json` paired (its per_task rows), of `kinds` only when given."""
    return [
        (row["a"], row["b"])
        for row in comparison.get("per_task") or []
        if kinds is None or kind_of(row["task"]) in kinds
    ]


def paired(pairs: list[tuple[float, float]]) -> dict:
    """{"mean_difference", "ci", "p_value", "tasks"} of A - B over paired task means: evaluation's own statistics
    (a bootstrap interval, a sign-flip p-value), as `compare` computes them."""
    from evaluation.stats import paired_difference

    if not pairs:
        return {"mean_difference": None, "ci": [None, None], "p_value": None, "tasks": 0}
    found = paired_difference([a for a, _ in pairs], [b for _, b in pairs])
    return {key: _rounded(found[key]) for key in ("mean_difference", "ci", "p_value", "tasks")}


def pooled_mean(task_means: list[float]) -> dict:
    """{"mean", "ci", "tasks"} over the task means of every seed together (evaluation's bootstrap over tasks)."""
    from evaluation.stats import mean_with_ci

    found = mean_with_ci(task_means)
    return {key: _rounded(found[key]) for key in ("mean", "ci", "tasks")}


def _rounded(value):
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return round(value, 4) if isinstance(value, float) else value


def verdict(aim: str, figures: dict | None, *, over: str = "", missing: str = "") -> dict:
    """An aim's verdict on a comparison's figures ({"mean_difference", "p_value", "tasks"}): {"aim", "met", "why",
    and the figures}. `over` says what the tasks are beyond their count ("of 3 seeds"); `missing` why there are no
    figures (then met is None)."""
    what, least, alpha = AIMS[aim]
    found = {"aim": what}
    difference = (figures or {}).get("mean_difference")
    if difference is None:
        return {**found, "met": None, "why": f"not measured: {missing or 'no task was scored by both runs'}"}
    p_value, tasks = figures.get("p_value"), figures.get("tasks")
    found.update(mean_difference=difference, p_value=p_value, tasks=tasks)
    shown = f"{difference:+.3f}" + (f" at p = {p_value:.4f}" if p_value is not None else "")
    shown += f" over {tasks} tasks" + (f" {over}" if over else "")
    if alpha is None:  # "not below": no p-value asked, only that it did not fall
        met = difference >= least
        why = shown if met else f"{shown}: fell by {-difference:.3f}"
    else:
        too_small = difference < least if least > 0 else difference <= 0
        too_likely = p_value is None or p_value >= alpha
        met = not too_small and not too_likely
        reasons = []
        if too_small:
            reasons.append(f"the difference is not {'at least ' + format(least, '+.2f') if least > 0 else 'above 0'}")
        if too_likely:
            reasons.append(f"p not below {alpha}")
        why = shown if met else f"{shown}: {' and '.join(reasons)}"
    return {**found, "met": met, "why": ("met: " if met else "missed: ") + why}


def aims(comparisons: dict, *, over: str = "") -> dict:
    """Every aim's verdict on the comparisons ({name: {split: figures}}) it reads (AIM_ON)."""
    found = {}
    for name, (comparison, split) in AIM_ON.items():
        figures = comparisons.get(comparison, {}).get(split)
        found[name] = verdict(name, figures, over=over, missing=f"no {comparison} on the {split} split")
    return found


def pooled(seeds: dict) -> dict:
    """The figures over every seed's tasks together. `seeds`: {seed: {"result": its figures (its models' runs, its
    aims), "pairs": {comparison: {split: [(A's mean, B's mean) per task]}}, "task_means": {model: {split: [mean per
    task]}}}}. Each model's mean on each split over every seed's tasks (its held-out split's at the top, as one seed's
    figures are), each comparison paired over every seed's task pairs, the aims on those, and how many seeds met each
    aim alone."""
    order = sorted(seeds)
    models = {}
    for model in MODELS:
        found: dict = {"runs": [seeds[seed]["result"][model]["run"] for seed in order]}
        for split in SPLITS:
            means = [mean for seed in order for mean in seeds[seed]["task_means"][model].get(split, [])]
            if split == HELDOUT:
                found.update(pooled_mean(means))
            else:
                found[split] = pooled_mean(means)
        models[model] = found
    names = list(dict.fromkeys(name for seed in order for name in seeds[seed]["pairs"]))
    comparisons = {}
    for name in names:
        splits = [split for split in SPLITS if any(split in seeds[seed]["pairs"].get(name, {}) for seed in order)]
        comparisons[name] = {
            split: paired([pair for seed in order for pair in seeds[seed]["pairs"].get(name, {}).get(split, [])])
            for split in splits
        }
    found_aims = aims(comparisons, over=f"of {len(order)} seeds")
    for name, found in found_aims.items():
        met = sum(1 for seed in order if seeds[seed]["result"]["aims"][name]["met"])
        found["seeds_met"] = f"{met} of {len(order)}"
    return {
        **models,
        "sft_vs_base": comparisons.get("sft_vs_base", {}).get(HELDOUT),
        "rl_vs_sft": comparisons.get("rl_vs_sft", {}).get(HELDOUT),
        "comparisons": comparisons,
        "aims": found_aims,
    }
