"""The forms of the training pages (and the dashboard panels); what they validate they hand to a service, with no
logic of their own:

    BuildDatasetForm               services.datasets.start_build
    StartRunForm, StartRLRunForm   services.runs.start_training_run, kind "sft" and "rl" (presets and edits checked
                                   by the kind, training_jobs.kinds)
    CloneRunForm                   services.runs.clone_training_run
    AddByPathForm                  base_models.add_by_path
"""

from django import forms
from django.db.models import Count, Max, Min
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from evaluation.harnesses import HARNESS_CHOICES
from evaluation.models import EvalRun, Rollout
from training import converters

from .kinds import KINDS, TrainingRunError, get_kind, parse_overrides
from .kinds.rl import resolve_tasks, tasks_from
from .models import REPORT_TO_CHOICES, BaseModel, RLRollout, TrainingDataset, TrainingRun
from .services.datasets import DEFAULT_FILTERS

CHOICES_SHOWN = 200  # the latest runs and groups offered; the API and the command take any


def rollout_groups(groups=None) -> list[tuple[str, str]]:
    """(group, what made it) for the rollout groups with trajectories, the latest first: without `groups`, those
    outside evaluation runs (a run is chosen as a run), else those named. Two queries."""
    rollouts = Rollout.objects.exclude(group="").filter(trajectories__isnull=False)
    rollouts = rollouts.filter(eval_run__isnull=True) if groups is None else rollouts.filter(group__in=groups)
    rows = list(
        rollouts.values("group")
        .annotate(
            latest=Max("created_at"),
            task=Min("revision__task__external_id"),
            tasks=Count("revision__task", distinct=True),
            model=Min("endpoint__name"),
            models=Count("endpoint", distinct=True),
            harness=Min("harness"),
            rollouts=Count("id", distinct=True),
        )
        .order_by("-latest")[:CHOICES_SHOWN]
    )
    rl_runs = dict(
        RLRollout.objects.filter(rollout__group__in=[row["group"] for row in rows]).values_list(
            "rollout__group", "run_id"
        )
    )
    return [(row["group"], _group_label(row, rl_runs.get(row["group"]))) for row in rows]


def _group_label(row: dict, rl_run: int | None) -> str:
    """What made a group: "sales-report · gpt-4o · builtin · 4 rollouts · 2026-12-02 14:05" ("RL run #3 · …")."""
    task = row["task"] + (f" +{row['tasks'] - 1} tasks" if row["tasks"] > 1 else "")
    model = row["model"] + (f" +{row['models'] - 1} models" if row["models"] > 1 else "")
    when = timezone.localtime(row["latest"]).strftime("%Y-%m-%d %H:%M")
    made = [f"RL run #{rl_run}"] if rl_run else []
    rollouts = f"{row['rollouts']} rollout{'s' if row['rollouts'] != 1 else ''}"
    return " · ".join([*made, task, model, row["harness"], rollouts, when])


