"""JobRun as the API shows it: a short form for lists and the full record (log tail, result, error) for one run."""

from rest_framework import serializers

from .models import JobRun
from .redaction import error_summary, hide_paths, hide_paths_in, sees_server_details


class JobRunListSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="jobrun-detail")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    percent = serializers.IntegerField(read_only=True, help_text="0-100; 100 once succeeded.")
    outcome = serializers.CharField(
        read_only=True,
        help_text='The status, or "partial" for a run that completed with failed items (a run whose '
        "every item failed has the status failed).",
    )
    failed_items = serializers.IntegerField(
        source="failed_count", read_only=True, help_text="Items that failed: reported by the job, or failed children."
    )

    class Meta:
        model = JobRun
        fields = [
            "id",
            "url",
            "kind",
            "queue",
            "status",
            "progress_done",
            "progress_total",
            "percent",
            "outcome",
            "failed_items",
            "items_total",
            "subject",
            "message",
            "cancel_requested",
            "created_by",
            "parent",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class JobRunSerializer(JobRunListSerializer):
    """One run in full. `result` is what the job returned (an import's report, for example) once it succeeded.

    Only admins get the error's traceback and server paths; others get its first line, and params, result and log
    tail with paths cut to their last part (jobs.redaction).
    """

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            data["error"] = error_summary(data["error"])
            data["log_tail"] = hide_paths(data["log_tail"])
            data["params"] = hide_paths_in(data["params"])
            data["result"] = hide_paths_in(data["result"])
        return data

    class Meta(JobRunListSerializer.Meta):
        fields = JobRunListSerializer.Meta.fields + [
            "params",
            "engine",
            "attempts",
            "worker",
            "heartbeat_at",
            "log_tail",
            "result",
            "error",
        ]
        read_only_fields = fields


class JobRunFilterSerializer(serializers.Serializer):
    """Query parameters of the job lists; wrong values are a 400, not an empty page."""

    status = serializers.ChoiceField(choices=JobRun.Status.choices, required=False)
    kind = serializers.CharField(required=False, help_text="Job kind, e.g. tasks.import_upload.")

    def filter(self, queryset):
        for name in ("status", "kind"):
            if name in self.validated_data:
                queryset = queryset.filter(**{name: self.validated_data[name]})
        return queryset
