"""Rollouts and trajectories as the API shows them."""

from rest_framework import serializers

from jobs.redaction import hide_paths, hide_paths_in, sees_server_details
from lib.bounds import MAX_ID

from ..harnesses import HARNESS_CHOICES, ExitReason
from ..models import Outcome, Rollout, Trajectory
from ..samples import filter_samples
from ..services.rollouts import MAX_REPEATS


class RolloutListSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="rollout-detail")
    task = serializers.CharField(source="revision.task.external_id", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True)
    endpoint = serializers.CharField(source="endpoint.name", read_only=True)
    # Declared: a read-only model field loses allow_blank, and the schema would say a running rollout's blank one
    # breaks the enum.
    exit_reason = serializers.ChoiceField(
        choices=ExitReason.CHOICES, allow_blank=True, read_only=True, help_text="blank until the agent has stopped"
    )

    class Meta:
        model = Rollout
        fields = [
            "id",
            "url",
            "task",
            "revision",
            "endpoint",
            "harness",
            "repeat_index",
            "group",
            "status",
            "exit_reason",
            "attempt",
            "score",
            "turns",
            "tool_calls",
            "model_calls",
            "input_tokens",
            "output_tokens",
            "agent_seconds",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class RolloutSerializer(RolloutListSerializer):
    """One rollout in full: the checker's verdict, the transcript, the workspace changes. The proxy session is given
    by id, never by token: while the agent runs, its token is a live credential for the model."""

    workspace_changes = serializers.SerializerMethodField()

    class Meta(RolloutListSerializer.Meta):
        fields = RolloutListSerializer.Meta.fields + [
            "seed",
            "harness_options",
            "error",
            "previous_attempts",
            "final_message",
            "tools_used",
            "harness_usage",
            "score_reason",
            "code_score",
            "rubric_score",
            "sub_scores",
            "check_status",
            "check_reason",
            "rubric_judgements",
            "checker_seconds",
            "runtime",
            "max_rss_bytes",
            "job_run",
            "proxy_session",
            "transcript",
            "agent_account",
            "workspace_changes",
        ]
        read_only_fields = fields

    def get_workspace_changes(self, rollout) -> list[dict]:
        return rollout.workspace_changes()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            # Failure reasons may name server paths (a sandbox or harness error): admins only see them in full.
            data["error"] = hide_paths(data["error"])
            data["check_reason"] = hide_paths(data["check_reason"])
            data["previous_attempts"] = hide_paths_in(data["previous_attempts"])
            if data["agent_account"].get("detail"):
                data["agent_account"] = {**data["agent_account"], "detail": hide_paths(data["agent_account"]["detail"])}
        return data


class StartRolloutsSerializer(serializers.Serializer):
    task = serializers.CharField(help_text="The task's external id; its current revision runs unless `revision`.")
    revision = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    endpoint = serializers.CharField(help_text="The model endpoint's name.")
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False)
    repeats = serializers.IntegerField(default=1, min_value=1, max_value=MAX_REPEATS)
    options = serializers.DictField(required=False, help_text='Harness options, e.g. {"timeout": 300}.')


class RolloutFilterSerializer(serializers.Serializer):
    task = serializers.CharField(required=False)
    endpoint = serializers.CharField(required=False)
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False)
    status = serializers.ChoiceField(choices=Rollout.Status.choices, required=False)
    group = serializers.CharField(required=False)
    eval_run = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="only this evaluation run's"
    )
    outcome = serializers.ChoiceField(choices=Outcome.choices, required=False)
    min_score = serializers.FloatField(required=False, min_value=0.0, max_value=1.0, help_text="score at least")
    max_score = serializers.FloatField(required=False, min_value=0.0, max_value=1.0, help_text="score at most")
    q = serializers.CharField(
        required=False,
        max_length=200,
        help_text="a text (case-insensitive) in the task's id "
        "or title, the final message, the error, the reasons or the transcript",
    )

    def filter(self, queryset):
        data = self.validated_data
        lookups = {"endpoint": "endpoint__name", "harness": "harness", "group": "group", "eval_run": "eval_run_id"}
        for name, lookup in lookups.items():
            if name in data:
                queryset = queryset.filter(**{lookup: data[name]})
        return filter_samples(queryset, data)  # task, status, outcome, scores and text: as on a run's samples page


class TrajectorySerializer(serializers.ModelSerializer):
    class Meta:
        model = Trajectory
        fields = [
            "id",
            "rollout",
            "index",
            "messages",
            "tools",
            "reward",
            "stats",
            "model_call_ids",
            "excluded",
            "exclusion_reason",
            "unverified_turns",
            "created_at",
        ]
        read_only_fields = fields


class TrajectoryFilterSerializer(serializers.Serializer):
    rollout = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    excluded = serializers.BooleanField(required=False, allow_null=True, default=None)
    min_reward = serializers.FloatField(required=False, min_value=0, max_value=1)

    def filter(self, queryset):
        data = self.validated_data
        if "rollout" in data:
            queryset = queryset.filter(rollout_id=data["rollout"])
        if data.get("excluded") is not None:
            queryset = queryset.filter(excluded=data["excluded"])
        if "min_reward" in data:
            queryset = queryset.filter(reward__gte=data["min_reward"])
        return queryset
