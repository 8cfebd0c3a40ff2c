"""Django admin for the LLM gateway. Calls are history: shown, never edited. Keys never appear (only their variable)."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import EndpointLease, ModelCall, ModelEndpoint, ProxySession


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "api_style", "base_url", "api_key_env", "max_concurrent", "enabled"]
    list_filter = ["api_style", "enabled"]
    search_fields = ["name", "model", "base_url"]
    readonly_fields = [
        "served_at",
        "served_key_env",
    ]  # ClawGym's own registration writes it: a served key goes to that address only

    def save_model(self, request, obj, form, change):
        obj.full_clean()  # roles and sampling are checked in the model
        super().save_model(request, obj, form, change)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "created_at",
        "purpose",
        "endpoint_name",
        "subject",
        "input_tokens",
        "output_tokens",
        "latency_ms",
        "cost",
        "error",
    ]
    list_filter = ["purpose", "endpoint_name", "api", "stream", "answer_state"]
    search_fields = ["subject", "error"]
    date_hierarchy = "created_at"
    # A body may be as large as CLAWGYM_MAX_RESPONSE_BYTES: shown on the call's own page (in part when large), never
    # loaded here, not even for a list of calls.
    exclude = ["request_part", "request_base", "request_shared", "request_inherited", "response"]
    readonly_fields = ["bodies"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("request_part", "response")

    @admin.display(description="Request and response")
    def bodies(self, call):
        return format_html('<a href="{}">on the model call\'s page</a>', reverse("llm:call", args=[call.pk]))


@admin.register(ProxySession)
class ProxySessionAdmin(admin.ModelAdmin):
    """Tokens are stored hashed and never shown; an admin may close a session (untick is_open) or shorten it."""

    list_display = ["id", "endpoint", "subject", "is_open", "created_at", "expires_at", "closed_at"]
    list_filter = ["is_open", "endpoint"]
    search_fields = ["subject"]
    exclude = ["token_hash"]
    readonly_fields = ["endpoint", "subject", "created_at", "closed_at"]

    def has_add_permission(self, request, obj=None):
        return False  # a session is opened by open_proxy_session, which hands out its token once


@admin.register(EndpointLease)
class EndpointLeaseAdmin(ReadOnlyAdmin):
    list_display = ["endpoint", "slot", "holder", "expires_at"]
    list_filter = ["endpoint"]
