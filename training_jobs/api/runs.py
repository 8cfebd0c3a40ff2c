"""Training runs and checkpoints over the API. Reads need the viewer role; starting, cancelling, resuming, cloning,
serving and evaluating the admin role.

    GET  /api/training/runs/?kind=rl&status=…     newest first, with progress (and an RL run's latest mean reward)
    POST /api/training/runs/                      SFT: {dataset, base_model? | base_model_path?, preset?, overrides?: {key:
                                                  value}, cpu?, name?}; RL: {kind: "rl", base_model? | base_model_path?,
                                                  tasks: [ids] | tasks_from: "selection", mix_tasks?: [ids] |
                                                  mix_tasks_from?: "selection" (with overrides.mix_share),
                                                  harness?, preset?, overrides?, cpu?, name?}: 201 + the run
                                                  (queued on the gpu queue) and an SFT run's "warnings" (samples
                                                  that lose assistant turns to max_length); 400 {detail} for what
                                                  cannot train (an empty dataset, no model folder, GPUs it lacks,
                                                  no token left to train, a task mix that cannot be drawn)
    GET  /api/training/runs/{id}/                 with its whole config, checkpoints and the `train --json` figures;
                                                  an RL run's also "rl": its step metrics, per-step rollout summaries
                                                  and tasks
    GET  /api/training/runs/{id}/metrics/         every logged step (an SFT step's validation loss: eval_loss);
                                                  ?names=loss,eval_loss: only those values (steps that logged one of
                                                  them); ?min_step=&max_step=
    GET  /api/training/runs/{id}/rollouts/?step=N an RL run's rollouts (step, group, reward, samples, dropped), paged
    POST /api/training/runs/{id}/cancel/ | resume/ | clone/ {overrides?} | evaluate/ {benchmark_version}
    GET  /api/training/checkpoints/{id}/          POST …/serve/: 202 + the server (status "starting"; its job on the gpu
                                                  queue starts it on a worker), Location: its url
    GET  /api/training/servers/{id}/              a server: starting → ready (endpoint, base_url) or failed (error);
                                                  GET /api/training/servers/?checkpoint=ID lists one checkpoint's
                                                  (?base_model=NAME a base model's, served by
                                                  POST /api/training/base-models/NAME/serve/)
"""

from collections.abc import Mapping

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.settings import api_settings

from accounts.roles import ADMIN
from benchmarks.models import BenchmarkVersion
from evaluation.harnesses import HARNESS_CHOICES
from jobs.api_actions import LongRunningActions, detail_error, refusals, validated
from jobs.redaction import hide_paths, hide_paths_in, sees_server_details
from lib.api_filters import QueryFilterMixin
from lib.bounds import MAX_ID, parse_whole_number

from ..evaluations import EvaluationError, request_evaluation
from ..kinds import KINDS, TrainingRunError, rl_pages
from ..kinds.rl import rl_step_table, tasks_from
from ..models import (
    REPORT_TO,
    BaseModel,
    Checkpoint,
    ModelServer,
    RLRollout,
    TrainingDataset,
    TrainingMetric,
    TrainingRun,
)
from ..serializers import (
    ModelServerFilterSerializer,
    ModelServerSerializer,
    RLRolloutSerializer,
    RLStepSummarySerializer,
    StartRLRunSerializer,
    TrainingRunFilterSerializer,
)
from ..services import runs
from ..serving import request_serving


def _sees_paths(serializer) -> bool:
    request = serializer.context.get("request")
    return request is not None and sees_server_details(request.user)


