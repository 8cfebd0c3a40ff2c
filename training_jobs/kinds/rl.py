"""RL: GRPO on sandboxed rollouts of tasks, their checker's score the reward (training.trainers.grpo, with
training_jobs.rl). Its presets (training.rl.presets), the rules across its keys, the tasks it trains on (the
contamination guard: never a benchmark task), its `train --json` figures and its part of the run page
(kinds.rl_pages).
"""

import copy

from benchmarks.models import PinnedRevision
from evaluation.harnesses import HARNESSES, check_duration
from lib.bounds import parse_id
from llm.models import SERVED_KEY_PREFIX, key_env_refusal
from tasks.models import Task, TaskRevision
from tasks.selection import SelectionError, select_tasks
from training.rl.presets import RL_CHOICES, RL_PRESETS
from training.rl.task_mix import TaskMixError, check_mix

from . import rl_pages
from .base import Launch, TrainingKind, TrainingRunError, checkpoints_of, edited, model_label, model_path

# The step metrics `train --kind rl --json` gives.
REPORT_KEYS = (
    "reward_mean",
    "reward_std",
    "groups_dropped",
    "inexact_samples",
    "rollout_p50_s",
    "rollout_max_s",
    "loss",
)


def build_rl_config(preset: str, overrides: dict | None = None, *, base: dict | None = None) -> dict:
    """An RL preset (or a stored RL config) with typed dotted-key edits, then the rules across keys. The run's tasks
    and mix tasks are kept as they are (they are given apart from the edits, and checked by the contamination
    guard)."""
    if base is None:
        if preset not in RL_PRESETS:
            raise TrainingRunError(f"unknown RL preset {preset!r}; choose one of {', '.join(RL_PRESETS)}")
        base = RL_PRESETS[preset]
    base = copy.deepcopy(base)
    given = {key: base.pop(key) for key in ("tasks", "mix_tasks") if key in base}
    config = edited(base, overrides, RL_CHOICES)
    _check_rl(config)
    config.update(given)
    if "tasks" in given:  # a stored config (resume, clone): its mix must still fit the edited steps
        _check_mix(config)
    return config


def _check_mix(config: dict) -> None:
    """The task mix against the run's tasks (config["tasks"] holds every task trained, mix_tasks among them)."""
    mix = set(config.get("mix_tasks") or [])
    own = [t for t in config.get("tasks") or [] if t not in mix]
    try:
        check_mix(config.get("mix_share", 0.0), config["prompts_per_step"], tasks=len(own), mix_tasks=len(mix))
    except TaskMixError as exc:
        raise TrainingRunError(str(exc)) from None


def _check_rl(config: dict) -> None:
    generations, survivors = config["num_generations"], config["min_group_survivors"]
    if generations < 2:
        raise TrainingRunError("num_generations must be at least 2 (GRPO compares the rollouts of a group)")
    if not 1 <= survivors <= generations:
        raise TrainingRunError(f"min_group_survivors must be between 1 and num_generations ({generations})")
    for key in (
        "prompts_per_step",
        "max_steps",
        "save_steps",
        "max_completion_length",
        "max_context",
        "max_turns",
        "rollout_timeout",
        "batch_timeout",
    ):
        if config[key] < 1:
            raise TrainingRunError(f"{key} must be at least 1")
    try:
        check_duration("rollout_timeout", config["rollout_timeout"])  # each rollout's deadline: the same cap as all
    except ValueError as exc:
        raise TrainingRunError(str(exc)) from None
    if config["max_completion_length"] >= config["max_context"]:
        raise TrainingRunError("max_completion_length must be below max_context (the prompt needs room)")
    if config["temperature"] <= 0:
        raise TrainingRunError("temperature must be above 0 (GRPO samples; greedy rollouts of a group are alike)")
    if config["beta"] < 0 or config["epsilon"] < 0 or config["epsilon_high"] < config["epsilon"]:
        raise TrainingRunError("beta and epsilon cannot be negative, and epsilon_high is at least epsilon")
    if not 0 <= config.get("mix_share", 0.0) < 1:
        raise TrainingRunError("mix_share is the share of a step's prompts drawn from the mix tasks: in [0, 1)")
    dist = config["distributed"]
    if dist["deepspeed"] and dist["fsdp"]:
        raise TrainingRunError("choose DeepSpeed or FSDP, not both (distributed.deepspeed / distributed.fsdp)")
    _check_policy(config["policy"])


