"""Evaluation runs over the API. Reads need the viewer role; starting, resuming, cancelling, regrading a whole run and
changing the pass threshold the admin role; a reviewer may regrade one task (after fixing its checker).

    GET  /api/eval-runs/                    ?status=&endpoint=&harness=&benchmark=&version=   newest first
    POST /api/eval-runs/                    {benchmark, version? | tasks: [ids], endpoint, harness?, repeats?,
                                            options?, limits? {timeout, max_turns, token_limit}, pass_threshold?,
                                            name?, fresh?}: 201 + the run; 200 + "reused": true when an earlier run
                                            of the same configuration was resumed instead
    GET  /api/eval-runs/{id}/               the `evaluate --json` shape and the run's settings
    POST /api/eval-runs/{id}/resume/        run what is left; a body with other config fields: 409 naming them
    POST /api/eval-runs/{id}/cancel/        409 when it has finished
    POST /api/eval-runs/{id}/regrade/       {task?}: queue a regrade job (the run's rollouts; with a task of the
                                            run, every rollout of that task): 202 + the job run
    POST /api/eval-runs/{id}/threshold/     {pass_threshold}: pass@k, pass^k and solved tasks recomputed
    GET  /api/eval-runs/{id}/scan/          what the transcript scanners found: counts per scanner and per model
    POST /api/eval-runs/{id}/scan/          {scanners?, judge?}: queue a scan (evaluation.scan_run): 202 + the job run
    GET  /api/eval-runs/{id}/findings/      ?scanner=   the findings (rollout, step, model call, evidence), paginated
    GET  /api/eval-runs/{id}/tasks/         ?sort=task|mean|-mean|std|-std|tokens|-tokens   per-task rows, paginated
    GET  /api/eval-runs/{id}/rollouts/      ?task=&status=&outcome=&min_score=&max_score=&q=&sort=   its samples, as
                                            its samples page filters them (q: a text in the transcript, the final
                                            message, the reasons); paginated
    GET  /api/eval-runs/{id}/export/        ?format=json|csv   a download (CSV: one row per rollout, streamed)
    GET  /api/eval-runs/compare/            ?a=RUN&b=RUN   the `compare --json` shape and per-task rows
    GET  /api/leaderboard/                  ?benchmark=NAME&version=N (latest unless given): complete runs only
"""

from django.db.models import F
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.settings import api_settings

import jobs
from accounts.roles import ADMIN, REVIEWER, has_role
from jobs.api_actions import LongRunningActions, detail_error, refusals, validated
from jobs.serializers import JobRunSerializer
from lib.api_filters import QueryFilterMixin

from .. import reports
from ..exports import iter_csv, run_export
from ..job_kinds import REGRADE_JOB
from ..models import EvalRun, EvalRunTask, Rollout
from ..samples import filter_samples, sorted_samples
from ..serializers.rollouts import RolloutListSerializer
from ..serializers.runs import (
    CompareQuerySerializer,
    CompareSerializer,
    EvalRunConfigSerializer,
    EvalRunDetailSerializer,
    EvalRunFilterSerializer,
    EvalRunListSerializer,
    EvalRunTaskSerializer,
    ExportQuerySerializer,
    LeaderboardQuerySerializer,
    LeaderboardSerializer,
    RegradeSerializer,
    RunRolloutsQuerySerializer,
    StartedEvalRunSerializer,
    StartEvalRunSerializer,
    TaskRowsQuerySerializer,
    ThresholdSerializer,
)
from ..serializers.scans import (
    FindingsQuerySerializer,
    NoQuerySerializer,
    ScanCountsSerializer,
    ScanFindingSerializer,
    ScanRequestSerializer,
)
from ..services import runs, scans
from ..services.regrade import regradable

# Which config keys (runs.run_config) each field of a resume's body sets; the rest stay the run's own.
CONFIG_KEYS = {
    "revisions": ("benchmark_version", "revisions"),
    "endpoint": ("endpoint", "model"),
    "harness": ("harness",),
    "options": ("harness_options",),
    "limits": ("limits",),
    "repeats": ("repeats",),
}
TASK_ORDER = {"mean": "mean", "std": "std", "tokens": "total_tokens"}


