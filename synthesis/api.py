"""Synthesis over the API. Reads need the viewer role; starting, resuming and cancelling batches, importing seeds,
overriding a skill's label, annotating and assessing the admin role. Serializers validate; synthesis.services does
the work.

    GET  /api/synthesis/batches/                ?status=&route=&preview=   newest first
    POST /api/synthesis/batches/                {route, count | preview: true, generator, judge, seed?, budget_usd?,
                                                budget_tokens?, qa_stages?, options? {operations, supporting,
                                                allow_network}, name?}: 201 + the batch; 200 + "resumed": true when
                                                an earlier batch of the same configuration goes on instead
    GET  /api/synthesis/batches/{id}/           the `synthesize --json` shape, the funnel and the batch's settings
    POST /api/synthesis/batches/{id}/resume/    {budget_usd?, budget_tokens?}: go on (409 when it cannot)
    POST /api/synthesis/batches/{id}/cancel/    409 when it has finished
    GET  /api/synthesis/batches/{id}/report/    the `synthesis_report --json` shape
    GET  /api/synthesis/items/[{id}/]           ?batch=&status=&stage=   one item with its stage results and draft
    GET  /api/synthesis/personas/               ?q=&enabled=
    POST /api/synthesis/personas/import/        multipart `file`: the `import_personas --json` shape
    GET  /api/synthesis/skills/[{name}/]        ?q=&annotated=   each with its latest annotation and label
    POST /api/synthesis/skills/{name}/override/ {synthesizable: true|false|null, reason}
    POST /api/synthesis/skills/annotate/        {skills?: [names], endpoint?}: 202 + the job run
    POST /api/synthesis/skills/import-bundled/  the `import_skills --bundled --json` shape
    GET  /api/quality-assessments/[{id}/]       ?task=&stage=&verdict=   newest first
    POST /api/quality-assessments/assess/       {tasks: [ids] | all: true, stages?, judge?}: 202 + the job run
"""

from django.db.models import Count, Prefetch, Q
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from accounts.roles import ADMIN
from jobs.api_actions import LongRunningActions, Refused, detail_error, refusals, valid, validated
from jobs.serializers import JobRunSerializer
from lib.api_filters import QueryFilterMixin

from . import annotation, batch_plan, batch_report, seed_files, services, skills
from .models import Persona, QualityAssessment, Skill, SkillAnnotation, SynthesisBatch, SynthesisItem
from .qa_checks import QAError
from .serializers.assessments import (
    AssessSerializer,
    QualityAssessmentFilterSerializer,
    QualityAssessmentSerializer,
)
from .serializers.batches import (
    BatchFilterSerializer,
    BatchReportSerializer,
    ItemFilterSerializer,
    ResumeBatchSerializer,
    StartBatchSerializer,
    StartedBatchSerializer,
    SynthesisBatchDetailSerializer,
    SynthesisBatchListSerializer,
    SynthesisItemDetailSerializer,
    SynthesisItemSerializer,
)
from .serializers.seeds import (
    AnnotateSerializer,
    ImportReportSerializer,
    PersonaFilterSerializer,
    PersonaImportSerializer,
    PersonaSerializer,
    SkillFilterSerializer,
    SkillOverrideSerializer,
    SkillSerializer,
)

NOT_QUEUED = detail_error("SynthesisNotQueued", "The job engine did not take the job.")


def _job_response(view, run) -> Response:
    return Response(JobRunSerializer(run, context=view.get_serializer_context()).data, status=status.HTTP_202_ACCEPTED)


# --- batches -----------------------------------------------------------------------------------------------------