class BuildDatasetForm(forms.Form):
    eval_runs = forms.ModelMultipleChoiceField(queryset=None, required=False, label="Evaluation runs")
    groups = forms.MultipleChoiceField(
        choices=(),
        required=False,
        label="Rollout groups",
        help_text="Rollouts started together outside evaluation runs (from a task's "
        "page, manage.py rollout, an RL run): task · model · harness · "
        "rollouts · latest.",
    )
    min_reward = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        initial=DEFAULT_FILTERS["min_reward"],
        label="Reward at least",
        help_text="Blank: 0.5.",
    )
    base_model = forms.ModelChoiceField(
        queryset=BaseModel.objects.all(),
        required=False,
        label="Count tokens with",
        help_text="The base model that will train on it: its tokenizer counts each sample as training sees it. "
        "Blank: the models' reported usage, an estimate.",
    )
    base_model_path = forms.CharField(
        required=False,
        max_length=1000,
        label="Or a model folder",
        help_text="A local folder with the tokenizer (instead of a base model).",
    )
    max_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        label="Tokens at most",
        help_text="Longer trajectories are left out (counted as above). Blank: no limit.",
    )
    validation_share = forms.FloatField(
        required=False,
        min_value=0,
        max_value=0.5,
        initial=DEFAULT_FILTERS["validation_share"],
        label="Validation share",
        help_text="Of the tasks (split by task).",
    )
    seed = forms.IntegerField(
        required=False, min_value=0, initial=DEFAULT_FILTERS["seed"], help_text="Seeds the split."
    )
    name = forms.CharField(required=False, max_length=200)
    allow_benchmark_tasks = forms.BooleanField(
        required=False,
        label="Include benchmark tasks (override the contamination guard)",
        help_text="Tasks pinned by a benchmark version are left out unless you say why here.",
    )
    override_reason = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Why (written on the dataset)"
    )
    allow_unverified_history = forms.BooleanField(
        required=False,
        label="Include unverified history (override the history guard)",
        help_text="Trajectories with an assistant turn no recorded model call answered (history the agent sent of "
        "its own) are left out unless you say why here.",
    )
    unverified_history_reason = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Why (written on the dataset)"
    )

    DASHBOARD_FIELDS = ("eval_runs", "groups", "min_reward", "base_model", "max_tokens", "name")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["eval_runs"].queryset = EvalRun.objects.select_related("endpoint").order_by("-created_at")
        self.fields["groups"].choices = rollout_groups()

    @property
    def dashboard_fields(self):
        return [self[name] for name in self.DASHBOARD_FIELDS]

    def clean(self):
        data = super().clean()
        if not data.get("eval_runs") and not data.get("groups"):
            raise forms.ValidationError("Choose at least one evaluation run or rollout group.")
        if data.get("allow_benchmark_tasks") and not (data.get("override_reason") or "").strip():
            self.add_error("override_reason", "Say why benchmark tasks are included: it is written on the dataset.")
        if data.get("allow_unverified_history") and not (data.get("unverified_history_reason") or "").strip():
            self.add_error(
                "unverified_history_reason", "Say why unverified history is included: it is written on the dataset."
            )
        return data

    def build_settings(self) -> dict:
        data = self.cleaned_data
        return {
            "selection": {"eval_runs": [run.pk for run in data["eval_runs"]], "groups": data["groups"]},
            # Fields left blank (or not on the dashboard's short form) keep the defaults.
            "filters": {
                "min_reward": data["min_reward"],
                "max_tokens": data["max_tokens"],
                "validation_share": data["validation_share"],
                "seed": data["seed"],
            },
            "name": data["name"],
            "base_model": data.get("base_model"),
            "tokenizer_path": data.get("base_model_path") or "",
            "allow_benchmark_tasks": data["allow_benchmark_tasks"],
            "override_reason": data["override_reason"] if data["allow_benchmark_tasks"] else "",
            "allow_unverified_history": data["allow_unverified_history"],
            "unverified_history_reason": data["unverified_history_reason"] if data["allow_unverified_history"] else "",
        }


# --- runs


def no_base_model_help():
    """The training forms' help when nothing is registered: where to add one."""
    if BaseModel.objects.exists():
        return "A registered base model, or a path below."
    return format_html(
        'No base model is registered yet: <a href="{}">add one on the Base models page</a> (a '
        "shipped model such as {} is one click), or give a folder's path below.",
        reverse("training:base-models"),
        next(iter(converters.CONVERTERS)),
    )


class StartRunForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=TrainingDataset.objects.filter(status=TrainingDataset.Status.READY))
    base_model = forms.ModelChoiceField(
        queryset=BaseModel.objects.all(), required=False, help_text="A registered base model, or a path below."
    )
    base_model_path = forms.CharField(
        required=False,
        max_length=1000,
        label="Base model path",
        help_text="A local folder (weights, config, tokenizer).",
    )
    preset = forms.ChoiceField(choices=[(name, name) for name in KINDS["sft"].presets], initial="paper")
    overrides = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Config edits",
        help_text="One key=value a line, e.g. lora.enabled=true, learning_rate=2e-5.",
    )
    cpu = forms.BooleanField(required=False, label="Train on CPU (tiny models)")
    report_to = forms.TypedChoiceField(
        choices=REPORT_TO_CHOICES,
        required=False,
        empty_value="none",  # a form posted without it (a script, an older page) reports to ClawGym only
        initial="none",
        label="Report to",
        help_text="TensorBoard too: event files under the run's folder, opened with the command on the run's page.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["base_model"].help_text = no_base_model_help()  # an empty choice says why, and where to add one

    def clean(self):
        data = super().clean()
        if not data.get("base_model") and not data.get("base_model_path"):
            raise forms.ValidationError("Choose a base model or give its path.")
        try:
            data["edits"] = parse_overrides(
                [line for line in (data.get("overrides") or "").splitlines() if line.strip()]
            )
            get_kind("sft").build_config(data.get("preset") or "paper", data["edits"])
        except TrainingRunError as exc:
            self.add_error("overrides", str(exc))
        return data


class StartRLRunForm(forms.Form):
    """What start_training_run(kind="rl") takes: a base model, the training tasks (ids or a selection), optional mix
    tasks (ids or a selection; their share the edits' mix_share), the harness each rollout runs, a preset and edits."""

    base_model = forms.ModelChoiceField(
        queryset=BaseModel.objects.all(), required=False, help_text="A registered base model, or a path below."
    )
    base_model_path = forms.CharField(
        required=False,
        max_length=1000,
        label="Base model path",
        help_text="A local folder (weights, config, tokenizer).",
    )
    tasks = forms.CharField(
        required=False,
        label="Task ids",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Space or comma separated; their current revisions are trained on.",
    )
    tasks_from = forms.CharField(
        required=False,
        max_length=500,
        label="Or a task selection",
        help_text="Filters, e.g. status=ready,source=skill,limit=200 (benchmark tasks are left out).",
    )
    # A task mix (training.rl.task_mix), given as the run's own tasks are; its share is a config edit, mix_share=S.
    mix_tasks = forms.CharField(
        required=False,
        label="Mix task ids",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional: other tasks mixed into every step, with mix_share=S (e.g. 0.25) among the config edits.",
    )
    mix_tasks_from = forms.CharField(
        required=False,
        max_length=500,
        label="Or a mix selection",
        help_text="Filters, as for the tasks; the run's own tasks are left out of the mix.",
    )
    harness = forms.ChoiceField(choices=HARNESS_CHOICES, initial="builtin", help_text="The agent in each sandbox.")
    preset = forms.ChoiceField(choices=[(name, name) for name in KINDS["rl"].presets], initial="paper")
    overrides = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Config edits",
        help_text="One key=value a line, e.g. num_generations=4, max_steps=50.",
    )
    cpu = forms.BooleanField(required=False, label="Train on CPU (tiny models; the live policy server)")
    report_to = forms.TypedChoiceField(
        choices=REPORT_TO_CHOICES,
        required=False,
        empty_value="none",  # a form posted without it (a script, an older page) reports to ClawGym only
        initial="none",
        label="Report to",
        help_text="TensorBoard too: event files under the run's folder, opened with the command on the run's page.",
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "id_rl_%s")  # the dashboard shows it beside the SFT form: ids of its own
        super().__init__(*args, **kwargs)
        self.fields["base_model"].help_text = no_base_model_help()

    def clean(self):
        data = super().clean()
        if not data.get("base_model") and not data.get("base_model_path"):
            raise forms.ValidationError("Choose a base model or give its path.")
        data["revisions"] = self._tasks(data, "tasks", "tasks_from", "Give task ids or a selection, not both.")
        if data["revisions"] == []:
            self.add_error("tasks", "Give the tasks to train on (their ids, or a selection).")
        # Whether the mix can be drawn (its share, the steps) is the service's check, refused as the form's error.
        data["mix_revisions"] = self._tasks(
            data, "mix_tasks", "mix_tasks_from", "Give mix task ids or a mix selection, not both."
        )
        try:
            data["edits"] = parse_overrides(
                [line for line in (data.get("overrides") or "").splitlines() if line.strip()]
            )
            get_kind("rl").build_config(data.get("preset") or "paper", data["edits"])
        except TrainingRunError as exc:
            self.add_error("overrides", str(exc))
        return data

    def _tasks(self, data, ids_field: str, selection_field: str, both: str) -> list | None:
        """The revisions that an ids field or a selection field names ([] when neither is given), or None after
        adding the error (both given, an unknown id, a benchmark task, a selection that names none)."""
        ids = [part for part in (data.get(ids_field) or "").replace(",", " ").split() if part]
        selection = data.get(selection_field)
        if ids and selection:
            self.add_error(selection_field, both)
            return None
        if not ids and not selection:
            return []
        try:
            return resolve_tasks(ids) if ids else tasks_from(selection)
        except TrainingRunError as exc:
            self.add_error(ids_field if ids else selection_field, str(exc))
            return None


def config_value(config: dict, key: str):
    """The value of a dotted key of a config."""
    for part in key.split("."):
        config = config[part]
    return config


class CloneRunForm(forms.Form):
    overrides = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false", "class": "mono"}),
        required=False,
        label="Config (one key=value a line)",
        help_text="This run's config: change the values to edit. A line left out keeps its value; a key that is not "
        "in the config is refused.",
    )

    def __init__(self, run: TrainingRun, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.run = run

    def clean_overrides(self) -> dict:
        """The lines whose value differs from the run's: the clone's edits, checked against its config."""
        try:
            asked = parse_overrides([line for line in self.cleaned_data["overrides"].splitlines() if line.strip()])
        except TrainingRunError as exc:
            raise forms.ValidationError(str(exc)) from None
        edits = {}
        for key, value in asked.items():
            try:
                if config_value(self.run.config, key) == value:
                    continue
            except (KeyError, TypeError):
                pass  # not a key of the config: the run's own check names the keys it knows
            edits[key] = value
        try:
            get_kind(self.run.kind).build_config(self.run.preset, edits, base=self.run.config)
        except TrainingRunError as exc:
            raise forms.ValidationError(str(exc)) from None
        return edits


# --- base models


class AddByPathForm(forms.Form):
    name = forms.SlugField(max_length=120, help_text="Letters, digits, - and _; what the training forms list.")
    path = forms.CharField(
        max_length=1000,
        label="Folder",
        help_text="An absolute path to a model folder (weights, config.json, tokenizer) on the gpu workers and here.",
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