def _check_policy(policy: dict) -> None:
    """A vLLM policy's key variable is fenced like an endpoint's (it becomes the run's policy endpoint's)."""
    key_env = policy.get("api_key_env") or ""
    if key_env:
        refusal = key_env_refusal(key_env)
        if not refusal and key_env.startswith(SERVED_KEY_PREFIX):
            refusal = f"{SERVED_KEY_PREFIX}… names the keys of servers ClawGym starts itself"
        if refusal:
            raise TrainingRunError(f"policy.api_key_env: {refusal}")
    endpoint_url = policy.get("endpoint_url") or ""
    if endpoint_url and not endpoint_url.startswith(("http://", "https://")):
        raise TrainingRunError(f"policy.endpoint_url must be an http(s) URL, got {endpoint_url!r}")


def rl_for_cpu(config: dict) -> dict:
    """A CPU run: no bf16, no DeepSpeed/FSDP, and the live policy server (vLLM needs a GPU)."""
    config = copy.deepcopy(config)
    config.update(bf16=False, distributed={"deepspeed": None, "fsdp": None, "gpus": 0})
    config["policy"] = {**config["policy"], "backend": "live"}
    return config


def resolve_tasks(tasks) -> list:
    """Task revisions from revisions, tasks, revision ids, or task external ids (a task: its current revision).
    Benchmark tasks are refused (the contamination guard of datasets: a task with any revision pinned by a benchmark
    version is never trained on), and so is a task without a revision."""
    revisions = []
    for item in tasks or []:
        if isinstance(item, TaskRevision):
            revision = item
        elif isinstance(item, Task) or (isinstance(item, str) and parse_id(item) is None):
            task = item if isinstance(item, Task) else Task.objects.filter(external_id=item).first()
            if task is None:
                raise TrainingRunError(f"no task {item!r}")
            revision = task.current_revision or task.revisions.order_by("-number").first()
            if revision is None:
                raise TrainingRunError(f"task {task.external_id!r} has no revision")
        else:
            revision = TaskRevision.objects.filter(pk=int(item)).first()
            if revision is None:
                raise TrainingRunError(f"no task revision #{item}")
        revisions.append(revision)
    if not revisions:
        raise TrainingRunError("give the tasks to train on (task ids, or a selection of tasks)")
    pinned = set(
        PinnedRevision.objects.filter(revision__task_id__in=[r.task_id for r in revisions]).values_list(
            "revision__task__external_id", flat=True
        )
    )
    if pinned:
        raise TrainingRunError(
            f"benchmark tasks are never trained on (contamination guard): {', '.join(sorted(pinned))}"
        )
    planted = Task.objects.filter(pk__in=[r.task_id for r in revisions], benchmark_candidates__plant__isnull=False)
    if planted.exists():
        names = sorted(set(planted.values_list("external_id", flat=True)))
        raise TrainingRunError(f"tasks with a planted flaw (review.planting) are never trained on: {', '.join(names)}")
    return list({r.pk: r for r in revisions}.values())


def tasks_from(selection: str) -> list:
    """The current revisions of the tasks a selection names (tasks.selection: status=…, source=…, category=…,
    prefix=…, limit=N, e.g. "status=ready,source=skill,limit=200", or a curriculum's train split
    "prefix=curriculum-s0-train-"); newest first, benchmark tasks left out (the contamination guard)."""
    unpinned = Task.objects.exclude(pk__in=PinnedRevision.objects.values("revision__task_id")).exclude(
        benchmark_candidates__plant__isnull=False  # a planted flaw's copy (review.planting) is wrong on purpose
    )
    try:
        chosen = [t.current_revision for t in select_tasks(selection, unpinned)]
    except SelectionError as exc:
        raise TrainingRunError(str(exc)) from None
    if not chosen:
        raise TrainingRunError(f"the selection {selection!r} names no task (benchmark tasks are left out)")
    return chosen