@extend_schema(tags=["synthesis"])
class SynthesisBatchViewSet(
    LongRunningActions, QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Synthesis batches: a route, a number of tasks wanted, a generator and a judge endpoint and a seed; its items go
    through the pipeline's stages as jobs. One batch gives the `synthesize --json` figures, its funnel and settings."""

    queryset = SynthesisBatch.objects.select_related("generator", "judge", "created_by")
    filter_serializer_class = BatchFilterSerializer
    write_role = ADMIN
    noun = "batch"
    detail_serializer_class = SynthesisBatchDetailSerializer

    def get_serializer_class(self):
        return SynthesisBatchListSerializer if self.action == "list" else SynthesisBatchDetailSerializer

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action != "list":
            return queryset
        # A list row's counts in the same query (a detail counts them through batch_report.batch_json).
        counts = {name: Count("items", filter=Q(items__status=name)) for name in ("kept", "rejected", "failed")}
        finished = Count("items", filter=Q(items__status__in=SynthesisItem.FINISHED))
        # Meta.ordering does not apply to a query with aggregates: newest first, said again.
        return queryset.annotate(**counts, finished=finished).order_by("-created_at", "-id")

    @extend_schema(parameters=[BatchFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=StartBatchSerializer,
        responses={201: StartedBatchSerializer, 200: StartedBatchSerializer, 503: NOT_QUEUED},
        description="Start a batch (queued as the synthesis.run_batch job). The same configuration as an earlier "
        "batch that was not cancelled (route, count, endpoints, seed, options, QA settings) goes on with that batch "
        'instead (200, "resumed": true): nothing is synthesized twice. `preview`: 5 items through every stage.',
    )
    def create(self, request):
        form = valid(StartBatchSerializer, request.data)
        earlier = set(SynthesisBatch.objects.order_by().values_list("pk", flat=True))
        with refusals(batch_plan.BatchError):
            batch = services.start_batch(user=request.user, **form.batch_settings())
        return self.started(batch, again=batch.pk in earlier, flag="resumed")

    @extend_schema(
        request=ResumeBatchSerializer,
        responses={
            200: SynthesisBatchDetailSerializer,
            409: detail_error("SynthesisBatchNotResumed", "The batch cannot go on (the message says why)."),
            503: NOT_QUEUED,
        },
        description="Go on with the items not finished, retryable failures and items a lost worker left running; "
        "finished items are kept. A budget given replaces the batch's (null: none). A complete batch with nothing "
        "to retry stays complete.",
    )
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        batch = self.get_object()
        if batch.status in (SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING):
            raise Refused(f"batch #{batch.pk} is {batch.status}: it is going on already", status.HTTP_409_CONFLICT)
        budgets = validated(ResumeBatchSerializer, request.data)
        with refusals(batch_plan.BatchError, code=status.HTTP_409_CONFLICT):
            batch = services.resume_batch(batch, user=request.user, **budgets)
        return self.detail_response(batch)

    @extend_schema(
        request=None,
        responses={
            200: SynthesisBatchDetailSerializer,
            409: detail_error("SynthesisBatchFinished", "The batch has finished."),
        },
        description="No item starts another stage (a stage running now finishes and is recorded); unfinished items "
        "stay pending, so the batch can be resumed.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        batch = self.cancellable(self.get_object())
        return self.detail_response(services.cancel_batch(batch, user=request.user))

    @extend_schema(request=None, responses=BatchReportSerializer)
    @action(detail=True, methods=["get"])
    def report(self, request, pk=None):
        """The `synthesis_report --json` shape: the batch's figures, funnel, cost per stage, distributions and where
        its items are."""
        return Response(batch_report.report(self.get_object()))


@extend_schema(tags=["synthesis"])
class SynthesisItemViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    """The items of synthesis batches: one task being made each, with the stage it reached and why it ended; one
    item gives every stage's result (verification rounds with their sanity feedback, QA verdicts) and the draft."""

    queryset = SynthesisItem.objects.select_related("task").order_by("batch_id", "index")
    filter_serializer_class = ItemFilterSerializer

    def get_serializer_class(self):
        return SynthesisItemSerializer if self.action == "list" else SynthesisItemDetailSerializer

    def get_queryset(self):
        queryset = super().get_queryset()
        return queryset.defer("draft") if self.action == "list" else queryset

    @extend_schema(parameters=[ItemFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


# --- seeds -------------------------------------------------------------------------------------------------------


@extend_schema(tags=["synthesis"])
class PersonaViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The personas of the persona route (editable in the admin)."""

    queryset = Persona.objects.all()
    serializer_class = PersonaSerializer
    filter_serializer_class = PersonaFilterSerializer
    write_role = ADMIN

    @extend_schema(parameters=[PersonaFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request={"multipart/form-data": PersonaImportSerializer},
        responses={200: ImportReportSerializer, 400: detail_error("PersonasNotImported", "The file cannot be read.")},
        description="Import a Persona Hub JSONL or plain-text file; the same persona twice is one row (unchanged). "
        "A line that cannot be used is in `failed`, naming its line; the others are imported.",
    )
    @action(detail=False, methods=["post"], url_path="import", parser_classes=[MultiPartParser, FormParser])
    def import_file(self, request):
        upload = validated(PersonaImportSerializer, request.data)["file"]
        with refusals(seed_files.SeedError):
            report = services.import_personas(upload, source=upload.name)
        return Response(report.as_dict())


@extend_schema(tags=["synthesis"])
class SkillViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Agent skills (SKILL.md folders) for the skill route, each with its latest annotation and the label the route
    follows (the admin's override, else the annotation's)."""

    serializer_class = SkillSerializer
    filter_serializer_class = SkillFilterSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    write_role = ADMIN

    def get_queryset(self):
        latest = SkillAnnotation.objects.order_by("skill", "-created_at", "-id")
        return Skill.objects.select_related("override_by").prefetch_related(Prefetch("annotations", queryset=latest))

    @extend_schema(parameters=[SkillFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=SkillOverrideSerializer, responses=SkillSerializer)
    @action(detail=True, methods=["post"])
    def override(self, request, name=None):
        """Set (true/false, with a reason) or clear (null) the admin's decision over the annotation's label."""
        skill = self.get_object()
        data = validated(SkillOverrideSerializer, request.data)
        services.set_override(skill, data["synthesizable"], reason=data.get("reason", ""), user=request.user)
        return Response(
            SkillSerializer(self.get_queryset().get(pk=skill.pk), context=self.get_serializer_context()).data
        )

    @extend_schema(
        request=AnnotateSerializer,
        responses={
            202: JobRunSerializer,
            400: detail_error("AnnotationNotStarted", "No endpoint can annotate."),
            503: NOT_QUEUED,
        },
        description="Annotate the skills named (or every skill), one model call each, as the synthesis."
        "annotate_skills job.",
    )
    @action(detail=False, methods=["post"])
    def annotate(self, request):
        data = validated(AnnotateSerializer, request.data)
        with refusals(annotation.AnnotationError):
            run = services.start_annotation(
                user=request.user, endpoint_name=data.get("endpoint"), skill_ids=data.get("skills")
            )
        return _job_response(self, run)

    @extend_schema(
        request=None,
        responses={
            200: ImportReportSerializer,
            400: detail_error("SkillsNotImported", "The harness's skills are not installed."),
        },
        description="Import the skills bundled with the installed OpenClaw harness (`import_skills --bundled`).",
    )
    @action(detail=False, methods=["post"], url_path="import-bundled")
    def import_bundled(self, request):
        with refusals(skills.SkillImportError):
            report = services.import_skills(bundled=True)
        return Response(report.as_dict())


# --- quality assessments -----------------------------------------------------------------------------------------


@extend_schema(tags=["synthesis"])
class QualityAssessmentViewSet(
    QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Quality-assessment verdicts of task revisions (synthesized or not), each with its reason; newest first. The
    latest per revision and stage is the one that counts."""

    queryset = QualityAssessment.objects.select_related("revision__task", "created_by").order_by("-created_at", "-id")
    serializer_class = QualityAssessmentSerializer
    filter_serializer_class = QualityAssessmentFilterSerializer
    write_role = ADMIN

    @extend_schema(parameters=[QualityAssessmentFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=AssessSerializer,
        responses={
            202: JobRunSerializer,
            400: detail_error("AssessmentNotStarted", "No judge for the stages asked."),
            503: NOT_QUEUED,
        },
        description="Assess tasks (their current revisions) with the QA stages, as the synthesis.assess_tasks job "
        "(what `assess_tasks` runs): the verdicts are stored and listed here.",
    )
    @action(detail=False, methods=["post"])
    def assess(self, request):
        data = validated(AssessSerializer, request.data)
        with refusals(QAError):
            run = services.start_assessment(
                user=request.user,
                task_ids=None if data["all"] else data["tasks"],
                stages=data.get("stages"),
                judge=data.get("judge"),
            )
        return _job_response(self, run)


def register(router):
    router.register("synthesis/batches", SynthesisBatchViewSet, basename="synthesis-batch")
    router.register("synthesis/items", SynthesisItemViewSet, basename="synthesis-item")
    router.register("synthesis/personas", PersonaViewSet, basename="synthesis-persona")
    router.register("synthesis/skills", SkillViewSet, basename="synthesis-skill")
    router.register("quality-assessments", QualityAssessmentViewSet, basename="quality-assessment")
