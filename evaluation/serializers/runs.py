"""Evaluation runs as the API shows and takes them. The figures are computed by evaluation.reports (run_json,
compare_runs, leaderboard): the output serializers here describe those shapes for the schema, and the input ones
validate a request and resolve its names (benchmark, endpoint, tasks) to rows."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from benchmarks.models import BenchmarkVersion
from lib.bounds import MAX_ID
from llm.models import ModelEndpoint
from tasks.models import Task

from ..harnesses import HARNESS_CHOICES
from ..models import EvalRun, EvalRunTask, Outcome, Rollout
from ..reports import run_json
from ..samples import SORT_LABELS
from ..scanners import SCANNERS
from ..services.rollouts import MAX_REPEATS
from ..services.runs import LIMIT_KEYS, MAX_TASKS

# --- what a run is started with --------------------------------------------------------------------------------


class LimitsSerializer(serializers.Serializer):
    timeout = serializers.IntegerField(required=False, allow_null=True, min_value=1, help_text="Seconds per rollout.")
    max_turns = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    token_limit = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Input + output tokens per rollout."
    )

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(LIMIT_KEYS)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError(f"unknown limit(s) {', '.join(unknown)}; known: {', '.join(LIMIT_KEYS)}")
        return super().to_internal_value(data)


class EvalRunConfigSerializer(serializers.Serializer):
    """What makes a run what it is (runs.run_config): every field optional, as a resume takes them (a field left out
    is the run's own). Resolved: `benchmark_version` and `revisions` (from benchmark/version or tasks), `endpoint`
    (the row)."""

    benchmark = serializers.CharField(required=False, help_text="A benchmark's name: the run covers a frozen version.")
    version = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="The benchmark's version number; the latest unless given.",
    )
    tasks = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_empty=False,
        max_length=MAX_TASKS,
        help_text="Instead of a benchmark: task external ids (their current revisions).",
    )
    endpoint = serializers.CharField(required=False, help_text="The agent model endpoint's name.")
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False)
    repeats = serializers.IntegerField(required=False, min_value=1, max_value=MAX_REPEATS)
    options = serializers.DictField(required=False, help_text="Harness options other than the limits.")
    limits = LimitsSerializer(required=False)

    def validate_endpoint(self, name):
        endpoint = ModelEndpoint.objects.filter(name=name).first()
        if endpoint is None:
            raise serializers.ValidationError(f"no model endpoint named {name!r}")
        return endpoint

    def validate(self, attrs):
        if "benchmark" in attrs and "tasks" in attrs:
            raise serializers.ValidationError({"tasks": ["give a benchmark or a list of tasks, not both"]})
        if "version" in attrs and "benchmark" not in attrs:
            raise serializers.ValidationError({"version": ["a version needs its benchmark"]})
        if "benchmark" in attrs:
            attrs["benchmark_version"] = _version(attrs["benchmark"], attrs.get("version"))
            attrs["revisions"] = list(attrs["benchmark_version"].revisions.select_related("task"))
        if "tasks" in attrs:
            attrs["benchmark_version"] = None
            attrs["revisions"] = _current_revisions(attrs["tasks"])
        if "limits" in attrs:
            attrs["limits"] = {k: v for k, v in attrs["limits"].items() if v is not None}
        return attrs


def _version(benchmark: str, number: int | None) -> BenchmarkVersion:
    versions = BenchmarkVersion.objects.filter(benchmark__name=benchmark).select_related("benchmark")
    version = versions.filter(number=number).first() if number is not None else versions.order_by("-number").first()
    if version is None:
        if not versions.exists():
            raise serializers.ValidationError({"benchmark": [f"no frozen version of a benchmark named {benchmark!r}"]})
        raise serializers.ValidationError({"version": [f"{benchmark} has no version {number}"]})
    return version


def _current_revisions(external_ids: list[str]) -> list:
    if len(set(external_ids)) != len(external_ids):
        raise serializers.ValidationError({"tasks": ["each task once"]})
    tasks = {
        t.external_id: t for t in Task.objects.filter(external_id__in=external_ids).select_related("current_revision")
    }
    unknown = [name for name in external_ids if name not in tasks or tasks[name].current_revision is None]
    if unknown:
        raise serializers.ValidationError({"tasks": [f"no task (or no revision) named {', '.join(unknown[:20])}"]})
    return [tasks[name].current_revision for name in external_ids]


def _threshold(value: float) -> float:
    if not 0.0 < value <= 1.0:
        raise serializers.ValidationError("a pass threshold is in (0, 1]")
    return value


class StartEvalRunSerializer(EvalRunConfigSerializer):
    endpoint = serializers.CharField(help_text="The agent model endpoint's name.")
    repeats = serializers.IntegerField(default=1, min_value=1, max_value=MAX_REPEATS)
    pass_threshold = serializers.FloatField(
        required=False,
        validators=[_threshold],
        help_text="A repeat passes at this score (default 1.0); editable later.",
    )
    name = serializers.CharField(required=False, max_length=200, allow_blank=True)
    fresh = serializers.BooleanField(
        default=False, help_text="Start a new run even when one of the same configuration exists."
    )

    def validate(self, attrs):
        if "benchmark" not in attrs and "tasks" not in attrs:
            raise serializers.ValidationError({"benchmark": ["give a benchmark (or a list of tasks)"]})
        return super().validate(attrs)


class ThresholdSerializer(serializers.Serializer):
    pass_threshold = serializers.FloatField(validators=[_threshold], help_text="In (0, 1].")


class RegradeSerializer(serializers.Serializer):
    task = serializers.CharField(
        required=False,
        help_text="One of the run's tasks (external id): regrade every "
        "rollout of it, in every run, instead of the run's.",
    )


# --- query parameters ----------------------------------------------------------------------------------------


class EvalRunFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=EvalRun.Status.choices, required=False)
    endpoint = serializers.CharField(required=False, help_text="The endpoint's name.")
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False)
    benchmark = serializers.CharField(required=False, help_text="The benchmark's name.")
    version = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="The benchmark version's number."
    )

    def filter(self, queryset):
        data = self.validated_data
        lookups = {
            "status": "status",
            "endpoint": "endpoint__name",
            "harness": "harness",
            "benchmark": "benchmark_version__benchmark__name",
            "version": "benchmark_version__number",
        }
        for name, lookup in lookups.items():
            if name in data:
                queryset = queryset.filter(**{lookup: data[name]})
        return queryset


TASK_SORTS = ("task", "mean", "-mean", "std", "-std", "tokens", "-tokens")


class TaskRowsQuerySerializer(serializers.Serializer):
    sort = serializers.ChoiceField(
        choices=TASK_SORTS, default="task", help_text="Tasks without a score come last either way."
    )


class RunRolloutsQuerySerializer(serializers.Serializer):
    """A run's samples, filtered as on its samples page (evaluation.samples.filter_samples)."""

    task = serializers.CharField(required=False)
    status = serializers.ChoiceField(choices=Rollout.Status.choices, required=False)
    outcome = serializers.ChoiceField(choices=Outcome.choices, required=False)
    min_score = serializers.FloatField(required=False, min_value=0.0, max_value=1.0, help_text="score at least")
    max_score = serializers.FloatField(required=False, min_value=0.0, max_value=1.0, help_text="score at most")
    finding = serializers.ChoiceField(
        choices=list(SCANNERS), required=False, help_text="flagged by this transcript scanner (evaluation.scanners)"
    )
    q = serializers.CharField(
        required=False,
        max_length=200,
        help_text="a text (case-insensitive) in the task's id "
        "or title, the final message, the error, the reasons or the transcript",
    )
    sort = serializers.ChoiceField(
        choices=[name for name, _ in SORT_LABELS],
        default="task",
        help_text="task (then repeat), score (worst first), -score, tokens",
    )


EXPORT_FORMATS = ("json", "csv", "hf")


class ExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=EXPORT_FORMATS,
        default="json",
        help_text="json: the run, its figures and every rollout; csv: one row per rollout; hf: a Hugging Face "
        "dataset folder (one Parquet row per rollout and a dataset card), zipped.",
    )


