"""JobRun in the Django admin: read-only (runs change only through the engine and jobs.services)."""

from django.contrib import admin, messages

from accounts.roles import ADMIN, has_role

from .models import JobRun
from .services import cancel_job


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "subject",
        "status",
        "failed_items",
        "progress",
        "queue",
        "engine",
        "created_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "kind", "engine", "queue", "created_at")
    search_fields = ("=id", "kind", "subject", "message")
    list_select_related = ("created_by",)
    date_hierarchy = "created_at"
    raw_id_fields = ("created_by", "parent")
    actions = ["cancel_selected"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "kind",
                    "subject",
                    "subject_url",
                    "status",
                    "queue",
                    "engine",
                    "params",
                    "created_by",
                    "parent",
                ]
            },
        ),
        ("Progress", {"fields": ["progress_done", "progress_total", "message", "cancel_requested"]}),
        ("Outcome", {"fields": ["failed_items", "result", "error", "log_tail"]}),
        ("Worker", {"fields": ["attempts", "worker", "created_at", "started_at", "heartbeat_at", "finished_at"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in JobRun._meta.fields]

    def has_add_permission(self, request):
        return False  # jobs start with jobs.enqueue, never from a form

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="Progress")
    def progress(self, run):
        return f"{run.progress_done}/{run.progress_total}" if run.progress_total else str(run.progress_done or "")

    def has_cancel_permission(self, request):
        return has_role(request.user, ADMIN)  # the same rule as the Cancel button on the job page

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_selected(self, request, queryset):
        cancelled = requested = 0
        for run in queryset.exclude(status__in=JobRun.FINISHED):
            run = cancel_job(run, user=request.user)
            if run.status == JobRun.Status.CANCELLED:
                cancelled += 1
            elif run.cancel_requested:
                requested += 1
        self.message_user(request, f"{cancelled} cancelled, {requested} asked to stop.", messages.SUCCESS)