def _query(request, serializer_class, *, also=(), where="here"):
    """An action's query parameters, validated; one it does not take is a 400, as on the lists (whose wording a
    list route keeps: where="for this list")."""
    form = serializer_class(data=request.query_params)
    known = set(form.fields) | set(also) | {api_settings.URL_FORMAT_OVERRIDE}
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        allowed = ", ".join(sorted(known - {None}))
        raise ValidationError({name: [f"unknown query parameter {where} (it takes: {allowed})"] for name in unknown})
    form.is_valid(raise_exception=True)
    return form.validated_data


NOT_STARTED = detail_error("EvalRunNotStarted", "The job engine did not take the run's jobs.")


@extend_schema(tags=["evaluation runs"])
class EvalRunViewSet(
    LongRunningActions, QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Evaluation runs: a model (endpoint) with a harness over a frozen benchmark version or a list of task
    revisions, each `repeats` times. A list row gives the progress and, once finished, the overall mean; one run
    gives its figures (the `evaluate --json` shape) and the settings it was started with."""

    queryset = EvalRun.objects.select_related("endpoint", "benchmark_version__benchmark", "created_by")
    filter_serializer_class = EvalRunFilterSerializer
    write_role = ADMIN
    write_roles = {"regrade": REVIEWER}  # a whole run needs admin: checked in the action, which reads the body
    noun = "evaluation run"
    detail_serializer_class = EvalRunDetailSerializer

    def get_serializer_class(self):
        return EvalRunListSerializer if self.action == "list" else EvalRunDetailSerializer

    def perform_content_negotiation(self, request, force=False):
        if self.action == "export":
            # `?format=` names the export here, not a renderer: errors are answered in JSON.
            renderer = self.get_renderers()[0]
            return renderer, renderer.media_type
        return super().perform_content_negotiation(request, force)

    @extend_schema(parameters=[EvalRunFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=StartEvalRunSerializer,
        responses={201: StartedEvalRunSerializer, 200: StartedEvalRunSerializer, 503: NOT_STARTED},
        description="Start a run: one job per task revision x repeat on the sandbox queue. A run of the same "
        "configuration (tasks, endpoint, harness, options, limits, repeats) is resumed instead unless `fresh` "
        '(200, "reused": true): its finished rollouts are kept.',
    )
    def create(self, request):
        data = validated(StartEvalRunSerializer, request.data)
        with refusals(runs.EvalRunError):
            run, reused = runs.start_eval_run(
                endpoint=data["endpoint"],
                revisions=data["revisions"],
                benchmark_version=data["benchmark_version"],
                harness=data.get("harness"),
                repeats=data["repeats"],
                options=data.get("options"),
                limits=data.get("limits"),
                name=data.get("name", ""),
                pass_threshold=data.get("pass_threshold", 1.0),
                fresh=data["fresh"],
                user=request.user,
            )
        return self.started(run, again=reused, flag="reused")

    @extend_schema(
        request=EvalRunConfigSerializer,
        responses={
            200: EvalRunDetailSerializer,
            409: detail_error(
                "EvalRunConfigDiffers",
                "The body's configuration is not the run's: the message names the keys that differ.",
            ),
            503: NOT_STARTED,
        },
        description="Run again what is left of the run (failed, cancelled or lost rollouts); finished ones are "
        "kept. Config fields in the body (all optional) must equal the run's.",
    )
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = self.get_object()
        data = validated(EvalRunConfigSerializer, request.data)
        with refusals(runs.EvalRunError, code=status.HTTP_409_CONFLICT):
            run = runs.resume_eval_run(run, user=request.user, config=_asked_config(run, data) if data else None)
        return self.detail_response(run)

    @extend_schema(
        request=None,
        responses={200: EvalRunDetailSerializer, 409: detail_error("EvalRunFinished", "The run has finished.")},
        description="Queued rollouts are cancelled (and their jobs); running ones finish and are counted.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.cancellable(self.get_object())
        return self.detail_response(runs.cancel_eval_run(run, user=request.user))

    @extend_schema(
        request=RegradeSerializer,
        responses={
            202: JobRunSerializer,
            409: detail_error("EvalRunNothingToRegrade", "No finished rollout of the run (or task) to regrade."),
            503: NOT_STARTED,
        },
        description="Score finished rollouts again from their stored final workspaces with the tasks' current "
        "checkers and rubrics, as an evaluation.regrade job (each a new scoring record): the run's (admins), or, "
        "with `task` (one of the run's; reviewers too), every rollout of that task in every run, so that whoever "
        "fixed its checker sees how each model's score changes.",
    )
    @action(detail=True, methods=["post"])
    def regrade(self, request, pk=None):
        run = self.get_object()
        data = validated(RegradeSerializer, request.data)
        if "task" in data:
            row = EvalRunTask.objects.filter(run=run, task__external_id=data["task"]).select_related("task").first()
            if row is None:
                raise ValidationError({"task": [f"{data['task']!r} is not a task of run #{run.pk}"]})
            params, rollouts = {"task_id": row.task.external_id}, Rollout.objects.filter(revision__task=row.task)
        elif has_role(request.user, ADMIN):
            params, rollouts = {"run_id": run.pk}, run.rollouts.all()
        else:
            raise PermissionDenied("regrading a whole run needs the admin role (a reviewer may regrade one task)")
        if not regradable(rollouts).exists():
            what = f"task {data['task']}" if "task" in data else f"run #{run.pk}"
            return Response({"detail": f"{what} has no finished rollout to regrade"}, status=status.HTTP_409_CONFLICT)
        with refusals():
            job_run = jobs.enqueue(REGRADE_JOB, created_by=request.user, **params)
        body = JobRunSerializer(job_run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ThresholdSerializer, responses={200: EvalRunDetailSerializer})
    @action(detail=True, methods=["post"])
    def threshold(self, request, pk=None):
        """Change what counts as a pass: pass@k, pass^k and solved tasks are recomputed; the config is unchanged."""
        run = self.get_object()
        data = validated(ThresholdSerializer, request.data)
        with refusals(runs.EvalRunError):
            run = runs.set_pass_threshold(run, data["pass_threshold"], user=request.user)
        return self.detail_response(run)

    @extend_schema(
        methods=["GET"],
        request=None,
        responses={200: ScanCountsSerializer},
        description="What the transcript scanners found in the run's rollouts: the scanners that read it, findings "
        "and flagged rollouts per scanner, findings per model, and what the latest scan could not scan.",
    )
    @extend_schema(
        methods=["POST"],
        request=ScanRequestSerializer,
        responses={202: JobRunSerializer, 400: detail_error("ScanRefused", "An unknown judge."), 503: NOT_STARTED},
        description="Scan the run's finished rollouts again as an evaluation.scan_run job; the findings of the "
        "scanners it runs replace their earlier ones.",
    )
    @action(detail=True, methods=["get", "post"])
    def scan(self, request, pk=None):
        run = self.get_object()
        if request.method == "GET":
            _query(request, NoQuerySerializer)
            body = {k: v for k, v in scans.scan_json(run).items() if k != "findings"}
            return Response(body)
        data = validated(ScanRequestSerializer, request.data)
        with refusals(scans.ScanRefused):
            job_run = scans.request_scan(run, user=request.user, scanners=data.get("scanners"), judge=data.get("judge"))
        body = JobRunSerializer(job_run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[FindingsQuerySerializer], responses=ScanFindingSerializer(many=True))
    @action(detail=True, methods=["get"])
    def findings(self, request, pk=None):
        """The run's findings, by task and repeat: each names its rollout, the transcript step and the model call
        it is at, the tool, and the evidence (a bounded excerpt of what was recorded)."""
        run = self.get_object()
        data = _query(request, FindingsQuerySerializer, also=self._page_parameters())
        page = self.paginate_queryset(scans.run_findings(run, data.get("scanner")))
        return self.get_paginated_response(ScanFindingSerializer(page, many=True).data)

    @extend_schema(parameters=[TaskRowsQuerySerializer], responses=EvalRunTaskSerializer(many=True))
    @action(detail=True, methods=["get"])
    def tasks(self, request, pk=None):
        """The run's per-task figures over its repeats."""
        run = self.get_object()
        sort = _query(request, TaskRowsQuerySerializer, also=self._page_parameters())["sort"]
        rows = (
            EvalRunTask.objects.filter(run=run)
            .select_related("task__benchmark_category", "revision")
            .annotate(total_tokens=F("input_tokens") + F("output_tokens"))
        )
        if sort == "task":
            rows = rows.order_by("task__external_id")
        else:
            field = F(TASK_ORDER[sort.lstrip("-")])
            # Tasks without a score (mean and std null) come last whichever way, on SQLite and PostgreSQL alike.
            order = field.desc(nulls_last=True) if sort.startswith("-") else field.asc(nulls_last=True)
            rows = rows.order_by(order, "task__external_id")
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(EvalRunTaskSerializer(page, many=True).data)

    @extend_schema(parameters=[RunRolloutsQuerySerializer], responses=RolloutListSerializer(many=True))
    @action(detail=True, methods=["get"])
    def rollouts(self, request, pk=None):
        """The run's rollouts (its samples), filtered as its samples page does; by task and repeat unless sorted."""
        run = self.get_object()
        data = _query(request, RunRolloutsQuerySerializer, also=self._page_parameters())
        rollouts = filter_samples(run.rollouts.select_related("revision__task", "endpoint"), data)
        page = self.paginate_queryset(sorted_samples(rollouts, data["sort"]))
        context = self.get_serializer_context()
        return self.get_paginated_response(RolloutListSerializer(page, many=True, context=context).data)

    def _page_parameters(self) -> set[str]:
        paginator = self.paginator
        names = (getattr(paginator, "page_query_param", None), getattr(paginator, "page_size_query_param", None))
        return {name for name in names if name}

    @extend_schema(
        parameters=[ExportQuerySerializer],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/zip"): OpenApiTypes.BINARY,
        },
        description="A download for papers and notebooks. json: the run's figures and settings (as the run's detail) "
        "and every rollout; csv: a header and one row per rollout (evaluation.exports.CSV_COLUMNS), streamed; hf: "
        "the same rows as a Hugging Face dataset (Parquet and a README.md dataset card), zipped.",
    )
    @action(detail=True, methods=["get"])
    def export(self, request, pk=None):
        run = self.get_object()
        fmt = _query(request, ExportQuerySerializer)["format"]
        disposition = content_disposition_header(True, f"eval-run-{run.pk}.{fmt}")
        if fmt == "hf":
            from ..hf_export import download_response  # pyarrow: loaded when asked for, not at start

            return download_response(run)
        if fmt == "csv":
            response = StreamingHttpResponse(iter_csv(run), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = disposition
            return response
        return Response(run_export(run), headers={"Content-Disposition": disposition})

    @extend_schema(
        parameters=[CompareQuerySerializer],
        responses={200: CompareSerializer, 400: detail_error("EvalRunsNotComparable", "Not the same tasks.")},
        description="The paired comparison of run A with run B over the same benchmark version (or task revisions): "
        "per-task differences, the tasks solved by one only, the mean difference with a paired bootstrap CI and a "
        "sign-flip p-value, per category.",
    )
    @action(detail=False, methods=["get"])
    def compare(self, request):
        data = _query(request, CompareQuerySerializer)
        with refusals(reports.RunsNotComparable):
            figures = reports.compare_runs(data["a"], data["b"])
        return Response(figures)


def _asked_config(run: EvalRun, data: dict) -> dict:
    """The configuration a resume's body asks for: the fields it gives, normalised as runs.run_config does, and the
    run's own for the rest."""
    asked = runs.run_config(
        revisions=data.get("revisions", []),
        endpoint=data.get("endpoint", run.endpoint),
        harness=data.get("harness", run.harness),
        options=data.get("options", run.harness_options),
        limits=data.get("limits", run.limits),
        repeats=data.get("repeats", run.repeats),
        benchmark_version=data.get("benchmark_version", run.benchmark_version),
    )
    given = [key for field, keys in CONFIG_KEYS.items() if field in data for key in keys]
    return {**run.config, **{key: asked[key] for key in given}}


@extend_schema(tags=["evaluation runs"])
class LeaderboardViewSet(viewsets.ViewSet):
    @extend_schema(parameters=[LeaderboardQuerySerializer], responses=LeaderboardSerializer)
    def list(self, request):
        """The latest complete run of each model (endpoint and harness) on a benchmark version, best first. An
        incomplete run never enters."""
        # Not paginated (one entry per model), but `page` is taken as on every list.
        query = _query(request, LeaderboardQuerySerializer, also=("page",), where="for this list")
        version = query["benchmark_version"]
        body = {"benchmark": version.benchmark.name, "version": version.number, "entries": reports.leaderboard(version)}
        return Response(body)


def register(router):
    router.register("eval-runs", EvalRunViewSet, basename="eval-run")
    router.register("leaderboard", LeaderboardViewSet, basename="leaderboard")
