"""Django admin for rollouts: records of what agents did, shown and deletable, never edited (services change them)."""

from django.contrib import admin

from .models import Rollout, RolloutFile, SandboxSlot, Trajectory


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Rollout)
class RolloutAdmin(ReadOnlyAdmin):
    list_display = ["id", "revision", "endpoint", "harness", "repeat_index", "status", "exit_reason", "score",
                    "attempt", "created_at"]  # fmt: skip
    list_filter = ["status", "harness", "exit_reason"]
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
