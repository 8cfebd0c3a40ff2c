"""Training datasets as the API shows them, and what building one takes (validated here; built by
training_jobs.datasets)."""

from rest_framework import serializers

from evaluation.harnesses import HARNESS_CHOICES
from jobs.serializers import JobRunSerializer
from tasks.models import Task

from .datasets import DEFAULT_FILTERS
from .models import DatasetSample, TrainingDataset


class DatasetFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=TrainingDataset.Status.choices, required=False)

    def filter(self, queryset):
        status = self.validated_data.get("status")
        return queryset.filter(status=status) if status else queryset


class SampleFilterSerializer(serializers.Serializer):
    split = serializers.ChoiceField(choices=DatasetSample.Split.choices, required=False)


class TrainingDatasetListSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="training-dataset-detail")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    trajectories = serializers.IntegerField(source="trajectories_count", read_only=True)

    class Meta:
        model = TrainingDataset
        fields = ["id", "url", "name", "status", "sha256", "trajectories", "excluded", "allow_benchmark_tasks",
                  "created_by", "created_at", "built_at"]  # fmt: skip


class TrainingDatasetDetailSerializer(TrainingDatasetListSerializer):
    override_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    samples_url = serializers.SerializerMethodField()
    job_run = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta(TrainingDatasetListSerializer.Meta):
        fields = [*TrainingDatasetListSerializer.Meta.fields, "error", "selection", "filters", "override_reason",
                  "override_by", "stats", "job_run", "samples_url"]  # fmt: skip

    def get_samples_url(self, dataset) -> str:
        from rest_framework.reverse import reverse

        return reverse("training-dataset-samples", args=[dataset.pk], request=self.context.get("request"))


class DatasetSampleSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task_external_id", read_only=True)
    rollout = serializers.IntegerField(source="trajectory.rollout_id", read_only=True)
    messages = serializers.JSONField(source="trajectory.messages", read_only=True)
    tools = serializers.JSONField(source="trajectory.tools", read_only=True)

    class Meta:
        model = DatasetSample
        fields = ["position", "split", "task", "reward", "tokens", "trajectory", "rollout", "messages", "tools"]


class BuildDatasetSerializer(serializers.Serializer):
    """What datasets.start_build takes: a selection (at least one of the first five) and filters."""

    eval_runs = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, default=list)
    groups = serializers.ListField(child=serializers.CharField(max_length=32), required=False, default=list)
    endpoints = serializers.ListField(child=serializers.CharField(max_length=80), required=False, default=list)
    # Names checked by hand, not ChoiceFields: the schema has these choice sets under their own names already.
    harnesses = serializers.ListField(child=serializers.CharField(max_length=40), required=False, default=list)
    sources = serializers.ListField(child=serializers.CharField(max_length=16), required=False, default=list,
                                    help_text="Task sources: " + ", ".join(Task.Source.values))  # fmt: skip
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    min_reward = serializers.FloatField(min_value=0, max_value=1, default=DEFAULT_FILTERS["min_reward"])
    max_tokens = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    complete_only = serializers.BooleanField(default=True)
    dedup = serializers.BooleanField(default=True)
    validation_share = serializers.FloatField(min_value=0, max_value=0.99,
                                              default=DEFAULT_FILTERS["validation_share"])  # fmt: skip
    seed = serializers.IntegerField(min_value=0, default=DEFAULT_FILTERS["seed"])
    name = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
    allow_benchmark_tasks = serializers.BooleanField(default=False)
    override_reason = serializers.CharField(required=False, default="", allow_blank=True, max_length=2000)

    SELECTION = ("eval_runs", "groups", "endpoints", "harnesses", "sources", "since", "until")
    FILTERS = ("min_reward", "max_tokens", "complete_only", "dedup", "validation_share", "seed")

    def validate_harnesses(self, value):
        known = [name for name, _ in HARNESS_CHOICES]
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise serializers.ValidationError(f"unknown harness(es) {unknown}; known: {', '.join(known)}")
        return value

    def validate_sources(self, value):
        unknown = sorted(set(value) - set(Task.Source.values))
        if unknown:
            raise serializers.ValidationError(f"unknown source(s) {unknown}; known: {', '.join(Task.Source.values)}")
        return value

    def build_settings(self) -> dict:
        data = self.validated_data
        return {
            "selection": {k: data[k] for k in self.SELECTION if data.get(k)},
            "filters": {k: data[k] for k in self.FILTERS},
            "name": data["name"],
            "allow_benchmark_tasks": data["allow_benchmark_tasks"],
            "override_reason": data["override_reason"],
        }


class BuildStartedSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    url = serializers.URLField()
    job = JobRunSerializer()
