"""What the benchmarks API shows and accepts (benchmarks.api; review.api's benchmark actions answer with these too)."""

from django.urls import reverse
from rest_framework import serializers

from .exporting import ARCHIVE_FORMATS
from .models import Benchmark, BenchmarkVersion


class BenchmarkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Benchmark
        fields = [
            "id",
            "name",
            "description",
            "lazy_tolerance",
            "difficulty_strong_min",
            "difficulty_small_max",
            "difficulty_margin",
            "created_at",
        ]
        # The difficulty thresholds change through POST /api/benchmarks/{id}/difficulty-thresholds/.
        read_only_fields = ["id", "difficulty_strong_min", "difficulty_small_max", "difficulty_margin", "created_at"]


class BenchmarkVersionSerializer(serializers.ModelSerializer):
    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    revisions = serializers.SerializerMethodField()
    task_count = serializers.SerializerMethodField()
    downloads = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkVersion
        fields = [
            "id",
            "benchmark",
            "number",
            "frozen_at",
            "created_by",
            "note",
            "task_count",
            "revisions",
            "downloads",
        ]

    def get_task_count(self, version) -> int:
        counted = getattr(version, "task_count", None)  # annotated by the viewset's queryset
        return counted if counted is not None else version.pins.count()

    def get_downloads(self, version) -> dict[str, str]:
        """The export URL of each archive format."""
        path = reverse("benchmark-version-export", args=[version.pk])
        request = self.context.get("request")
        url = request.build_absolute_uri(path) if request is not None else path
        return {fmt: f"{url}?format={fmt}" for fmt in ARCHIVE_FORMATS}

    def get_revisions(self, version) -> list[dict]:
        return [
            {"task": pin.revision.task.external_id, "revision": pin.revision.number, "revision_id": pin.revision_id}
            for pin in version.pins.select_related("revision__task").order_by("revision__task__external_id")
        ]


class BenchmarkVersionFilterSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, help_text="benchmark name")

    def filter(self, queryset):
        name = self.validated_data.get("benchmark")
        return queryset.filter(benchmark__name=name) if name else queryset