class CheckpointSerializer(serializers.ModelSerializer):
    """A checkpoint; its folder in full for admins, its last part for everyone else (jobs.redaction)."""

    class Meta:
        model = Checkpoint
        fields = ["id", "run", "step", "path", "sha256", "size_bytes", "metrics", "created_at"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not _sees_paths(self):
            data["path"] = hide_paths(data["path"])
        return data


class TrainingRunSerializer(serializers.ModelSerializer):
    """A run in full. Server paths (the base model's and output folders, checkpoints', any in the config or the
    error) are admins' to see; everyone else gets their last part, as for jobs and rollouts."""

    checkpoints = CheckpointSerializer(many=True, read_only=True)

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "name",
            "kind",
            "status",
            "dataset",
            "base_model",
            "base_model_path",
            "preset",
            "cpu",
            "report_to",
            "config",
            "steps",
            "total_steps",
            "attempt",
            "resumed_from",
            "cloned_from",
            "error",
            "output_dir",
            "job_run",
            "base_eval_run",
            "created_at",
            "started_at",
            "finished_at",
            "checkpoints",
        ]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not _sees_paths(self):
            for name in ("name", "base_model_path", "output_dir", "error"):  # a name made before it said no path
                data[name] = hide_paths(data[name])
            data["config"] = hide_paths_in(data["config"])
        return data


class TrainingRunListSerializer(serializers.ModelSerializer):
    latest_reward = serializers.SerializerMethodField(help_text="An RL run's last logged mean reward (null: SFT).")

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "name",
            "kind",
            "status",
            "dataset",
            "preset",
            "cpu",
            "steps",
            "total_steps",
            "attempt",
            "latest_reward",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_latest_reward(self, run) -> float | None:
        return rl_pages.latest_reward(run) if run.kind == TrainingRun.Kind.RL else None

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not _sees_paths(self):
            data["name"] = hide_paths(data["name"])
        return data


class MetricSerializer(serializers.ModelSerializer):
    class Meta:
        model = TrainingMetric
        fields = ["step", "epoch", "values", "created_at"]


class MetricFilterSerializer(serializers.Serializer):
    names = serializers.CharField(
        required=False,
        help_text="comma-separated metric names, e.g. loss,eval_loss: only "
        "those values, of the steps that logged one of them",
    )
    min_step = serializers.IntegerField(required=False, min_value=0, max_value=MAX_ID)
    max_step = serializers.IntegerField(required=False, min_value=0, max_value=MAX_ID)

    def filter(self, rows) -> list[dict]:
        """The metric rows (serialized) these parameters keep."""
        data = self.validated_data
        if "min_step" in data:
            rows = rows.filter(step__gte=data["min_step"])
        if "max_step" in data:
            rows = rows.filter(step__lte=data["max_step"])
        shown = MetricSerializer(rows, many=True).data
        names = [name.strip() for name in data.get("names", "").split(",") if name.strip()]
        if not names:
            return shown
        kept = ({**row, "values": {k: v for k, v in row["values"].items() if k in names}} for row in shown)
        return [row for row in kept if row["values"]]


class StartRunSerializer(serializers.Serializer):
    # The model's whole choice set (one enum in the schema); "rl" is StartRLRunSerializer's (create dispatches).
    kind = serializers.ChoiceField(choices=TrainingRun.Kind.choices, default=TrainingRun.Kind.SFT)
    dataset = serializers.PrimaryKeyRelatedField(queryset=TrainingDataset.objects.all())
    base_model = serializers.SlugRelatedField(slug_field="name", queryset=BaseModel.objects.all(), required=False)
    base_model_path = serializers.CharField(required=False, allow_blank=True, default="")
    preset = serializers.ChoiceField(choices=list(KINDS["sft"].presets), default="paper")
    overrides = serializers.DictField(required=False, default=dict)
    cpu = serializers.BooleanField(default=False)
    report_to = serializers.ChoiceField(
        choices=REPORT_TO,
        default="none",
        help_text="tensorboard: also write TensorBoard event files (the run's folder).",
    )
    name = serializers.CharField(required=False, allow_blank=True, default="")


class EditsSerializer(serializers.Serializer):
    overrides = serializers.DictField(required=False, default=dict)


class EvaluateSerializer(serializers.Serializer):
    benchmark_version = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False)
    include_base = serializers.BooleanField(default=True)


