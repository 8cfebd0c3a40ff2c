"""Forms of the reviewers' pages."""

from django import forms

from .models import ReviewDecision

Decision = ReviewDecision.Decision


class DecisionForm(forms.Form):
    """Accept, fix or reject: what the queue's and the candidate page's decision dialogs post."""

    decision = forms.ChoiceField(choices=[(d.value, d.label) for d in (Decision.ACCEPT, Decision.FIX, Decision.REJECT)])
    reason = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 3}))
    override_reason = forms.CharField(
        required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Admins only: why to accept although the sanity check failed.",
    )  # fmt: skip

    def clean(self):
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Rejecting needs a reason.")
        return data
