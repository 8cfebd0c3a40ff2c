from django import forms

from benchmarks.models import BenchmarkVersion
from llm.models import ModelEndpoint
from tasks.models import Task

from .harnesses import HARNESS_CHOICES
from .models import Outcome, Rollout
from .samples import SORT_LABELS, filter_samples, sorted_samples
from .scanners import SCANNERS
from .services.rollouts import MAX_REPEATS


class RolloutFilterForm(forms.Form):
    task = forms.CharField(required=False)
    endpoint = forms.CharField(required=False)
    harness = forms.ChoiceField(required=False, choices=[("", "Any"), *HARNESS_CHOICES])
    status = forms.ChoiceField(required=False, choices=[("", "Any"), *Rollout.Status.choices])
    group = forms.CharField(required=False)

    def filter(self, rollouts):
        if not self.is_valid():
            return rollouts
        data = self.cleaned_data
        if data["task"]:
            rollouts = rollouts.filter(revision__task__external_id=data["task"])
        if data["endpoint"]:
            rollouts = rollouts.filter(endpoint__name=data["endpoint"])
        for name in ("harness", "status", "group"):
            if data[name]:
                rollouts = rollouts.filter(**{name: data[name]})
        return rollouts


class SampleFilterForm(forms.Form):
    """The samples page's filters and sort. Invalid values are dropped one by one rather than failing the page; the
    filtering itself is evaluation.samples.filter_samples, as on the API's /api/eval-runs/{id}/rollouts/."""

    q = forms.CharField(required=False, max_length=200, label="Search")
    task = forms.CharField(required=False, max_length=200)
    outcome = forms.ChoiceField(required=False, choices=[("", "Any outcome"), *Outcome.choices])
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Rollout.Status.choices])
    min_score = forms.FloatField(required=False, min_value=0.0, max_value=1.0, label="Score at least")
    max_score = forms.FloatField(required=False, min_value=0.0, max_value=1.0, label="Score at most")
    finding = forms.ChoiceField(
        required=False, choices=[("", "Any finding"), *((name, cls.title) for name, cls in SCANNERS.items())]
    )
    sort = forms.ChoiceField(required=False, choices=SORT_LABELS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.is_valid()  # cleaned_data then holds the valid fields only

    @property
    def sort_name(self) -> str:
        return self.cleaned_data.get("sort") or "task"

    def samples(self, rollouts):
        return sorted_samples(filter_samples(rollouts, self.cleaned_data), self.sort_name)


class StartRolloutsForm(forms.Form):
    task = forms.CharField(help_text="The task's id; its current revision runs.")
    endpoint = forms.ModelChoiceField(queryset=None, to_field_name="name", label="Model (agent endpoint)")
    harness = forms.ChoiceField(choices=HARNESS_CHOICES)
    repeats = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = _agent_endpoints()

    def clean_task(self):
        external_id = self.cleaned_data["task"].strip()
        task = Task.objects.select_related("current_revision").filter(external_id=external_id).first()
        if task is None:
            raise forms.ValidationError(f"No task has the id {external_id!r}.")
        if task.current_revision is None:
            raise forms.ValidationError(f"Task {external_id!r} has no revision to run.")
        return task


class TrajectoryFilterForm(forms.Form):
    endpoint = forms.CharField(required=False)
    harness = forms.ChoiceField(required=False, choices=[("", "Any"), *HARNESS_CHOICES])
    min_reward = forms.FloatField(required=False, min_value=0, max_value=1, label="Reward at least")
    include_excluded = forms.BooleanField(required=False, label="Measure excluded ones too")

    def filter(self, trajectories):
        if not self.is_valid():
            return trajectories
        data = self.cleaned_data
        if data["endpoint"]:
            trajectories = trajectories.filter(rollout__endpoint__name=data["endpoint"])
        if data["harness"]:
            trajectories = trajectories.filter(rollout__harness=data["harness"])
        if data["min_reward"] is not None:
            trajectories = trajectories.filter(reward__gte=data["min_reward"])
        return trajectories


# --- evaluation runs ---------------------------------------------------------------------------------------------


def _agent_endpoints():
    return ModelEndpoint.serving(ModelEndpoint.Role.AGENT)


class StartEvalRunForm(forms.Form):
    """What evaluation.services.runs.start_eval_run takes: a benchmark version or task ids, a model, a harness, repeats,
    options, limits, a pass threshold and a name. `run_settings()` gives its keyword arguments."""

    benchmark_version = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="— task ids instead —", label="Benchmark version"
    )
    tasks = forms.CharField(
        required=False,
        label="Task ids",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 40}),
        help_text="Instead of a version: task ids (space or comma separated); their current revisions run.",
    )
    endpoint = forms.ModelChoiceField(queryset=None, to_field_name="name", label="Model (agent endpoint)")
    harness = forms.ChoiceField(choices=HARNESS_CHOICES)
    repeats = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=1)
    options = forms.JSONField(
        required=False,
        label="Harness options (JSON)",
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 40}),
    )
    timeout = forms.IntegerField(required=False, min_value=1, label="Time limit (s)")
    max_turns = forms.IntegerField(
        required=False,
        min_value=1,
        label="Turn limit",
        help_text="The builtin harness only: OpenClaw has no turn limit.",
    )
    token_limit = forms.IntegerField(required=False, min_value=1, label="Token limit")
    pass_threshold = forms.FloatField(min_value=0.0, max_value=1.0, initial=1.0, label="Pass threshold")
    name = forms.CharField(required=False, max_length=200, help_text="Default: the model and what it runs on.")

    def __init__(self, *args, **kwargs):

        super().__init__(*args, **kwargs)
        self.fields["benchmark_version"].queryset = BenchmarkVersion.objects.select_related("benchmark").order_by(
            "benchmark__name", "-number"
        )
        self.fields["endpoint"].queryset = _agent_endpoints()

    def clean_tasks(self):
        ids = [part for part in self.cleaned_data["tasks"].replace(",", " ").split() if part]
        if not ids:
            return []
        tasks = {t.external_id: t for t in Task.objects.select_related("current_revision").filter(external_id__in=ids)}
        unknown = [i for i in ids if i not in tasks]
        if unknown:
            raise forms.ValidationError(f"No task has the id {', '.join(unknown)}.")
        unrevised = [i for i in ids if tasks[i].current_revision is None]
        if unrevised:
            raise forms.ValidationError(f"No revision to run: {', '.join(unrevised)}.")
        return [tasks[i].current_revision for i in dict.fromkeys(ids)]

    def clean_options(self):
        options = self.cleaned_data["options"]
        if options in (None, ""):
            return {}
        if not isinstance(options, dict):
            raise forms.ValidationError("Harness options must be a JSON object.")
        return options

    def clean_pass_threshold(self):
        threshold = self.cleaned_data["pass_threshold"]
        if threshold <= 0:
            raise forms.ValidationError("The pass threshold must be above 0.")
        return threshold

    def clean(self):
        data = super().clean()
        version, revisions = data.get("benchmark_version"), data.get("tasks")
        if "tasks" in data and "benchmark_version" in data and bool(version) == bool(revisions):
            raise forms.ValidationError("Choose a benchmark version or give task ids (one of the two).")
        return data

    def run_settings(self) -> dict:
        data = self.cleaned_data
        settings_ = {
            "endpoint": data["endpoint"],
            "harness": data["harness"],
            "repeats": data["repeats"],
            "options": data["options"],
            "limits": {key: data[key] for key in ("timeout", "max_turns", "token_limit") if data[key] is not None},
            "pass_threshold": data["pass_threshold"],
            "name": data["name"].strip(),
        }
        if data["benchmark_version"]:
            settings_["benchmark_version"] = data["benchmark_version"]
        else:
            settings_["revisions"] = data["tasks"]
        return settings_


class PassThresholdForm(forms.Form):
    pass_threshold = forms.FloatField(min_value=0.0, max_value=1.0, label="Pass threshold")

    def clean_pass_threshold(self):
        threshold = self.cleaned_data["pass_threshold"]
        if threshold <= 0:
            raise forms.ValidationError("The pass threshold must be above 0.")
        return threshold
