"""Transcript scans over the API (evaluation.api.runs: /api/eval-runs/{id}/scan/ and /findings/)."""

from rest_framework import serializers

from ..models import ScanFinding
from ..scanners import SCANNERS


class ScanRequestSerializer(serializers.Serializer):
    scanners = serializers.ListField(
        child=serializers.ChoiceField(choices=[*SCANNERS, "all"]),
        required=False,
        allow_empty=False,
        help_text="The scanners to run by name ('all': every one); default: every scanner but the LLM-judged one.",
    )
    judge = serializers.CharField(
        required=False,
        max_length=200,
        help_text="The model endpoint the judge scanner asks (default: the first enabled one with the judge role).",
    )


class ScanCountsSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    scanned = serializers.ListField(child=serializers.CharField(), help_text="The scanners that have read the run.")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Findings per scanner.")
    rollouts_flagged = serializers.DictField(child=serializers.IntegerField(), help_text="Rollouts per scanner.")
    by_model = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()))
    errors = serializers.ListField(child=serializers.DictField(), help_text="What the latest scan could not scan.")
    scanned_at = serializers.DateTimeField(allow_null=True)


class NoQuerySerializer(serializers.Serializer):
    """A read that takes no query parameters (any one given is a 400)."""


class FindingsQuerySerializer(serializers.Serializer):
    scanner = serializers.ChoiceField(choices=list(SCANNERS), required=False, help_text="One scanner's findings.")


class ScanFindingSerializer(serializers.ModelSerializer):
    model_call = serializers.IntegerField(source="model_call_id", allow_null=True)
    rollout = serializers.IntegerField(source="rollout_id")
    task = serializers.CharField(source="rollout.revision.task.external_id")
    repeat = serializers.IntegerField(source="rollout.repeat_index")
    model = serializers.CharField(source="rollout.endpoint.name")

    class Meta:
        model = ScanFinding
        fields = [
            "rollout",
            "task",
            "repeat",
            "model",
            "scanner",
            "summary",
            "step",
            "model_call",
            "tool",
            "path",
            "evidence",
        ]
