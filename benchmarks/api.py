"""Frozen benchmark versions over the API (viewer role). Benchmarks themselves, and freezing, are the review's
(review.api), since what a version pins is the review's decision.

    GET  /api/benchmark-versions/[{id}/]        ?benchmark=NAME
    GET  /api/benchmark-versions/{id}/export/   ?format=tar.gz|zip: the version in the ClawGym folder format;
                                                ?format=hf: as a Hugging Face dataset folder, zipped
"""

from django.db.models import Count
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError

from lib.api_filters import QueryFilterMixin

from .exporting import ARCHIVE_FORMATS, CONTENT_TYPES, download_response
from .models import BenchmarkVersion
from .serializers import BenchmarkVersionFilterSerializer, BenchmarkVersionSerializer


class BenchmarkVersionViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = BenchmarkVersionSerializer
    filter_serializer_class = BenchmarkVersionFilterSerializer

    def get_queryset(self):
        return (
            BenchmarkVersion.objects.select_related("benchmark", "created_by")
            .annotate(task_count=Count("pins"))
            .order_by("benchmark__name", "-number")  # an aggregate drops Meta.ordering
        )

    def perform_content_negotiation(self, request, force=False):
        if self.action == "export":
            # `?format=` names the archive here, not a renderer: errors are answered in JSON.
            renderer = self.get_renderers()[0]
            return renderer, renderer.media_type
        return super().perform_content_negotiation(request, force)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                enum=[*ARCHIVE_FORMATS, "hf"],
                default=ARCHIVE_FORMATS[0],
                description="a .tar.gz or a .zip; hf: a Hugging Face dataset folder (Parquet + dataset card), zipped",
            ),
        ],
        responses={(200, CONTENT_TYPES[fmt]): OpenApiTypes.BINARY for fmt in ARCHIVE_FORMATS},
        description="The frozen version in the ClawGym folder format (benchmark.json and one task folder per "
        "pinned revision, under one top folder), streamed; the same bytes every time. format=hf: one row per task in "
        "Parquet and a README.md dataset card, zipped under one top folder.",
    )
    @action(detail=True, methods=["get"])
    def export(self, request, pk=None):
        fmt = request.query_params.get("format", ARCHIVE_FORMATS[0])
        if fmt == "hf":
            from .hf_export import download_response as hf_download  # pyarrow: loaded when asked for, not at start

            return hf_download(self.get_object())
        if fmt not in ARCHIVE_FORMATS:
            raise ValidationError({"format": f"{fmt!r} is not one of {', '.join(ARCHIVE_FORMATS)}, hf"})
        return download_response(self.get_object(), fmt)

    # Defined after `export`: in a class body, a method named `list` hides the builtin from the lines below it.
    @extend_schema(parameters=[BenchmarkVersionFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


def register(router):
    router.register("benchmark-versions", BenchmarkVersionViewSet, basename="benchmark-version")