class CompareQuerySerializer(serializers.Serializer):
    a = serializers.PrimaryKeyRelatedField(queryset=EvalRun.objects.select_related("endpoint"), help_text="Run A.")
    b = serializers.PrimaryKeyRelatedField(queryset=EvalRun.objects.select_related("endpoint"), help_text="Run B.")


class LeaderboardQuerySerializer(serializers.Serializer):
    benchmark = serializers.CharField(help_text="The benchmark's name.")
    version = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, help_text="Its version; the latest unless given."
    )

    def validate(self, attrs):
        attrs["benchmark_version"] = _version(attrs["benchmark"], attrs.get("version"))
        return attrs


# --- what the API answers ------------------------------------------------------------------------------------


class ProgressSerializer(serializers.Serializer):
    finished = serializers.IntegerField()
    total = serializers.IntegerField()
    percent = serializers.IntegerField()


def progress(run: EvalRun) -> dict:
    return {"finished": run.rollouts_finished, "total": run.rollouts_total, "percent": run.progress_percent}


class EvalRunListSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="eval-run-detail")
    endpoint = serializers.CharField(source="endpoint.name", read_only=True)
    benchmark = serializers.CharField(
        source="benchmark_version.benchmark.name", read_only=True, allow_null=True, default=None
    )
    version = serializers.IntegerField(source="benchmark_version.number", read_only=True, allow_null=True, default=None)
    progress = serializers.SerializerMethodField()
    overall_mean = serializers.FloatField(
        read_only=True, allow_null=True, help_text="Stored when the run finishes; null while it runs."
    )
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = EvalRun
        fields = [
            "id",
            "url",
            "name",
            "status",
            "endpoint",
            "harness",
            "benchmark",
            "version",
            "repeats",
            "progress",
            "overall_mean",
            "created_at",
            "created_by",
        ]
        read_only_fields = fields

    def get_progress(self, run) -> ProgressSerializer:
        return progress(run)


