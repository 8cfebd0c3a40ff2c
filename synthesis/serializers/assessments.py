"""Quality assessments as the API shows them, and what an assessment of tasks (`assess_tasks`) takes."""

from rest_framework import serializers

from tasks.models import Task

from ..models import QAStage, QualityAssessment


class QualityAssessmentSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="revision.task.external_id", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QualityAssessment
        fields = [
            "id",
            "task",
            "revision",
            "stage",
            "verdict",
            "reason",
            "details",
            "endpoint_name",
            "prompt_version",
            "model_call",
            "item",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class QualityAssessmentFilterSerializer(serializers.Serializer):
    task = serializers.CharField(required=False, help_text="The task's external id (any of its revisions).")
    stage = serializers.ChoiceField(choices=QAStage.choices, required=False)
    verdict = serializers.ChoiceField(choices=QualityAssessment.Verdict.choices, required=False)

    def filter(self, queryset):
        lookups = {"task": "revision__task__external_id", "stage": "stage", "verdict": "verdict"}
        for name, lookup in lookups.items():
            if name in self.validated_data:
                queryset = queryset.filter(**{lookup: self.validated_data[name]})
        return queryset


class AssessSerializer(serializers.Serializer):
    """What `assess_tasks` takes: tasks (external ids) or all, and the stages."""

    tasks = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_empty=False,
        help_text="Task external ids (their current revisions).",
    )
    all = serializers.BooleanField(default=False, help_text="Every task with a revision.")
    stages = serializers.ListField(
        child=serializers.ChoiceField(choices=QAStage.choices),
        required=False,
        allow_empty=False,
        help_text="Default: every stage.",
    )
    judge = serializers.CharField(
        required=False, help_text="The judge endpoint's name (default: the first enabled judge)."
    )

    def validate(self, attrs):
        if attrs["all"] == ("tasks" in attrs):
            raise serializers.ValidationError({"tasks": ["give a list of tasks or all: true (one of them)"]})
        if "tasks" in attrs:
            names = list(dict.fromkeys(attrs["tasks"]))
            found = set(
                Task.objects.filter(external_id__in=names, current_revision__isnull=False).values_list(
                    "external_id", flat=True
                )
            )
            unknown = [name for name in names if name not in found]
            if unknown:
                raise serializers.ValidationError(
                    {"tasks": [f"no task (or no revision) named {', '.join(unknown[:20])}"]}
                )
            attrs["tasks"] = names
        return attrs
