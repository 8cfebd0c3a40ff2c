"""Forms of the synthesis pages: what they validate and hand to synthesis.services; no logic of their own."""

from django import forms

from llm.models import ModelEndpoint

from .batch_plan import MAX_COUNT, MAX_SUPPORTING, OPERATIONS_PER_TASK
from .models import QAStage, Route


def _offer(field: forms.ModelChoiceField, role: str) -> None:
    """Offer the enabled endpoints that serve `role` (the `synthesize` command still takes any by name); with none,
    the field says how to get one instead of showing an empty list."""
    field.queryset = ModelEndpoint.serving(role)
    if not field.queryset.exists():
        field.help_text = (
            f"No enabled endpoint serves the {role} role: give one that role on the Models page (/llm/endpoints/)."
        )


class StartBatchForm(forms.Form):
    """What synthesis.services.start_batch takes. `batch_settings()` gives its keyword arguments. The dashboard shows
    route, count, endpoints, seed and QA stages; the start page every field."""

    route = forms.ChoiceField(choices=Route.choices, initial=Route.PERSONA)
    count = forms.IntegerField(
        min_value=1,
        max_value=MAX_COUNT,
        initial=20,
        label="Tasks wanted",
        help_text="One item each. A preview runs 5 whatever this says.",
    )
    generator = forms.ModelChoiceField(queryset=None, to_field_name="name", empty_label=None)
    judge = forms.ModelChoiceField(
        queryset=None,
        to_field_name="name",
        empty_label=None,
        help_text="Quality assessment (and the judge-side checks).",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text="Draws the items: the same seed draws the same items. Blank: a random one.",
    )
    qa_stages = forms.MultipleChoiceField(
        choices=QAStage.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Quality assessment",
        help_text="None ticked: no QA stage (every draft that passes verification is kept).",
    )
    budget_usd = forms.DecimalField(
        required=False,
        min_value=0,
        decimal_places=4,
        max_digits=12,
        label="Budget ($)",
        help_text="The batch pauses when its cost reaches it.",
    )
    budget_tokens = forms.IntegerField(required=False, min_value=0, label="Budget (tokens)")
    operations = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=8,
        label="Operations per task",
        help_text=f"Persona route (default {OPERATIONS_PER_TASK}).",
    )
    supporting = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_SUPPORTING,
        label="Supporting skills at most",
        help_text=f"Skill route (default {MAX_SUPPORTING}).",
    )
    allow_network = forms.BooleanField(
        required=False,
        label="Allow operations that need the network",
        help_text="The sandbox has none: off unless you know why.",
    )
    name = forms.CharField(required=False, max_length=200)

    DASHBOARD_FIELDS = ("route", "count", "generator", "judge", "seed", "qa_stages")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", {})
        super().__init__(*args, **kwargs)
        for name, role in (("generator", ModelEndpoint.Role.GENERATOR), ("judge", ModelEndpoint.Role.JUDGE)):
            _offer(self.fields[name], role)
            first = self.fields[name].queryset.first()
            self.initial.setdefault(name, first.name if first else "")
        self.initial.setdefault("qa_stages", QAStage.values)

    def dashboard_fields(self):
        return [self[name] for name in self.DASHBOARD_FIELDS]

    def missing_roles(self) -> list[str]:
        """The roles a batch needs that no enabled endpoint serves ("generator", "judge"): what to register first."""
        return [name for name in ("generator", "judge") if not self.fields[name].queryset.exists()]

    def batch_settings(self, *, preview: bool) -> dict:
        data = self.cleaned_data
        options = {"qa_stages": list(data["qa_stages"])}
        for key in ("operations", "supporting"):
            if data[key] is not None:
                options[key] = data[key]
        if data["allow_network"]:
            options["allow_network"] = True
        if len(options["qa_stages"]) == len(QAStage.values):  # every stage is the default: the same config as
            del options["qa_stages"]  # `synthesize` without --qa-stages, so the two resume each other's batches
        return {
            "route": data["route"],
            "count": data["count"],
            "generator": data["generator"],
            "judge": data["judge"],
            "seed": data["seed"],
            "preview": preview,
            "budget_usd": data["budget_usd"],
            "budget_tokens": data["budget_tokens"],
            "options": options,
            "name": data["name"],
        }


class PersonaImportForm(forms.Form):
    file = forms.FileField(help_text='Persona Hub JSONL ({"persona": "…"} per line) or plain text, one per line.')


class SkillOverrideForm(forms.Form):
    LABELS = [("", "Follow the annotation"), ("yes", "Synthesizable"), ("no", "Not synthesizable")]

    synthesizable = forms.ChoiceField(choices=LABELS, required=False, label="Label")
    reason = forms.CharField(
        required=False, max_length=2000, widget=forms.TextInput, help_text="Why (required to set a label)."
    )

    def clean(self):
        data = super().clean()
        data["value"] = {"": None, "yes": True, "no": False}[data.get("synthesizable") or ""]
        if data["value"] is not None and not (data.get("reason") or "").strip():
            self.add_error("reason", "Say why the label is overridden.")
        return data


class PersonaSearchForm(forms.Form):
    q = forms.CharField(required=False, label="Search")
