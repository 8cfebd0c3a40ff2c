"""Training datasets as the API shows them, and what building one takes (validated here; built by
training_jobs.services.datasets)."""

from rest_framework import serializers
from rest_framework.reverse import reverse

from evaluation.harnesses import HARNESS_CHOICES
from jobs.redaction import hide_paths, sees_server_details
from jobs.serializers import JobRunSerializer
from lib.bounds import MAX_ID
from tasks.models import Task
from training.rl.presets import RL_PRESETS

from .models import REPORT_TO, BaseModel, DatasetSample, ModelServer, RLRollout, TrainingDataset, TrainingRun
from .services.datasets import DEFAULT_FILTERS, empty_reason


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
    empty_reason = serializers.SerializerMethodField(help_text='Why an "empty" dataset holds nothing (else blank).')

    class Meta:
        model = TrainingDataset
        fields = [
            "id",
            "url",
            "name",
            "status",
            "empty_reason",
            "sha256",
            "trajectories",
            "excluded",
            "allow_benchmark_tasks",
            "allow_unverified_history",
            "created_by",
            "created_at",
            "built_at",
        ]

    def get_empty_reason(self, dataset) -> str:
        return empty_reason(dataset)


class TrainingDatasetDetailSerializer(TrainingDatasetListSerializer):
    override_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    unverified_history_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    samples_url = serializers.SerializerMethodField()
    job_run = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    base_model = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    tokens_counted_with = serializers.SerializerMethodField(
        help_text='"tokenizer" (the tokenized sample, with tokenizer_path\'s tokenizer) or "usage" (an estimate).'
    )

    class Meta(TrainingDatasetListSerializer.Meta):
        fields = [
            *TrainingDatasetListSerializer.Meta.fields,
            "error",
            "selection",
            "filters",
            "override_reason",
            "override_by",
            "unverified_history_reason",
            "unverified_history_by",
            "stats",
            "job_run",
            "samples_url",
            "base_model",
            "tokens_counted_with",
            "tokenizer_path",
            "tokenizer_sha256",
        ]

    def get_tokens_counted_with(self, dataset) -> str:
        return "tokenizer" if dataset.tokenized else "usage"

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            data["tokenizer_path"] = hide_paths(data["tokenizer_path"])  # a server's folder: admins'
            data["error"] = hide_paths(data["error"])
        return data

    def get_samples_url(self, dataset) -> str:
        return reverse("training-dataset-samples", args=[dataset.pk], request=self.context.get("request"))


class DatasetSampleSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task_external_id", read_only=True)
    rollout = serializers.IntegerField(source="trajectory.rollout_id", read_only=True)
    messages = serializers.JSONField(source="trajectory.messages", read_only=True)
    tools = serializers.JSONField(source="trajectory.tools", read_only=True)

    class Meta:
        model = DatasetSample
        fields = [
            "position",
            "split",
            "task",
            "reward",
            "tokens",
            "assistant_spans",
            "trajectory",
            "rollout",
            "messages",
            "tools",
        ]


class BuildDatasetSerializer(serializers.Serializer):
    """What datasets.start_build takes: a selection (at least one of the first five) and filters."""

    eval_runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), required=False, default=list
    )
    groups = serializers.ListField(child=serializers.CharField(max_length=32), required=False, default=list)
    endpoints = serializers.ListField(child=serializers.CharField(max_length=80), required=False, default=list)
    # Names checked by hand, not ChoiceFields: the schema has these choice sets under their own names already.
    harnesses = serializers.ListField(child=serializers.CharField(max_length=40), required=False, default=list)
    sources = serializers.ListField(
        child=serializers.CharField(max_length=16),
        required=False,
        default=list,
        help_text="Task sources: " + ", ".join(Task.Source.values),
    )
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    min_reward = serializers.FloatField(min_value=0, max_value=1, default=DEFAULT_FILTERS["min_reward"])
    max_tokens = serializers.IntegerField(min_value=1, max_value=MAX_ID, required=False, allow_null=True, default=None)
    complete_only = serializers.BooleanField(default=True)
    dedup = serializers.BooleanField(default=True)
    validation_share = serializers.FloatField(min_value=0, max_value=0.99, default=DEFAULT_FILTERS["validation_share"])
    seed = serializers.IntegerField(min_value=0, max_value=MAX_ID, default=DEFAULT_FILTERS["seed"])
    name = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
    base_model = serializers.SlugRelatedField(
        slug_field="name",
        queryset=BaseModel.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The base model whose tokenizer counts the samples' tokens (as training sees them); none: the "
        "models' reported usage, an estimate.",
    )
    base_model_path = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=1000,
        help_text="Instead of base_model: a model folder with its tokenizer.",
    )
    allow_benchmark_tasks = serializers.BooleanField(default=False)
    override_reason = serializers.CharField(required=False, default="", allow_blank=True, max_length=2000)
    allow_unverified_history = serializers.BooleanField(
        default=False, help_text="Admins: include trajectories with assistant turns no recorded call answered."
    )
    unverified_history_reason = serializers.CharField(required=False, default="", allow_blank=True, max_length=2000)

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
            "base_model": data["base_model"],
            "tokenizer_path": data["base_model_path"],
            "allow_benchmark_tasks": data["allow_benchmark_tasks"],
            "override_reason": data["override_reason"],
            "allow_unverified_history": data["allow_unverified_history"],
            "unverified_history_reason": data["unverified_history_reason"],
        }


class BuildStartedSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    url = serializers.URLField()
    job = JobRunSerializer()


# --- RL runs ----------------------------------------------------------------------------------------------------


