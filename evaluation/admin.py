"""Django admin for rollouts: records of what agents did, shown and deletable, never edited (services change them)."""

from django.contrib import admin

from .models import EvalRun, EvalRunTask, Rollout, RolloutFile, RolloutScore, SandboxSlot, Trajectory


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Rollout)
class RolloutAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "revision",
        "endpoint",
        "harness",
        "repeat_index",
        "status",
        "exit_reason",
        "score",
        "attempt",
        "created_at",
    ]
    list_filter = ["status", "outcome", "harness", "exit_reason"]
    search_fields = ["revision__task__external_id", "endpoint__name", "group"]
    list_select_related = ["revision__task", "endpoint"]


@admin.register(RolloutFile)
class RolloutFileAdmin(ReadOnlyAdmin):
    list_display = ["rollout", "path", "change", "kind", "size"]
    list_filter = ["change", "kind"]


@admin.register(Trajectory)
class TrajectoryAdmin(ReadOnlyAdmin):
    list_display = ["rollout", "index", "reward", "excluded", "exclusion_reason", "created_at"]
    list_filter = ["excluded"]


@admin.register(SandboxSlot)
class SandboxSlotAdmin(admin.ModelAdmin):
    """A slot stuck with a holder that is gone for good can be freed here (clear its holder)."""

    list_display = ["host", "slot", "holder", "expires_at"]


@admin.register(EvalRun)
class EvalRunAdmin(ReadOnlyAdmin):
    """Runs change through their pages, the API and `evaluate` (evaluation.services.runs): shown here, never edited."""

    list_display = [
        "id",
        "name",
        "endpoint",
        "harness",
        "benchmark_version",
        "repeats",
        "status",
        "overall_mean",
        "rollouts_finished",
        "rollouts_total",
        "created_at",
    ]
    list_filter = ["status", "harness"]
    search_fields = ["name", "endpoint__name"]
    list_select_related = ["endpoint", "benchmark_version__benchmark"]


@admin.register(EvalRunTask)
class EvalRunTaskAdmin(ReadOnlyAdmin):
    list_display = ["run", "task", "revision", "n", "mean", "std", "passes", "finished"]
    list_select_related = ["task", "revision__task"]
    search_fields = ["task__external_id"]


@admin.register(RolloutScore)
class RolloutScoreAdmin(ReadOnlyAdmin):
    list_display = ["rollout", "kind", "revision", "status", "score", "created_by", "created_at"]
    list_filter = ["kind", "status"]
    list_select_related = ["revision__task", "created_by"]