def rl_step_table(run) -> list[dict]:
    """One row per optimizer step of an RL run: the step's metrics (names in training.rl.groups.METRICS)."""
    rows = {}
    for metric in run.metrics.order_by("step", "id"):
        rows.setdefault(metric.step, {"step": metric.step}).update(metric.values)
    return list(rows.values())


def rl_run_json(run) -> dict:
    """`train --kind rl --json`: {"run", "status", "steps", "rollouts", "checkpoints", "metrics": [per step]}."""
    metrics = [{"step": row["step"], **{k: row.get(k) for k in REPORT_KEYS}} for row in rl_step_table(run)]
    return {
        "run": run.pk,
        "status": run.status,
        "steps": run.steps,
        "rollouts": run.rl_rollouts.count(),
        "checkpoints": checkpoints_of(run),
        "metrics": metrics,
    }


class RL(TrainingKind):
    name = "rl"
    title = "RL run"
    job = "training.rl_run"
    presets = RL_PRESETS
    choices = RL_CHOICES
    page_template = "training_jobs/_rl_run.html"

    def build_config(self, preset, overrides=None, *, base=None):
        return build_rl_config(preset, overrides, base=base)

    def for_cpu(self, config):
        return rl_for_cpu(config)

    def prepare(
        self,
        *,
        base_model,
        base_model_path,
        preset,
        overrides,
        cpu,
        config,
        dataset=None,
        tasks=None,
        mix_tasks=None,
        harness="",
    ):
        """An RL run trains on tasks (revisions, tasks, revision ids or external ids; benchmark tasks refused), each
        rollout running `harness` (the preset's when not given) in its sandbox; not on a dataset. `mix_tasks`: other
        tasks drawn as the share `mix_share` of every step (training.rl.task_mix); one among `tasks` is left out of
        them. The stored config's `tasks` holds every task the run trains on, its `mix_tasks` those of the mix."""
        if dataset is not None:
            raise TrainingRunError("an RL run trains on tasks (its own rollouts), not on a dataset (that is kind sft)")
        revisions = resolve_tasks(tasks)
        own = {r.pk for r in revisions}
        mix = [r for r in resolve_tasks(mix_tasks) if r.pk not in own] if mix_tasks else []
        if mix_tasks and not mix:
            raise TrainingRunError("every mix task is among the run's own tasks: give other tasks to mix in")
        base_model_path = model_path(base_model, base_model_path)
        edits = dict(overrides or {})
        if harness:
            edits["harness"] = harness
        config = build_rl_config(preset, edits, base=config)
        if config["harness"] not in HARNESSES:
            raise TrainingRunError(f"unknown harness {config['harness']!r}; known: {', '.join(HARNESSES)}")
        if cpu:
            config = rl_for_cpu(config)
        config["tasks"] = [r.pk for r in revisions] + [r.pk for r in mix]
        config.pop("mix_tasks", None)
        if mix:
            config["mix_tasks"] = [r.pk for r in mix]
        _check_mix(config)
        mixed = f" (+{len(mix)} mixed in)" if mix else ""
        name = f"rl on {len(revisions)} task(s){mixed} from {model_label(base_model, base_model_path)}"
        fields = {
            "name": name,
            "base_model_path": base_model_path,
            "config": config,
            "total_steps": config["max_steps"],
        }
        return Launch(fields)

    def inputs(self, run):
        mix = run.config.get("mix_tasks") or []
        own = [t for t in run.config["tasks"] if t not in set(mix)]
        return {"tasks": own, "mix_tasks": mix, "harness": run.config["harness"]}

    def report(self, run):
        return rl_run_json(run)

    def page_context(self, run, query):
        return {"rl": rl_pages.rl_context(run, query.get("step"))}
