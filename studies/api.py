"""Studies over the API. Reads need the viewer role; starting and cancelling the admin role.

GET  /api/studies/                  ?kind=&status=   newest first
POST /api/studies/                  {kind, params: {...the kind's}, name?}: 201 + the study (`study show --json`)
GET  /api/studies/{id}/             the `study show --json` shape
POST /api/studies/{id}/cancel/      cancel it and its unfinished evaluation runs: 200 + the study
"""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from jobs.api_actions import refusals, validated
from lib.api_filters import QueryFilterMixin

from .kinds import KINDS, StudyError
from .models import Study
from .services import cancel_study, start_study, study_json


class StudyListSerializer(serializers.ModelSerializer):
    class Meta:
        model = Study
        fields = ["id", "kind", "name", "status", "created_at", "finished_at"]


class StudyDetailSerializer(serializers.Serializer):
    """The `study show --json` shape."""

    study = serializers.IntegerField()
    kind = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    error = serializers.CharField()
    params = serializers.JSONField()
    cells = serializers.JSONField()
    best = serializers.JSONField(allow_null=True)
    comparisons = serializers.JSONField()
    missing = serializers.ListField(child=serializers.CharField())


class StartStudySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(KINDS))
    params = serializers.DictField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class StudyFilterSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(KINDS), required=False)
    status = serializers.ChoiceField(choices=Study.Status.choices, required=False)

    def filter(self, queryset):
        return queryset.filter(**{key: value for key, value in self.validated_data.items() if value})


@extend_schema(tags=["studies"])
class StudyViewSet(QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Studies: grids over one parameter whose cells are datasets, training runs and evaluation runs."""

    queryset = Study.objects.all()
    serializer_class = StudyListSerializer
    filter_serializer_class = StudyFilterSerializer

    @extend_schema(parameters=[StudyFilterSerializer], description="Studies, newest first (?kind=, ?status=).")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=StudyDetailSerializer, description="A study: its cells, the best cell, the comparisons.")
    def retrieve(self, request, pk=None):
        return Response(study_json(self.get_object()))

    @extend_schema(
        request=StartStudySerializer,
        responses={201: StudyDetailSerializer},
        description="Start a study of a kind with its parameters (admin): its cells, and its first step queued.",
    )
    def create(self, request):
        data = validated(StartStudySerializer, request.data)
        with refusals(StudyError):
            study = start_study(kind=data["kind"], params=data["params"], user=request.user, name=data["name"])
        return Response(study_json(study), status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses=StudyDetailSerializer,
        description="Cancel a study and its unfinished evaluation runs (admin).",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        study = cancel_study(self.get_object(), user=request.user)
        return Response(study_json(study))


def register(router):
    router.register("studies", StudyViewSet, basename="study")
