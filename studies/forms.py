"""The one form a study is started from: its kind and the parameters every kind reads (a kind ignores the others
and says which of its own are missing)."""

from django import forms

from benchmarks.models import BenchmarkVersion
from llm.models import ModelEndpoint

from .kinds import KIND_CHOICES


class StudyForm(forms.Form):
    kind = forms.ChoiceField(choices=KIND_CHOICES)
    name = forms.CharField(max_length=200, required=False)
    benchmark_version = forms.ModelChoiceField(queryset=BenchmarkVersion.objects.select_related("benchmark"))
    harness = forms.CharField(max_length=40, required=False, help_text="blank: the default harness")
    endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.order_by("name"), required=False, help_text="stability: the model evaluated"
    )
    runs = forms.IntegerField(
        min_value=2, max_value=20, initial=5, required=False, help_text="stability: how many runs"
    )
    subset = forms.IntegerField(min_value=0, initial=50, required=False, help_text="stability: tasks (0: all)")
    seed = forms.IntegerField(min_value=0, initial=0, required=False, help_text="stability: the subset's seed")
    training_run = forms.IntegerField(min_value=1, required=False, help_text="training_exposure: the run's id")
    values = forms.CharField(required=False, help_text="reward_threshold: minimum rewards, e.g. 0.5,0.75,1.0")
    eval_runs = forms.CharField(
        required=False, help_text="reward_threshold, synthesis_routes: evaluation run ids whose rollouts make the data"
    )
    routes = forms.CharField(required=False, help_text="synthesis_routes: persona,skill,both")
    batches = forms.CharField(required=False, help_text="synthesis_routes: synthesis batch ids (instead of runs)")
    base_model = forms.CharField(required=False, help_text="reward_threshold, synthesis_routes: the base model's name")

    def params(self) -> dict:
        """What the kind is given (studies.services.start_study checks it)."""
        data = self.cleaned_data
        params = {"benchmark_version": data["benchmark_version"].pk, "harness": data["harness"] or None}
        if data["endpoint"] is not None:
            params["endpoint"] = data["endpoint"].pk
        for key in ("runs", "subset", "seed", "training_run"):
            if data[key] is not None:
                params[key] = data[key]
        for key in ("values", "routes", "batches", "base_model"):
            if data[key]:
                params[key] = data[key]
        if data["eval_runs"]:
            params["eval_runs"] = [part.strip() for part in data["eval_runs"].split(",") if part.strip()]
        return params
