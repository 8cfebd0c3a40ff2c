"""The build form of the dataset pages (and the dashboard panel): what it validates and hands to
training_jobs.datasets.start_build; no logic of its own."""

from django import forms
from django.db.models import Count, Max, Min
from django.utils import timezone

from evaluation.models import EvalRun, Rollout

from .datasets import DEFAULT_FILTERS
from .models import BaseModel, RLRollout

CHOICES_SHOWN = 200  # the latest runs and groups offered; the API and the command take any


def rollout_groups(groups=None) -> list[tuple[str, str]]:
    """(group, what made it) for the rollout groups with trajectories, the latest first: without `groups`, those
    outside evaluation runs (a run is chosen as a run), else those named. Two queries."""
    rollouts = Rollout.objects.exclude(group="").filter(trajectories__isnull=False)
    rollouts = rollouts.filter(eval_run__isnull=True) if groups is None else rollouts.filter(group__in=groups)
    rows = list(
        rollouts.values("group").annotate(
            latest=Max("created_at"), task=Min("revision__task__external_id"),
            tasks=Count("revision__task", distinct=True), model=Min("endpoint__name"),
            models=Count("endpoint", distinct=True), harness=Min("harness"), rollouts=Count("id", distinct=True),
        ).order_by("-latest")[:CHOICES_SHOWN]
    )  # fmt: skip
    rl_runs = dict(RLRollout.objects.filter(rollout__group__in=[row["group"] for row in rows])
                   .values_list("rollout__group", "run_id"))  # fmt: skip
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
    groups = forms.MultipleChoiceField(choices=(), required=False, label="Rollout groups",
                                       help_text="Rollouts started together outside evaluation runs (from a task's "
                                                 "page, manage.py rollout, an RL run): task · model · harness · "
                                                 "rollouts · latest.")  # fmt: skip
    min_reward = forms.FloatField(required=False, min_value=0, max_value=1, initial=DEFAULT_FILTERS["min_reward"],
                                  label="Reward at least", help_text="Blank: 0.5.")  # fmt: skip
    base_model = forms.ModelChoiceField(
        queryset=BaseModel.objects.all(), required=False, label="Count tokens with",
        help_text="The base model that will train on it: its tokenizer counts each sample as training sees it. "
                  "Blank: the models' reported usage, an estimate.",
    )  # fmt: skip
    base_model_path = forms.CharField(required=False, max_length=1000, label="Or a model folder",
                                      help_text="A local folder with the tokenizer (instead of a base model).")  # fmt: skip
    max_tokens = forms.IntegerField(required=False, min_value=1, label="Tokens at most",
                                    help_text="Longer trajectories are left out (counted as above). Blank: no "
                                              "limit.")  # fmt: skip
    validation_share = forms.FloatField(required=False, min_value=0, max_value=0.5, initial=DEFAULT_FILTERS["validation_share"],
                                        label="Validation share", help_text="Of the tasks (split by task).")  # fmt: skip
    seed = forms.IntegerField(required=False, min_value=0, initial=DEFAULT_FILTERS["seed"], help_text="Seeds the split.")
    name = forms.CharField(required=False, max_length=200)
    allow_benchmark_tasks = forms.BooleanField(
        required=False, label="Include benchmark tasks (override the contamination guard)",
        help_text="Tasks pinned by a benchmark version are left out unless you say why here.",
    )  # fmt: skip
    override_reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                      label="Why (written on the dataset)")  # fmt: skip
    allow_unverified_history = forms.BooleanField(
        required=False, label="Include unverified history (override the history guard)",
        help_text="Trajectories with an assistant turn no recorded model call answered (history the agent sent of "
                  "its own) are left out unless you say why here.",
    )  # fmt: skip
    unverified_history_reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                                label="Why (written on the dataset)")  # fmt: skip

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
            self.add_error("unverified_history_reason",
                           "Say why unverified history is included: it is written on the dataset.")  # fmt: skip
        return data

    def build_settings(self) -> dict:
        data = self.cleaned_data
        return {
            "selection": {"eval_runs": [run.pk for run in data["eval_runs"]], "groups": data["groups"]},
            # Fields left blank (or not on the dashboard's short form) keep the defaults.
            "filters": {"min_reward": data["min_reward"], "max_tokens": data["max_tokens"],
                        "validation_share": data["validation_share"], "seed": data["seed"]},
            "name": data["name"],
            "base_model": data.get("base_model"),
            "tokenizer_path": data.get("base_model_path") or "",
            "allow_benchmark_tasks": data["allow_benchmark_tasks"],
            "override_reason": data["override_reason"] if data["allow_benchmark_tasks"] else "",
            "allow_unverified_history": data["allow_unverified_history"],
            "unverified_history_reason": data["unverified_history_reason"] if data["allow_unverified_history"] else "",
        }  # fmt: skip