class RLRunDetailSerializer(serializers.Serializer):
    steps = serializers.ListField(child=serializers.DictField(), help_text="One row per step: its logged metrics.")
    step_summaries = RLStepSummarySerializer(many=True)
    tasks = serializers.ListField(child=serializers.DictField(), help_text="[{external_id, revision}]")


START_RUN = PolymorphicProxySerializer(
    component_name="StartTrainingRun",
    resource_type_field_name=None,
    serializers=[StartRunSerializer, StartRLRunSerializer],
)


@extend_schema(tags=["training"])
class TrainingRunViewSet(
    LongRunningActions, QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """SFT and RL runs: their whole config, progress, checkpoints (an RL run's step metrics and rollouts); started,
    cancelled, resumed and cloned by admins."""

    queryset = TrainingRun.objects.prefetch_related("checkpoints")
    filter_serializer_class = TrainingRunFilterSerializer
    write_role = ADMIN
    noun = "training run"

    def get_serializer_class(self):
        return TrainingRunListSerializer if self.action == "list" else TrainingRunSerializer

    def detail_response(self, run, code=status.HTTP_200_OK, **extra) -> Response:
        context = self.get_serializer_context()
        report = runs.run_json(run)  # `train --json`'s figures, checkpoints' paths among them
        if not sees_server_details(self.request.user):
            report = hide_paths_in(report)
        body = {**TrainingRunSerializer(self.get_queryset().get(pk=run.pk), context=context).data, "report": report}
        if run.kind == TrainingRun.Kind.RL:
            tasks = [{"external_id": t["external_id"], "revision": t["revision"]} for t in rl_pages.run_tasks(run)]
            body["rl"] = RLRunDetailSerializer(
                {"steps": rl_step_table(run), "tasks": tasks, "step_summaries": rl_pages.step_summaries(run)}
            ).data
        return Response({**body, **extra}, status=code)

    def retrieve(self, request, *args, **kwargs):
        return self.detail_response(self.get_object())

    @extend_schema(request=START_RUN, responses={201: TrainingRunSerializer})
    def create(self, request):
        # One entry point for every kind (services.runs.start_training_run); each kind's fields are its serializer's.
        # A body that is not a JSON object (a list, a string) has no kind: StartRunSerializer then says what is wrong.
        rl = isinstance(request.data, Mapping) and request.data.get("kind") == TrainingRun.Kind.RL
        data = validated(StartRLRunSerializer if rl else StartRunSerializer, request.data)
        common = {
            "base_model": data.get("base_model"),
            "base_model_path": data["base_model_path"],
            "preset": data["preset"],
            "overrides": data["overrides"],
            "cpu": data["cpu"],
            "report_to": data["report_to"],
            "name": data["name"],
            "user": request.user,
        }
        with refusals(TrainingRunError):
            if rl:
                tasks = tasks_from(data["tasks_from"]) if data["tasks_from"] else data["tasks"]
                mix = tasks_from(data["mix_tasks_from"]) if data["mix_tasks_from"] else data["mix_tasks"]
                run = runs.start_training_run(kind="rl", tasks=tasks, mix_tasks=mix, harness=data["harness"], **common)
            else:
                run = runs.start_training_run(kind="sft", dataset=data["dataset"], **common)
        return self.started(run) if rl else self.started(run, warnings=run.warnings)

    @extend_schema(
        request=None,
        responses={200: TrainingRunSerializer, 409: detail_error("TrainingRunFinished", "The run has finished.")},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.cancellable(self.get_object())
        return self.detail_response(runs.cancel_training_run(run, user=request.user))

    @extend_schema(request=EditsSerializer, responses={200: TrainingRunSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        overrides = validated(EditsSerializer, request.data)["overrides"]
        with refusals(TrainingRunError):
            run = runs.resume_training_run(self.get_object(), user=request.user, overrides=overrides or None)
        return self.detail_response(run)

    @extend_schema(request=EditsSerializer, responses={201: TrainingRunSerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        overrides = validated(EditsSerializer, request.data)["overrides"]
        with refusals(TrainingRunError):
            run = runs.clone_training_run(self.get_object(), overrides, user=request.user)
        return self.started(run)

    @extend_schema(parameters=[MetricFilterSerializer], responses={200: MetricSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def metrics(self, request, pk=None):
        query = MetricFilterSerializer(data=request.query_params)
        unknown = sorted(set(request.query_params) - set(query.fields) - {api_settings.URL_FORMAT_OVERRIDE})
        if unknown:  # a misspelt filter is a 400, as on the lists, not every metric
            return Response(
                {name: [f"unknown query parameter (it takes: {', '.join(query.fields)})"] for name in unknown},
                status=status.HTTP_400_BAD_REQUEST,
            )
        query.is_valid(raise_exception=True)
        return Response(query.filter(self.get_object().metrics.order_by("step", "id")))

    @extend_schema(
        parameters=[OpenApiParameter("step", int, description="Only this step's rollouts.")],
        responses={200: RLRolloutSerializer(many=True)},
    )
    @action(detail=True, methods=["get"])
    def rollouts(self, request, pk=None):
        run = self.get_object()
        rows = (
            RLRollout.objects.filter(run=run)
            .select_related("rollout__revision__task")
            .order_by("step", "group_index", "id")
        )
        step = request.query_params.get("step")
        if step not in (None, ""):
            if parse_whole_number(step) is None:
                return Response({"step": ["a step number"]}, status=status.HTTP_400_BAD_REQUEST)
            rows = rows.filter(step=int(step))
        page = self.paginate_queryset(rows)
        context = self.get_serializer_context()
        return self.get_paginated_response(RLRolloutSerializer(page, many=True, context=context).data)

    @extend_schema(request=EvaluateSerializer, responses={202: None})
    @action(detail=True, methods=["post"])
    def evaluate(self, request, pk=None):
        """Queue the training.evaluate_checkpoints job (gpu queue): 202 at once with its job run, to follow at
        /api/jobs/ID/; the evaluation runs appear on the run's checkpoints as the job starts them."""
        form = EvaluateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        version = BenchmarkVersion.objects.filter(pk=form.validated_data["benchmark_version"]).first()
        if version is None:
            return Response({"detail": "no such benchmark version"}, status=status.HTTP_400_BAD_REQUEST)
        with refusals(EvaluationError):
            job_run = request_evaluation(
                self.get_object(),
                version,
                user=request.user,
                harness=form.validated_data.get("harness"),
                include_base=form.validated_data["include_base"],
            )
        url = reverse("jobrun-detail", args=[job_run.pk], request=request)
        return Response(
            {"job_run": job_run.pk, "status": job_run.status, "url": url},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": url},
        )


@extend_schema(tags=["training"])
class CheckpointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Checkpoint.objects.all()
    serializer_class = CheckpointSerializer
    write_role = ADMIN

    @extend_schema(request=None, responses={202: ModelServerSerializer})
    @action(detail=True, methods=["post"])
    def serve(self, request, pk=None):
        """Queue the checkpoint's server on a gpu worker; 202 at once with the server, to follow at its url (the
        same server again while one is starting or ready)."""
        with refusals():
            server = request_serving(self.get_object(), user=request.user)
        body = ModelServerSerializer(server, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


@extend_schema(tags=["training"])
class ModelServerViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Checkpoint and base-model servers, newest first (?checkpoint=ID: one checkpoint's; ?base_model=NAME: a registered
    base model's; ?status=ready)."""

    queryset = ModelServer.objects.select_related("endpoint", "base_model")
    serializer_class = ModelServerSerializer
    filter_serializer_class = ModelServerFilterSerializer


def register(router) -> None:
    router.register("training/runs", TrainingRunViewSet, basename="training-run")
    router.register("training/checkpoints", CheckpointViewSet, basename="training-checkpoint")
    router.register("training/servers", ModelServerViewSet, basename="training-server")
