"""Category proposals as the API shows them, and the admin's decisions on them (tasks.categorizing)."""

from rest_framework import serializers

from lib.bounds import MAX_ID

from ..models import BenchmarkCategory, CategoryProposal, Task


class CategoryProposalSerializer(serializers.ModelSerializer):
    """A model's proposal of a benchmark category for a task, and the admin's decision on it."""

    task = serializers.SlugRelatedField(slug_field="external_id", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True, help_text="The revision shown.")
    category = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="What the model proposed; null when the proposal failed."
    )
    category_before = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="The task's category when the proposal was made."
    )
    decided_category = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    decided_revision = serializers.IntegerField(
        source="decided_revision.number", read_only=True, allow_null=True, help_text="The revision the decision made."
    )
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = CategoryProposal
        fields = [
            "id",
            "task",
            "revision",
            "category",
            "reason",
            "status",
            "error",
            "endpoint_name",
            "prompt_version",
            "model_call",
            "job_run",
            "category_before",
            "decided_category",
            "decided_revision",
            "decision_note",
            "decided_by",
            "decided_at",
            "created_at",
        ]
        read_only_fields = fields


class CategoryProposalFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=CategoryProposal.Status.choices, required=False)
    task = serializers.CharField(required=False, help_text="A task's external id.")
    category = serializers.SlugField(required=False, help_text="The proposed category's slug.")

    def filter(self, queryset):
        data = self.validated_data
        if "status" in data:
            queryset = queryset.filter(status=data["status"])
        if "task" in data:
            queryset = queryset.filter(task__external_id=data["task"])
        if "category" in data:
            queryset = queryset.filter(category__slug=data["category"])
        return queryset


class ProposalIdsSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), min_length=1, max_length=1000
    )


class ProposalEditSerializer(serializers.Serializer):
    category = serializers.SlugRelatedField(
        slug_field="slug", queryset=BenchmarkCategory.objects.all(), help_text="The category to set (slug)."
    )


class ProposalRejectSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=500, required=False, allow_blank=True)


class CategorizeSerializer(serializers.Serializer):
    tasks = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        max_length=100_000,
        help_text="External ids; omitted: the tasks without a category and without a pending proposal.",
    )
    endpoint = serializers.CharField(required=False, help_text="Endpoint name (default: generator, else judge role).")

    def validate_tasks(self, value):
        found = dict(Task.objects.filter(external_id__in=value).values_list("external_id", "pk"))
        missing = [i for i in dict.fromkeys(value) if i not in found]
        if missing:
            raise serializers.ValidationError(f"no such task: {', '.join(missing[:20])}")
        return [found[i] for i in dict.fromkeys(value)]


class DecisionsSerializer(serializers.Serializer):
    accepted = serializers.ListField(
        child=serializers.IntegerField(), help_text="Proposals accepted (a new revision each)."
    )
    rejected = serializers.ListField(child=serializers.DictField(), help_text='Stale ones: {"id", "reason"}.')
    skipped = serializers.ListField(child=serializers.DictField(), help_text='Not pending: {"id", "status"}.')
    errors = serializers.ListField(child=serializers.DictField(), help_text='Not applied: {"id", "error"}.')
