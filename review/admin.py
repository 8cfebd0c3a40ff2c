"""Review rows in the Django admin: read-mostly, since every change belongs to review.services."""

from django.contrib import admin

from .models import (
    BenchmarkCandidate,
    DiagnosisIssue,
    DifficultyFilter,
    DifficultyResult,
    LLMDiagnosis,
    PlantedFlaw,
    QualityRating,
    QualitySample,
    QualitySampleItem,
    ReviewDecision,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Diagnoses and decisions are append-only: the admin may look, not edit."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BenchmarkCandidate)
class BenchmarkCandidateAdmin(ReadOnlyAdmin):
    list_display = ["task", "benchmark", "status", "claimed_by", "claim_expires_at", "updated_at"]
    list_filter = ["benchmark", "status"]
    search_fields = ["task__external_id"]
    raw_id_fields = ["task"]


class IssueInline(admin.TabularInline):
    model = DiagnosisIssue
    extra = 0
    can_delete = False
    fields = ["component", "path", "path_missing", "severity", "problem"]
    readonly_fields = fields


@admin.register(LLMDiagnosis)
class LLMDiagnosisAdmin(ReadOnlyAdmin):
    list_display = ["candidate", "revision", "endpoint_name", "prompt_version", "created_at"]
    inlines = [IssueInline]


@admin.register(ReviewDecision)
class ReviewDecisionAdmin(ReadOnlyAdmin):
    list_display = ["candidate", "decision", "reviewer", "created_at"]
    list_filter = ["decision"]


class QualityItemInline(admin.TabularInline):
    model = QualitySampleItem
    extra = 0
    can_delete = False
    fields = ["position", "revision"]
    readonly_fields = fields


@admin.register(QualitySample)
class QualitySampleAdmin(ReadOnlyAdmin):
    """Drawn through review.quality (the pages, the API, `quality_sample`): the seed and pool must match the items."""

    list_display = ["name", "pool_description", "requested_size", "pool_size", "seed", "created_by", "created_at"]
    search_fields = ["name"]
    inlines = [QualityItemInline]


@admin.register(QualityRating)
class QualityRatingAdmin(ReadOnlyAdmin):
    list_display = [
        "item",
        "reviewer",
        "reasonableness",
        "feasibility",
        "resource_consistency",
        "verification",
        "updated_at",
    ]
    list_filter = ["item__sample"]
    raw_id_fields = ["item"]


class DifficultyResultInline(admin.TabularInline):
    model = DifficultyResult
    extra = 0
    can_delete = False
    fields = ["candidate", "revision", "strong_mean", "strong_n", "small_mean", "small_n", "verdict"]
    readonly_fields = fields


@admin.register(DifficultyFilter)
class DifficultyFilterAdmin(ReadOnlyAdmin):
    """Started from the benchmark's difficulty page, the API or `difficulty_filter` (review.difficulty)."""

    list_display = ["id", "benchmark", "strong_endpoint", "small_endpoint", "n", "status", "created_at"]
    list_filter = ["benchmark", "status"]
    inlines = [DifficultyResultInline]


@admin.register(PlantedFlaw)
class PlantedFlawAdmin(ReadOnlyAdmin):
    """Planted from the benchmark's planted-flaws page, the API or `plant_flaws` (review.planting)."""

    list_display = ["id", "benchmark", "kind", "candidate", "source_candidate", "component", "path", "created_at"]
    list_filter = ["benchmark", "kind"]
    raw_id_fields = ["candidate", "source_candidate", "source_revision"]
