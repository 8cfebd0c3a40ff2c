from django import forms

from llm.models import ModelEndpoint
from tasks.models import Task

from .harnesses import HARNESS_CHOICES
from .models import Rollout
from .services import MAX_REPEATS


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


class StartRolloutsForm(forms.Form):
    task = forms.CharField(help_text="The task's id; its current revision runs.")
    endpoint = forms.ModelChoiceField(queryset=ModelEndpoint.objects.filter(enabled=True), to_field_name="name")
    harness = forms.ChoiceField(choices=HARNESS_CHOICES)
    repeats = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=1)

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
