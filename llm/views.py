"""Pages of the LLM gateway: model endpoints (with a connection test) and the model call log.

Viewers and up read; only admins add or change endpoints and run connection tests (a test is a real, paid call).
htmx requests get the page's named partial, plain requests the whole page, so every page works without JS.
API keys never reach a page: only the name of their environment variable, and whether it is set.
"""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Sum
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from lib.htmx import render_page

from .bodies import COLUMNS, body_of, with_heads
from .client import check_connection
from .forms import CallFilterForm, EndpointForm, known_values
from .models import ModelCall, ModelEndpoint
from .services import create_endpoint, update_endpoint

PAGE_SIZE = 50


@viewer_required
@require_GET
def endpoint_list(request):
    endpoints = list(ModelEndpoint.objects.all())
    for endpoint in endpoints:
        endpoint.key_state_label = endpoint.key_state()
    return render_page(request, "llm/endpoints.html", {"nav": "models", "endpoints": endpoints})


def _apply_errors(form: EndpointForm, exc: ValidationError) -> None:
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)


@admin_required
@require_http_methods(["GET", "POST"])
def endpoint_edit(request, name: str | None = None):
    endpoint = get_object_or_404(ModelEndpoint, name=name) if name else None
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        try:
            if endpoint is None:
                endpoint = create_endpoint(form.cleaned_data["name"], user=request.user, **form.service_fields())
                messages.success(request, f"Endpoint {endpoint.name} added.")
            else:
                update_endpoint(endpoint, user=request.user, **form.service_fields())
                messages.success(request, f"Endpoint {endpoint.name} saved.")
            return redirect("llm:endpoints")
        except ValidationError as exc:
            _apply_errors(form, exc)
    status = 400 if request.method == "POST" else 200
    return render_page(
        request, "llm/endpoint_form.html", {"nav": "models", "form": form, "endpoint": endpoint}, status=status
    )


@admin_required
@require_POST
def endpoint_test(request, name: str):
    """A tiny real call; htmx gets the result line, a plain POST a message on the endpoints page."""
    endpoint = get_object_or_404(ModelEndpoint, name=name)
    check = check_connection(endpoint)
    if request.htmx:
        return TemplateResponse(request, "llm/endpoints.html#check", {"endpoint": endpoint, "check": check})
    if check.ok:
        messages.success(request, f"{endpoint.name}: OK in {check.latency_ms:.0f} ms, {check.message}")
    else:
        messages.error(request, f"{endpoint.name}: {check.message}")
    return redirect("llm:endpoints")


@viewer_required
@require_GET
def call_list(request):
    form = CallFilterForm(request.GET)
    calls = form.filter(ModelCall.objects.all())
    overall = calls.aggregate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost"))
    context = {
        "nav": "models",
        "form": form,
        "page": Paginator(calls.select_related("session").defer(*COLUMNS.values()), PAGE_SIZE).get_page(
            request.GET.get("page")
        ),
        "by_purpose": list(calls.totals_by("purpose")),
        "by_endpoint": list(calls.totals_by("endpoint_name")),
        "overall": overall,
        "purposes": known_values("purpose"),
        "endpoint_names": known_values("endpoint_name"),
    }
    return render_page(request, "llm/calls.html", context, partial="results")


@viewer_required
@require_GET
def call_detail(request, pk: int):
    """A large request or response shows its first CLAWGYM_MODEL_CALL_INLINE_BYTES and links to the whole (the API's
    body URL, streamed): the page never loads it whole (llm.bodies)."""
    call = get_object_or_404(with_heads(ModelCall.objects.select_related("session", "served_type")), pk=pk)
    context = {
        "nav": "models",
        "call": call,
        "request_body": body_of(call, "request"),
        "response_body": body_of(call, "response"),
    }
    return TemplateResponse(request, "llm/call_detail.html", context)
