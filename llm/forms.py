from django import forms

from .models import ModelCall, ModelEndpoint


class EndpointForm(forms.ModelForm):
    """Validates an endpoint's settings; the view hands cleaned_data to llm.services."""

    roles = forms.MultipleChoiceField(
        choices=ModelEndpoint.Role.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    sampling = forms.JSONField(
        required=False, initial=dict, widget=forms.Textarea(attrs={"rows": 3}), label="Sampling defaults (JSON)"
    )

    class Meta:
        model = ModelEndpoint
        fields = [
            "name",
            "base_url",
            "model",
            "api_style",
            "api_key_env",
            "roles",
            "timeout_seconds",
            "max_retries",
            "max_concurrent",
            "sampling",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "enabled",
        ]
        # Django's labels from field names read "Api key env" and "Price input per mtok": say what each is.
        labels = {
            "base_url": "Base URL",
            "api_style": "API style",
            "api_key_env": "API key variable",
            "timeout_seconds": "Timeout (seconds)",
            "max_retries": "Retries",
            "max_concurrent": "Concurrent calls at most",
            "price_input_per_mtok": "Input price per million tokens",
            "price_output_per_mtok": "Output price per million tokens",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            # Scripts and sessions refer to endpoints by name: it does not change once made.
            self.fields["name"].disabled = True

    def clean_sampling(self):
        return self.cleaned_data.get("sampling") or {}

    def service_fields(self) -> dict:
        return {k: v for k, v in self.cleaned_data.items() if k != "name"}


class CallFilterForm(forms.Form):
    """The model call list's filters; a bad value drops only its own filter."""

    purpose = forms.CharField(required=False, max_length=80)
    endpoint = forms.CharField(required=False, max_length=80)
    subject = forms.CharField(required=False, max_length=200)
    session = forms.IntegerField(
        required=False, min_value=1, help_text="A proxy session's id (its token is never shown)."
    )
    outcome = forms.ChoiceField(required=False, choices=[("", "Any outcome"), ("ok", "OK"), ("error", "Error")])

    def filter(self, calls):
        self.is_valid()
        data = self.cleaned_data
        if data.get("purpose"):
            calls = calls.filter(purpose=data["purpose"])
        if data.get("endpoint"):
            calls = calls.filter(endpoint_name=data["endpoint"])
        if data.get("subject"):
            calls = calls.filter(subject__icontains=data["subject"].strip())
        if data.get("session"):
            calls = calls.filter(session_id=data["session"])
        if data.get("outcome") == "ok":
            calls = calls.filter(error="")
        elif data.get("outcome") == "error":
            calls = calls.exclude(error="")
        return calls

    @property
    def is_filtered(self) -> bool:
        return any(self.cleaned_data.get(name) for name in self.fields) if hasattr(self, "cleaned_data") else False


def known_values(field: str) -> list[str]:
    return list(ModelCall.objects.order_by(field).values_list(field, flat=True).distinct())
