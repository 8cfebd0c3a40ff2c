"""How well the review works, over the API: the diagnosis's precision and the planted flaws. Reads of the figures
need the viewer role; planting, and seeing which candidates are planted, the admin role.

    GET  /api/diagnosis-precision/?benchmark=NAME   overall, by component, severity, model, prompt version and
                                                    model with prompt: {precision, valid, n, low, high}
    GET  /api/planted-flaws/[{id}/]                 admin: ?benchmark=NAME&kind=K: each plant with its outcome
    POST /api/planted-flaws/                        admin: {"benchmark", "kinds": [...], "count", "seed"?,
                                                    "diagnose"?}: 201 + the plants
    GET  /api/planted-flaws/report/?benchmark=NAME  per kind and per reviewer: named by the LLM, caught by reviewers

The reveal after a decision is the "planted" object of POST /api/candidates/{id}/decide/ (review.api).
"""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from accounts.roles import ADMIN, has_role
from benchmarks.models import Benchmark
from jobs.api_actions import validated
from jobs.engine import JobEngineError
from lib.api_filters import list_query

from . import planting, precision
from .models import PlantedFlaw
from .serializers import DecisionSerializer

Kind = PlantedFlaw.Kind


# --- serializers -----------------------------------------------------------------------------------------------


class BenchmarkQuerySerializer(serializers.Serializer):
    benchmark = serializers.CharField(max_length=120, help_text="the benchmark's name")


class PlantFilterSerializer(serializers.Serializer):
    benchmark = serializers.CharField(max_length=120, required=False, help_text="the benchmark's name")
    kind = serializers.ChoiceField(choices=Kind.choices, required=False)


class PrecisionCellSerializer(serializers.Serializer):
    precision = serializers.FloatField(allow_null=True, help_text="valid / n; null when n is 0")
    valid = serializers.IntegerField()
    n = serializers.IntegerField(help_text="issues with a verdict")
    low = serializers.FloatField(allow_null=True, help_text="95% Wilson interval")
    high = serializers.FloatField(allow_null=True)


class ModelPromptCellSerializer(PrecisionCellSerializer):
    model = serializers.CharField()
    prompt_version = serializers.CharField()


@extend_schema_serializer(many=False)  # one object, though it answers on the router's `list`
class PrecisionReportSerializer(serializers.Serializer):
    benchmark = serializers.CharField()
    overall = PrecisionCellSerializer()
    by_component = serializers.DictField(child=PrecisionCellSerializer())
    by_severity = serializers.DictField(child=PrecisionCellSerializer())
    by_model = serializers.DictField(child=PrecisionCellSerializer())
    by_prompt_version = serializers.DictField(child=PrecisionCellSerializer())
    by_model_prompt = ModelPromptCellSerializer(many=True)


class PlantSerializer(serializers.Serializer):
    """A plant with what the LLM and the reviewers made of it (review.planting.Outcome)."""

    id = serializers.IntegerField(source="plant.id")
    benchmark = serializers.CharField(source="plant.benchmark.name")
    candidate = serializers.IntegerField(source="plant.candidate_id")
    task = serializers.CharField(source="plant.candidate.task.external_id")
    kind = serializers.ChoiceField(source="plant.kind", choices=Kind.choices)
    component = serializers.CharField(source="plant.component")
    path = serializers.CharField(source="plant.path")
    change = serializers.CharField(source="plant.change")
    source_task = serializers.CharField(source="plant.source_candidate.task.external_id", default=None)
    source_revision = serializers.IntegerField(source="plant.source_revision.number", default=None)
    llm = serializers.CharField(help_text="named, not_named or not_diagnosed")
    reviewers = serializers.CharField(help_text="caught (rejected or fixed), missed (accepted) or pending")
    by_reviewer = serializers.DictField(child=serializers.CharField(), help_text="{username: caught or missed}")
    created_at = serializers.DateTimeField(source="plant.created_at")


class PlantRequestSerializer(serializers.Serializer):
    benchmark = serializers.CharField(max_length=120)
    kinds = serializers.ListField(
        child=serializers.CharField(max_length=24),
        allow_empty=False,
        max_length=4,
        help_text=f"planted in turn; any of {', '.join(Kind.values)}",
    )
    count = serializers.IntegerField(min_value=1, max_value=planting.MAX_PLANTS)
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1, allow_null=True, default=None)
    diagnose = serializers.BooleanField(required=False, default=True, help_text="queue each copy's diagnosis")


class KindTallySerializer(serializers.Serializer):
    total = serializers.IntegerField()
    diagnosed = serializers.IntegerField()
    caught_by_llm = serializers.IntegerField(help_text="a diagnosis of the planted revision names its component")
    llm_share = serializers.FloatField(allow_null=True, help_text="caught_by_llm / diagnosed")
    decided = serializers.IntegerField()
    caught_by_reviewers = serializers.IntegerField(help_text="rejected or fixed")
    reviewer_share = serializers.FloatField(allow_null=True, help_text="caught_by_reviewers / decided")


