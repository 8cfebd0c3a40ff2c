"""Forms of the reviewers' pages."""

from django import forms
from django.conf import settings

from evaluation.harnesses import HARNESS_CHOICES
from evaluation.services.rollouts import MAX_REPEATS
from lib.bounds import parse_id
from llm.models import ModelEndpoint

from .models import ReviewDecision

Decision = ReviewDecision.Decision


class DecisionForm(forms.Form):
    """Accept, fix or reject: what the queue's and the candidate page's decision dialogs post."""

    decision = forms.ChoiceField(choices=[(d.value, d.label) for d in (Decision.ACCEPT, Decision.FIX, Decision.REJECT)])
    reason = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 3}))
    override_reason = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Admins only: why to accept although the sanity check failed or has not run.",
    )

    def clean(self):
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Rejecting needs a reason.")
        return data


class CandidateIdsField(forms.Field):
    """The candidates ticked in the queue: every `ids` value of the form, as ids, each once."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {"required": "Select at least one candidate.", "invalid": "Not a candidate id: %(value)s."}

    def to_python(self, value):
        ids = []
        for item in value or []:
            pk = parse_id(item)
            if pk is None:
                shown = str(item) if len(str(item)) <= 40 else f"{str(item)[:40]}…"
                raise forms.ValidationError(self.error_messages["invalid"], code="invalid", params={"value": shown})
            ids.append(pk)
        return list(dict.fromkeys(ids))


class BulkDecisionForm(forms.Form):
    """Accept or reject the ticked candidates of the queue at once (review.bulk.decide_many)."""

    ids = CandidateIdsField()
    decision = forms.ChoiceField(choices=[(Decision.ACCEPT, "Accept"), (Decision.REJECT, "Reject")])
    reason = forms.CharField(required=False, max_length=10_000)

    def clean(self):
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Rejecting needs a reason.")
        return data


# --- difficulty filtering --------------------------------------------------------------------------------------


def agent_endpoints():
    """The enabled endpoints that serve the agent role, by name."""
    return ModelEndpoint.serving(ModelEndpoint.Role.AGENT)


class DifficultyFilterForm(forms.Form):
    """Start a difficulty filter: a strong and a small agent, n rollouts each per candidate, a harness."""

    strong = forms.ModelChoiceField(
        queryset=None,
        to_field_name="name",
        label="Strong agent",
        help_text="Should solve a kept candidate (mean at least the strong minimum).",
    )
    small = forms.ModelChoiceField(
        queryset=None,
        to_field_name="name",
        label="Small agent",
        help_text="Should mostly fail a kept candidate (mean at most the small maximum).",
    )
    n = forms.IntegerField(min_value=1, max_value=MAX_REPEATS, initial=4, label="Rollouts each (n)")
    harness = forms.ChoiceField(choices=HARNESS_CHOICES, required=False)

    def __init__(self, *args, last=None, **kwargs):
        """`last`: the previous DifficultyFilter, whose endpoints, n and harness are the defaults."""
        initial = {"n": 4, "harness": settings.CLAWGYM_DEFAULT_HARNESS}
        if last is not None:
            initial |= {
                "strong": last.strong_endpoint.name,
                "small": last.small_endpoint.name,
                "n": last.n,
                "harness": last.harness or initial["harness"],
            }
        kwargs["initial"] = initial | kwargs.get("initial", {})
        super().__init__(*args, **kwargs)
        self.fields["strong"].queryset = self.fields["small"].queryset = agent_endpoints()

    def clean(self):
        data = super().clean()
        if data.get("strong") and data.get("strong") == data.get("small"):
            self.add_error("small", "Choose another endpoint than the strong agent's.")
        return data

    def filter_settings(self) -> dict:
        data = self.cleaned_data
        return {"strong": data["strong"], "small": data["small"], "n": data["n"], "harness": data["harness"] or None}


class DifficultyThresholdsForm(forms.Form):
    """The benchmark's thresholds for its next difficulty filters."""

    strong_min = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Strong agent at least",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="A candidate whose strong agent scores less (mean) is too hard.",
    )
    small_max = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Small agent at most",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="A candidate whose small agent scores more (mean) is too easy.",
    )
    margin = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        label="Strong beats small by more than",
        widget=forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
        help_text="Else the candidate does not tell the agents apart (0: strictly better).",
    )

    @classmethod
    def for_benchmark(cls, benchmark):
        return cls(
            initial={
                "strong_min": benchmark.difficulty_strong_min,
                "small_max": benchmark.difficulty_small_max,
                "margin": benchmark.difficulty_margin,
            }
        )
