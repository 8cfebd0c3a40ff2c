"""Django admin for the catalog. Revisions and blobs are immutable history: shown, never edited here.

Task content changes go through tasks.services (each change a new revision); the admin edits only a task's
status and categories, and the taxonomy.
"""

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import Count
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import format_html

from .models import (
    BenchmarkCategory,
    Blob,
    CategoryProposal,
    RevisionFile,
    ScenarioCategory,
    ScenarioSubcategory,
    Task,
    TaskRevision,
)
from .services import set_task_status


class ReadOnlyAdminMixin:
    """Viewing only: no add, change or delete, for anyone (superusers included)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RevisionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = TaskRevision
    fk_name = "task"
    fields = ["number_link", "author", "message", "content_hash", "created_at"]
    readonly_fields = fields
    extra = 0
    show_change_link = False
    ordering = ["-number"]

    def get_queryset(self, request):
        # The inline shows who and when, not the content: leave the big columns in the database.
        return super().get_queryset(request).select_related("author_user").defer("instruction", "metadata", "rubric")

    @admin.display(description="revision")
    def number_link(self, obj):
        url = reverse("admin:tasks_taskrevision_change", args=[obj.pk])
        return format_html('<a href="{}">r{}</a>', url, obj.number)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["external_id", "title", "benchmark_category", "status", "source", "revision_number", "updated_at"]
    list_filter = ["status", "source", "benchmark_category", "scenario_category"]
    search_fields = ["external_id", "title"]
    list_select_related = ["benchmark_category", "current_revision"]
    list_per_page = 50
    # Task content lives in revisions and the categories follow the current revision's metadata:
    # here only the status may change.
    fields = [
        "external_id",
        "title",
        "status",
        "source",
        "benchmark_category",
        "scenario_category",
        "scenario_subcategory",
        "current_revision",
        "site_link",
        "created_at",
        "updated_at",
    ]
    readonly_fields = [f for f in fields if f != "status"]
    inlines = [RevisionInline]
    # No full-table COUNT(*) for every changelist page at 20,000+ tasks.
    show_full_result_count = False

    def has_add_permission(self, request):
        return False  # tasks come from imports, synthesis or the API, which make their first revision

    def save_model(self, request, obj, form, change):
        if "status" in form.changed_data:
            set_task_status(obj, form.cleaned_data["status"], user=request.user)

    @admin.display(description="rev", ordering="current_revision__number")
    def revision_number(self, obj):
        return f"r{obj.current_revision.number}" if obj.current_revision else "—"

    @admin.display(description="page")
    def site_link(self, obj):
        url = reverse("tasks:detail", args=[obj.external_id])
        return format_html('<a href="{}">Open the task page</a>', url)


class RevisionFileInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RevisionFile
    fields = ["role", "path", "size", "blob"]
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("blob").defer("blob__data")

    @admin.display(description="bytes")
    def size(self, obj):
        return obj.blob.size


@admin.register(TaskRevision)
class TaskRevisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "number", "author", "message", "created_at"]
    list_select_related = ["task", "author_user"]
    search_fields = ["task__external_id", "message", "content_hash"]
    list_filter = ["author_stage"]
    inlines = [RevisionFileInline]
    show_full_result_count = False
    fields = [
        "task",
        "number",
        "instruction",
        "metadata",
        "entry_extra",
        "checker_entry",
        "rubric",
        "code_weight",
        "parent",
        "author_user",
        "author_stage",
        "message",
        "content_hash",
        "created_at",
    ]
    readonly_fields = fields


@admin.register(RevisionFile)
class RevisionFileAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["path", "role", "revision", "size"]
    list_filter = ["role"]
    search_fields = ["path", "revision__task__external_id", "blob__sha256"]
    fields = ["revision", "role", "path", "blob", "size"]
    readonly_fields = fields
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("revision__task", "blob").defer("blob__data")

    @admin.display(description="bytes", ordering="blob__size")
    def size(self, obj):
        return obj.blob.size


@admin.register(Blob)
class BlobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # Never the data field: blobs can be megabytes of anything, shown as a size only.
    list_display = ["sha256", "human_size", "created_at"]
    search_fields = ["sha256"]
    fields = ["sha256", "human_size", "created_at"]
    readonly_fields = fields
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).defer("data")

    @admin.display(description="size", ordering="size")
    def human_size(self, obj):
        return f"{filesizeformat(obj.size)} ({obj.size} B)"


@admin.register(BenchmarkCategory)
class BenchmarkCategoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "order", "task_count"]
    list_editable = ["order"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name", "slug"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_tasks=Count("tasks"))

    @admin.display(description="tasks", ordering="n_tasks")
    def task_count(self, obj):
        return obj.n_tasks


class ScenarioSubcategoryInline(admin.TabularInline):
    model = ScenarioSubcategory
    fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    # Short descriptions: a tabular row per subcategory stays readable.
    formfield_overrides = {models.TextField: {"widget": forms.Textarea(attrs={"rows": 2, "cols": 60})}}
    extra = 1


@admin.register(ScenarioCategory)
class ScenarioCategoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "subcategory_count"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name", "slug", "subcategories__name"]
    inlines = [ScenarioSubcategoryInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_sub=Count("subcategories"))

    @admin.display(description="subcategories", ordering="n_sub")
    def subcategory_count(self, obj):
        return obj.n_sub


@admin.register(ScenarioSubcategory)
class ScenarioSubcategoryAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "slug"]
    list_filter = ["category"]
    list_select_related = ["category"]
    search_fields = ["name", "slug"]


@admin.register(CategoryProposal)
class CategoryProposalAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Shown only: proposals are decided on /tasks/categories/ (each decision a new revision of the task)."""

    list_display = ["__str__", "task", "category", "status", "endpoint_name", "decided_by", "created_at"]
    list_filter = ["status", "category", "endpoint_name"]
    list_select_related = ["task", "category", "decided_by"]
    search_fields = ["task__external_id", "reason", "error"]
    show_full_result_count = False
    fields = [
        "task",
        "revision",
        "category_before",
        "category",
        "reason",
        "status",
        "error",
        "endpoint_name",
        "prompt_version",
        "model_call",
        "job_run",
        "decided_category",
        "decided_revision",
        "decision_note",
        "decided_by",
        "decided_at",
        "created_at",
    ]
    readonly_fields = fields