class ReviewerKindSerializer(serializers.Serializer):
    decided = serializers.IntegerField()
    caught = serializers.IntegerField()
    share = serializers.FloatField(allow_null=True)


class ReviewerTallySerializer(ReviewerKindSerializer):
    by_kind = serializers.DictField(child=ReviewerKindSerializer())


class PlantedReportSerializer(KindTallySerializer):
    benchmark = serializers.CharField()
    by_kind = serializers.DictField(child=KindTallySerializer())
    by_reviewer = serializers.DictField(child=ReviewerTallySerializer())


class RevealSerializer(serializers.Serializer):
    """What a planted candidate was, shown to its reviewer right after their accept or reject."""

    kind = serializers.ChoiceField(choices=Kind.choices)
    kind_label = serializers.CharField()
    component = serializers.CharField()
    path = serializers.CharField()
    change = serializers.CharField()
    source_task = serializers.CharField(allow_null=True)
    source_revision = serializers.IntegerField(allow_null=True)
    outcome = serializers.CharField(help_text="caught (rejected or fixed), missed (accepted) or pending")
    message = serializers.CharField()


class DecisionRevealSerializer(DecisionSerializer):
    planted = RevealSerializer(
        required=False, help_text="only for a planted flaw: what it was (review.planting), after an accept or reject"
    )

    class Meta(DecisionSerializer.Meta):
        fields = [*DecisionSerializer.Meta.fields, "planted"]


def decision_body(row, user) -> dict:
    """The decide endpoint's answer: the decision, and for a planted flaw what it was."""
    body = dict(DecisionSerializer(row).data)
    reveal = planting.revelation(row.candidate, user)
    if reveal is not None:
        body["planted"] = reveal
    return body


# --- views -----------------------------------------------------------------------------------------------------


def _benchmark(name: str) -> Benchmark:
    found = Benchmark.objects.filter(name=name).first()
    if found is None:
        raise Http404(f"no benchmark is named {name!r}")
    return found


class DiagnosisPrecisionViewSet(viewsets.ViewSet):
    @extend_schema(parameters=[BenchmarkQuerySerializer], responses={200: PrecisionReportSerializer})
    def list(self, request):
        """The valid share of the benchmark's diagnosed issues that reviewers judged (review.precision)."""
        benchmark = _benchmark(list_query(request, BenchmarkQuerySerializer)["benchmark"])
        return Response({"benchmark": benchmark.name, **precision.benchmark_precision(benchmark)})


class PlantedFlawViewSet(viewsets.ViewSet):
    write_role = ADMIN

    def _admin_only(self, request):
        if not has_role(request.user, ADMIN):
            # Which candidates are planted is the admins' to know: reviewers would see them coming.
            self.permission_denied(request, message="which candidates are planted is for admins")

    def _plants(self, **filters):
        plants = PlantedFlaw.objects.filter(**filters).select_related(
            "benchmark", "candidate__task", "source_candidate__task", "source_revision"
        )
        return planting.outcomes(plants.order_by("-created_at", "-id"))

    @extend_schema(parameters=[PlantFilterSerializer], responses={200: PlantSerializer(many=True)})
    def list(self, request):
        self._admin_only(request)
        query = list_query(request, PlantFilterSerializer)
        filters = {}
        if query.get("benchmark"):
            filters["benchmark"] = _benchmark(query["benchmark"])
        if query.get("kind"):
            filters["kind"] = query["kind"]
        return Response(PlantSerializer(self._plants(**filters), many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)], responses=PlantSerializer
    )
    def retrieve(self, request, pk=None):
        self._admin_only(request)
        found = self._plants(pk=pk) if str(pk).isdigit() and len(str(pk)) <= 18 else []
        if not found:
            raise Http404("no such planted flaw")
        return Response(PlantSerializer(found[0]).data)

    @extend_schema(request=PlantRequestSerializer, responses={201: PlantSerializer(many=True)})
    def create(self, request):
        data = validated(PlantRequestSerializer, request.data)
        benchmark = _benchmark(data["benchmark"])
        try:
            plants = planting.plant_flaws(
                benchmark, data["kinds"], data["count"], user=request.user, seed=data["seed"], diagnose=data["diagnose"]
            )
        except planting.PlantError as exc:
            raise ValidationError({"detail": [str(exc)]}) from None
        except JobEngineError as exc:
            return Response(
                {"detail": f"the flaws were planted but their checks did not start: {exc}"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        body = PlantSerializer(self._plants(pk__in=[p.pk for p in plants]), many=True).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[BenchmarkQuerySerializer], responses={200: PlantedReportSerializer})
    @action(detail=False, methods=["get"])
    def report(self, request):
        """Per flaw kind and per reviewer: how many the LLM named and the reviewers caught (review.planting)."""
        benchmark = _benchmark(validated(BenchmarkQuerySerializer, request.query_params)["benchmark"])
        return Response({"benchmark": benchmark.name, **planting.planted_report(benchmark)})


def register(router):
    router.register("diagnosis-precision", DiagnosisPrecisionViewSet, basename="diagnosis-precision")
    router.register("planted-flaws", PlantedFlawViewSet, basename="planted-flaw")
