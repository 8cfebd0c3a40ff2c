"""The Base models page: the registered base models (what the training forms offer), adding one by path, and adding
one from a shipped converter, which queues the conversion job and shows its progress until it is registered. Each
model can be served as an agent (endpoint base-NAME, to evaluate before any run): its row polls while a gpu worker
starts the server, then names the endpoint with a link to evaluate it, and offers Stop.

State changes are training_jobs.base_models' and training_jobs.serving's; these views validate and call them.
"""

from django.contrib import messages
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from accounts.roles import ADMIN, has_role
from jobs.engine import JobEngineError
from lib.htmx import render_page
from training import converters

from .. import base_models, serving
from ..forms import AddByPathForm
from ..models import BaseModel, ModelServer


def model_rows(models=None) -> list[dict]:
    """Each base model as base_models.listing() gives it, with its latest server (starting, ready, failed, stopped or
    None) and its pk."""
    servers = Prefetch("servers", queryset=ModelServer.objects.select_related("endpoint"))  # newest first
    found = (models if models is not None else BaseModel.objects.all()).prefetch_related(servers)
    return [{**base_models.describe(m), "pk": m.pk, "server": next(iter(m.servers.all()), None)} for m in found]


def _context(request, path_form=None) -> dict:
    choices = base_models.converter_choices()
    return {
        "nav": "training",
        "models": model_rows(),
        "converters": choices,
        "converting": any(c["converting"] for c in choices),
        "is_admin": has_role(request.user, ADMIN),
        "path_form": path_form or AddByPathForm(),
    }


@viewer_required
@require_GET
def base_model_list(request):
    return render_page(request, "training_jobs/base_models.html", _context(request), partial="models")


@admin_required
@require_http_methods(["POST"])
def base_model_add(request):
    form = AddByPathForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            row, created = base_models.add_by_path(data["name"], data["path"].strip(), notes=data["notes"])
        except base_models.BaseModelError as exc:
            form.add_error("path", str(exc))
        else:
            messages.success(request, f"Base model {row.name} {'registered' if created else 'was registered already'}.")
            return redirect("training:base-models")
    return render_page(request, "training_jobs/base_models.html", _context(request, form), status=400)


@admin_required
@require_POST
def base_model_convert(request, name: str):
    try:
        run = base_models.request_conversion(name, user=request.user)
    except (base_models.BaseModelError, converters.ConversionError) as exc:
        messages.error(request, str(exc))
    except JobEngineError as exc:
        messages.error(request, f"The job engine did not take the conversion: {exc}")
    else:
        messages.success(request, f"Converting {name}: job #{run.pk} on the gpu queue; it is listed here once done.")
    return redirect("training:base-models")


@admin_required
@require_POST
def base_model_serve(request, name: str):
    """Queue the model's server on a gpu worker (or find the one starting or up) and answer at once: htmx gets the
    model's row, which polls until the server is ready or failed; a plain form post the page."""
    row = get_object_or_404(BaseModel, name=name)
    error = ""
    try:
        server = serving.request_serving(row, user=request.user)
    except JobEngineError as exc:
        error = f"The job engine did not take it: {exc}"
    if request.htmx:
        return _model_row_response(request, row, error=error)
    if error:
        messages.error(request, error)
    elif server.status == server.Status.READY:
        messages.success(request, f"{row.name} is served as {server.endpoint.name}.")
    else:
        messages.success(request, f"{row.name}: server #{server.pk} starting on a gpu worker.")
    return redirect("training:base-models")


@admin_required
@require_POST
def base_model_stop(request, name: str):
    row = get_object_or_404(BaseModel, name=name)
    stopped = serving.stop_serving(row, user=request.user)
    if request.htmx:
        return _model_row_response(request, row)
    messages.success(
        request, f"{row.name}: stopped {len(stopped)} server(s)." if stopped else f"{row.name} was not being served."
    )
    return redirect("training:base-models")


@viewer_required
@require_GET
def base_model_server(request, name: str):
    """A model's row (htmx polls it while its server starts); a plain request goes to the page."""
    row = get_object_or_404(BaseModel, name=name)
    if not request.htmx:
        return redirect("training:base-models")
    latest = row.servers.first()
    if latest is not None and latest.status == latest.Status.STARTING:
        serving.current_server(row)  # a row whose job ended without it coming up is marked failed (polling stops)
    return _model_row_response(request, row)


def _model_row_response(request, row: BaseModel, *, error: str = ""):
    [m] = model_rows(BaseModel.objects.filter(pk=row.pk))
    context = {"m": m, "is_admin": has_role(request.user, ADMIN), "serve_error": error}
    return TemplateResponse(request, "training_jobs/base_models.html#model-row", context)