class MeanWithCISerializer(serializers.Serializer):
    mean = serializers.FloatField(allow_null=True)
    ci = serializers.ListField(
        child=serializers.FloatField(allow_null=True), allow_null=True, help_text="[lo, hi], 95% (null: too few)."
    )
    tasks = serializers.IntegerField(required=False)


class EvalRunDetailSerializer(serializers.Serializer):
    """The `evaluate --json` shape (reports.run_json) and the settings the run was started with (the keys the JSON
    export has too, without its rollouts). The fields document the shape; `to_representation` builds it."""

    run = serializers.IntegerField()
    status = serializers.ChoiceField(choices=EvalRun.Status.choices)
    overall = serializers.DictField(help_text="mean, ci [lo, hi], std_across_repeats")
    categories = serializers.DictField(child=MeanWithCISerializer(), help_text='slug or "uncategorized"')
    tasks = serializers.DictField(child=serializers.DictField(), help_text="task id: mean, std, min, max, n")
    pass_at_k = serializers.DictField(child=serializers.FloatField(allow_null=True))
    pass_hat_k = serializers.DictField(child=serializers.FloatField(allow_null=True))
    outcomes = serializers.DictField(child=serializers.IntegerField())
    tokens = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.FloatField()
    agent_seconds = serializers.FloatField()
    grading = serializers.DictField(child=MeanWithCISerializer(), help_text="code, hybrid")
    missing = serializers.ListField(child=serializers.CharField(), help_text="Tasks with a repeat lacking a score.")
    name = serializers.CharField()
    endpoint = serializers.CharField()
    harness = serializers.CharField()
    repeats = serializers.IntegerField()
    benchmark_version = serializers.CharField(allow_null=True)
    benchmark = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    progress = ProgressSerializer()
    limits = serializers.DictField()
    harness_options = serializers.DictField()
    pass_threshold = serializers.FloatField()
    max_attempts = serializers.IntegerField()
    config = serializers.DictField(help_text="The normalised configuration; a resume with another one is refused.")
    resumes = serializers.ListField(child=serializers.DictField(), help_text='Each resume: {"at", "by"}.')
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, run):
        version = run.benchmark_version
        return {
            **run_json(run),
            "benchmark": version.benchmark.name if version is not None else None,
            "version": version.number if version is not None else None,
            "progress": progress(run),
            "limits": run.limits,
            "harness_options": run.harness_options,
            "pass_threshold": run.pass_threshold,
            "max_attempts": run.max_attempts,
            "config": run.config,
            "resumes": run.resumes,
            "created_by": run.created_by.get_username() if run.created_by_id else None,
            "created_at": _when(run.created_at),
            "started_at": _when(run.started_at),
            "finished_at": _when(run.finished_at),
        }


def _when(moment) -> str | None:
    return serializers.DateTimeField().to_representation(moment) if moment else None


class StartedEvalRunSerializer(EvalRunDetailSerializer):
    reused = serializers.BooleanField(help_text="An earlier run of the same configuration was resumed.")


class EvalRunTaskSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task.external_id")
    revision = serializers.IntegerField(source="revision.number")
    category = serializers.SerializerMethodField()
    outcomes = serializers.DictField(source="outcome_counts", child=serializers.IntegerField())
    tokens = serializers.SerializerMethodField()
    cost = serializers.FloatField()

    class Meta:
        model = EvalRunTask
        fields = [
            "task",
            "revision",
            "category",
            "hybrid",
            "scores",
            "n",
            "mean",
            "std",
            "min",
            "max",
            "passes",
            "finished",
            "outcomes",
            "tokens",
            "input_tokens",
            "output_tokens",
            "cost",
            "agent_seconds",
        ]
        read_only_fields = fields

    def get_category(self, row) -> str:
        return row.task.benchmark_category.slug if row.task.benchmark_category_id else "uncategorized"

    def get_tokens(self, row) -> int:
        return row.input_tokens + row.output_tokens


class CompareSerializer(serializers.Serializer):
    """The `compare --json` shape (reports.compare_runs) and the per-task rows."""

    a = serializers.IntegerField()
    b = serializers.IntegerField()
    mean_difference = serializers.FloatField(allow_null=True, help_text="A minus B over the tasks both scored.")
    ci = serializers.ListField(child=serializers.FloatField(allow_null=True), allow_null=True)
    p_value = serializers.FloatField(allow_null=True, help_text="Sign-flip permutation test.")
    flipped = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="a_only, b_only: tasks solved by one run only.",
    )
    categories = serializers.DictField(child=serializers.FloatField())
    tasks_compared = serializers.IntegerField()
    tasks_not_compared = serializers.ListField(child=serializers.CharField())
    per_task = serializers.ListField(child=serializers.DictField(), help_text="task, category, a, b, difference")


@extend_schema_serializer(many=False)  # one object, though the leaderboard answers on `list`
class LeaderboardSerializer(serializers.Serializer):
    benchmark = serializers.CharField()
    version = serializers.IntegerField()
    entries = serializers.ListField(
        child=serializers.DictField(),
        help_text="Best first, complete runs only (the latest per endpoint and harness): run, name, endpoint, model, "
        "harness, repeats, finished_at, overall, categories, pass_at_k, cost, tokens.",
    )