class TrainingRunFilterSerializer(serializers.Serializer):
    """?kind=rl&status=running on the runs' list."""

    kind = serializers.ChoiceField(choices=TrainingRun.Kind.choices, required=False)
    status = serializers.ChoiceField(choices=TrainingRun.Status.choices, required=False)

    def filter(self, queryset):
        for name in ("kind", "status"):
            if self.validated_data.get(name):
                queryset = queryset.filter(**{name: self.validated_data[name]})
        return queryset


class StartRLRunSerializer(serializers.Serializer):
    """What start_training_run(kind="rl") takes (kind "rl" on POST /api/training/runs/): a base model, the training
    tasks (external ids, or a selection), the harness, a preset and typed config edits."""

    kind = serializers.ChoiceField(choices=TrainingRun.Kind.choices, help_text='"rl"')
    base_model = serializers.SlugRelatedField(slug_field="name", queryset=BaseModel.objects.all(), required=False)
    base_model_path = serializers.CharField(required=False, allow_blank=True, default="")
    tasks = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Task external ids (their current revisions) or task revision ids.",
    )
    tasks_from = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=500,
        help_text="Instead of tasks: a selection, e.g. status=ready,source=skill,limit=200.",
    )
    mix_tasks = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Other tasks mixed into every step (the share mix_share of its prompts, an override): external "
        "ids or task revision ids.",
    )
    mix_tasks_from = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=500,
        help_text="Instead of mix_tasks: a selection (the run's own tasks left out of it).",
    )
    harness = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=40,
        help_text="builtin or openclaw (default: the preset's).",
    )
    preset = serializers.ChoiceField(choices=list(RL_PRESETS), default="paper")
    overrides = serializers.DictField(required=False, default=dict)
    cpu = serializers.BooleanField(default=False)
    report_to = serializers.ChoiceField(
        choices=REPORT_TO,
        default="none",
        help_text="tensorboard: also write TensorBoard event files (the run's folder).",
    )
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)

    def validate_kind(self, value):
        if value != TrainingRun.Kind.RL:
            raise serializers.ValidationError('an RL run is kind "rl"')
        return value

    def validate(self, attrs):
        if attrs["tasks"] and attrs["tasks_from"]:
            raise serializers.ValidationError({"tasks_from": ["give tasks or a selection, not both"]})
        if attrs["mix_tasks"] and attrs["mix_tasks_from"]:
            raise serializers.ValidationError({"mix_tasks_from": ["give mix tasks or a selection, not both"]})
        if not attrs["tasks"] and not attrs["tasks_from"]:
            raise serializers.ValidationError({"tasks": ["give the tasks to train on (ids, or tasks_from)"]})
        if not attrs.get("base_model") and not attrs["base_model_path"]:
            raise serializers.ValidationError({"base_model": ["give a registered base model or base_model_path"]})
        return attrs


class RLRolloutSerializer(serializers.ModelSerializer):
    """One rollout of an RL run's step, with what it became (reward None: left out of its group's baseline)."""

    status = serializers.CharField(source="rollout.status", read_only=True)
    outcome = serializers.CharField(source="rollout.outcome", read_only=True)
    task = serializers.CharField(source="rollout.revision.task.external_id", read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = RLRollout
        fields = [
            "step",
            "group_index",
            "rollout",
            "url",
            "task",
            "status",
            "outcome",
            "reward",
            "samples",
            "inexact_samples",
            "dropped",
            "wall_seconds",
            "created_at",
        ]
        read_only_fields = fields

    def get_url(self, row) -> str:
        return reverse("rollout-detail", args=[row.rollout_id], request=self.context.get("request"))


class RLStepSummarySerializer(serializers.Serializer):
    step = serializers.IntegerField()
    rollouts = serializers.IntegerField()
    groups = serializers.IntegerField()
    scored = serializers.IntegerField(help_text="Rollouts whose reward is in their group's baseline.")
    dropped = serializers.IntegerField(help_text="Rollouts of groups dropped for too few survivors.")
    samples = serializers.IntegerField(allow_null=True)
    inexact_samples = serializers.IntegerField(allow_null=True)
    reward_mean = serializers.FloatField(allow_null=True)
    wall_max_s = serializers.FloatField(allow_null=True)


class ModelServerSerializer(serializers.ModelSerializer):
    """A checkpoint's (or base model's) server: "starting" while its gpu job merges and loads, then "ready" with its
    endpoint, or "failed" with the error; follow it at `url`. `base_model`: the registered base model's name (its
    endpoint base-NAME), null for a checkpoint's or a run's own base."""

    url = serializers.HyperlinkedIdentityField(view_name="training-server-detail")
    base_model = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    endpoint = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    base_url = serializers.SerializerMethodField()

    class Meta:
        model = ModelServer
        fields = [
            "id",
            "url",
            "checkpoint",
            "base_model",
            "status",
            "backend",
            "endpoint",
            "base_url",
            "host",
            "port",
            "error",
            "job_run",
            "created_at",
            "last_used_at",
            "stopped_at",
        ]
        read_only_fields = fields

    def get_base_url(self, server) -> str | None:
        return server.endpoint.base_url if server.endpoint_id else None

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            data["error"] = hide_paths(data["error"])  # a failed start names its log and the model's folder
        return data


class ModelServerFilterSerializer(serializers.Serializer):
    """?checkpoint=ID&base_model=NAME&status=ready on the servers' list."""

    checkpoint = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    base_model = serializers.SlugField(required=False, help_text="A registered base model's name.")
    status = serializers.ChoiceField(choices=ModelServer.Status.choices, required=False)

    def filter(self, queryset):
        lookups = {"checkpoint": "checkpoint", "base_model": "base_model__name", "status": "status"}
        for name, lookup in lookups.items():
            if self.validated_data.get(name):
                queryset = queryset.filter(**{lookup: self.validated_data[name]})
        return queryset
