"""The interface every kind of training run implements (kinds.sft, kinds.rl), and what they share: the error a run
that cannot start raises, and the typed dotted-key edits of a preset.

A kind owns what differs between SFT and RL: its presets and the choices of keys whose preset value may be None, the
rules across keys (validation), what a run trains on (a dataset, or tasks and a harness), the job that runs it, the
`train --json` figures, and the kind's part of the run page. services.runs.start_training_run is the one entry point;
it asks the kind and records the run.
"""

import copy
import json
import math
from dataclasses import dataclass, field


class TrainingRunError(ValueError):
    """A run that cannot be started, resumed or cancelled as asked; the message says why."""


@dataclass
class Launch:
    """What a kind makes of a start request: the TrainingRun's fields of its own (name, config, dataset,
    total_steps…) and the warnings of what trains on less than asked (written in the run's log)."""

    fields: dict
    warnings: list[str] = field(default_factory=list)


class TrainingKind:
    """A kind of training run. Subclasses set the class attributes and implement the methods that raise here."""

    name: str  # TrainingRun.kind
    title: str  # "SFT run", as the pages and messages say it
    job: str  # the gpu job that runs one attempt (training_jobs.run_jobs)
    presets: dict[str, dict]  # the whole config a run stores, before edits
    choices: dict[str, tuple]  # keys whose value is one of a few (None among them)
    page_template: str  # the kind's part of the run page (training_jobs/runs_detail.html includes it)

    def build_config(self, preset: str, overrides: dict | None = None, *, base: dict | None = None) -> dict:
        """The preset (or `base`, a stored config) with typed dotted-key edits, then the rules across keys."""
        raise NotImplementedError

    def for_cpu(self, config: dict) -> dict:
        """The config a CPU run gets (what a CPU cannot do turned off)."""
        raise NotImplementedError

    def prepare(
        self,
        *,
        base_model,
        base_model_path: str,
        preset: str,
        overrides: dict | None,
        cpu: bool,
        config: dict | None,
        dataset=None,
        tasks=None,
        mix_tasks=None,
        harness: str = "",
    ) -> Launch:
        """Check what the run is given (refusing with TrainingRunError) and build its config: the run's fields."""
        raise NotImplementedError

    def inputs(self, run) -> dict:
        """What a stored run was given to train on, as prepare() takes it (a clone starts from them)."""
        raise NotImplementedError

    def check_edit(self, run, config: dict) -> None:
        """Refuse a stored run's edited config that cannot train (resume with edits)."""

    def report(self, run) -> dict:
        """The `train --json` figures of a run of this kind."""
        raise NotImplementedError

    def page_context(self, run, query) -> dict:
        """The kind's part of the run page's context (`query`: the request's GET)."""
        raise NotImplementedError


def parse_overrides(pairs: list[str]) -> dict:
    """["lora.enabled=true", "learning_rate=2e-5"] → {"lora.enabled": True, "learning_rate": 2e-5} (JSON values;
    anything that is not JSON is a string). NaN, Infinity and numbers too large for a float (1e999) are refused:
    Python's JSON reads them as numbers that no run can train with and no JSON column can store."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise TrainingRunError(f"--set takes KEY=VALUE, got {pair!r}")
        try:
            overrides[key.strip()] = json.loads(value)
        except ValueError:
            overrides[key.strip()] = value
        if not all_finite(overrides[key.strip()]):
            raise TrainingRunError(f"{key.strip()} takes a finite number, got {value.strip()!r}")
    return overrides


def all_finite(value) -> bool:
    """Whether every number in a JSON value is finite (no NaN, no infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(all_finite(item) for item in value)
    if isinstance(value, dict):
        return all(all_finite(item) for item in value.values())
    return True


def edited(base: dict, overrides: dict | None, choices: dict) -> dict:
    """A copy of `base` with the dotted-key edits applied, each checked against its keys and types."""
    config = copy.deepcopy(base)
    for key, value in (overrides or {}).items():
        set_key(config, key, value, choices)
    return config


def set_key(config: dict, key: str, value, choices: dict) -> None:
    if not all_finite(value):  # the API's JSON reads 1e999 as infinity
        raise TrainingRunError(f"{key} takes a finite number, got {value!r}")
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise TrainingRunError(f"unknown config key {key!r}; known: {', '.join(known_keys(config))}")
        node = node[part]
    if leaf not in node or isinstance(node[leaf], dict):
        raise TrainingRunError(f"unknown config key {key!r}; known: {', '.join(known_keys(config))}")
    current = node[leaf]
    if key in choices:
        if value in ("null", "none", ""):
            value = None
        if value not in choices[key]:
            raise TrainingRunError(f"{key} takes one of {', '.join(map(str, choices[key]))}, got {value!r}")
    elif isinstance(current, bool):
        if not isinstance(value, bool):
            raise TrainingRunError(f"{key} takes true or false, got {value!r}")
    elif isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrainingRunError(f"{key} takes a number, got {value!r}")
        value = float(value)
    elif isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TrainingRunError(f"{key} takes an integer, got {value!r}")
    elif isinstance(current, str):
        if isinstance(value, list) and key == "lora.target_modules":
            value = [str(v) for v in value]
        elif not isinstance(value, str):
            raise TrainingRunError(f"{key} takes a string, got {value!r}")
    node[leaf] = value


def known_keys(config: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        if key == "gradient_accumulation_steps":
            continue
        keys += known_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


def model_path(base_model, base_model_path: str) -> str:
    """The folder the run trains from: the path given, else the registered base model's; refused when neither."""
    if base_model is not None:
        base_model_path = base_model_path or base_model.path
    if not base_model_path:
        raise TrainingRunError("give a base model (a registered one or a local path)")
    return base_model_path


def model_label(base_model, base_model_path: str) -> str:
    """What a run's default name calls its model: the registered name, or the folder's last part (everyone sees a
    run's name; only admins see server paths)."""
    return base_model.name if base_model else (base_model_path.rstrip("/").rsplit("/", 1)[-1] or base_model_path)


def checkpoints_of(run) -> list[dict]:
    return [{"id": c.pk, "step": c.step, "path": c.path} for c in run.checkpoints.order_by("step")]
