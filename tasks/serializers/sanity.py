"""A revision's sanity report as the API shows it: each lazy workspace's checker run and the verdict (tasks.sanity)."""

from rest_framework import serializers

from jobs.redaction import hide_paths_in, sees_server_details

from ..models import SanityReport
from ..verification import CheckStatus


class SanityWriteSerializer(serializers.Serializer):
    path = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "modified", "deleted"])


class SanityRunSerializer(serializers.Serializer):
    """How the checker did on one workspace."""

    score = serializers.FloatField(help_text="The code score; 0 unless status is ok.")
    status = serializers.ChoiceField(choices=[(s.value, s.value) for s in CheckStatus])
    reason = serializers.CharField(help_text="Why it failed, or a remark on a clean run (may be empty).")
    subscores = serializers.DictField(
        child=serializers.FloatField(), help_text="The checks check.py printed (whatever reward.sh did with them)."
    )
    duration = serializers.FloatField(help_text="Seconds.")
    runtime = serializers.CharField(required=False, help_text="The sandbox runtime version that ran the checker.")
    workspace_writes = SanityWriteSerializer(
        many=True, required=False, help_text="What the checker wrote into the workspace it judged (a warning)."
    )
    workspace_writes_count = serializers.IntegerField(required=False, help_text="All its writes (the list is cut).")
    stdout = serializers.CharField(required=False, help_text="The end of the checker's stdout (every run).")
    stderr = serializers.CharField(
        required=False, help_text="The end of the checker's stderr (every run; older reports: failed runs only)."
    )


class SanityReportSerializer(serializers.ModelSerializer):
    """The latest sanity check of a revision's checker (see tasks.sanity)."""

    runs = serializers.DictField(
        child=SanityRunSerializer(),
        help_text="Each lazy workspace tried: empty, initial and scaffold, then the lazy moves (tasks.lazy_workspaces).",
    )
    solution_run = SanityRunSerializer(allow_null=True, help_text="The reference solution applied; null without one.")
    verdict = serializers.ChoiceField(choices=["crashed", "over-lenient", "unsolvable", "passed"], read_only=True)
    problems = serializers.ListField(child=serializers.CharField(), read_only=True)
    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="No findings: e.g. the checker wrote to its workspace."
    )
    lazy_scores = serializers.DictField(
        child=serializers.FloatField(), read_only=True, help_text="What a lazy agent earns on each lazy workspace."
    )
    lazy_best = serializers.DictField(
        source="lazy_best_run",
        read_only=True,
        allow_null=True,
        help_text="The workspace that earned the lazy score: workspace, score, paying_checks, description, files, "
        "final_message.",
    )
    lazy_workspaces = serializers.DictField(
        read_only=True, help_text="{workspace: {description, files: [{path, size}], final_message}}: what each run got."
    )
    moves_not_run = serializers.DictField(
        child=serializers.CharField(), read_only=True, help_text="{lazy move: why it was not run}."
    )
    paying_checks = serializers.DictField(
        child=serializers.FloatField(), read_only=True, help_text="The checks that pay a lazy agent, at their most."
    )
    sandbox_warning = serializers.SerializerMethodField(help_text="Set when the checker ran without a sandbox.")

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not sees_server_details(request.user):
            # A sandbox that could not start says where (server paths): only admins get those in full.
            for key in ("problems", "warnings", "runs", "solution_run", "lazy_best"):
                data[key] = hide_paths_in(data[key])
        return data

    class Meta:
        model = SanityReport
        fields = [
            "verdict",
            "crashed",
            "over_lenient",
            "lazy_score",
            "lazy_scores",
            "lazy_best",
            "lazy_workspaces",
            "moves_not_run",
            "paying_checks",
            "solvable",
            "problems",
            "warnings",
            "runs",
            "solution_run",
            "scaffold_paths",
            "tolerance",
            "backend",
            "runtime",
            "isolated",
            "sandbox_warning",
            "job_run",
            "created_at",
        ]
        read_only_fields = fields

    def get_sandbox_warning(self, obj) -> str | None:
        return None if obj.isolated else f"ran without a sandbox (the {obj.backend} backend)"
