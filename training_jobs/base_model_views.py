"""The Base models page: the registered base models (what the training forms offer), adding one by path, and adding
one from a shipped converter, which queues the conversion job and shows its progress until it is registered.

State changes are training_jobs.base_models'; these views validate and call them.
"""

from django import forms
from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, viewer_required
from accounts.roles import ADMIN, has_role
from clawgym_site.htmx import render_page
from jobs.engine import JobEngineError

from . import base_models, converters
from .models import BaseModel


class AddByPathForm(forms.Form):
    name = forms.SlugField(max_length=120, help_text="Letters, digits, - and _; what the training forms list.")
    path = forms.CharField(max_length=1000, label="Folder",
                           help_text="An absolute path to a model folder (weights, config.json, tokenizer) on the gpu "
                                     "workers and here.")  # fmt: skip
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


def _context(request, path_form=None) -> dict:
    choices = base_models.converter_choices()
    return {
        "nav": "training", "models": base_models.listing(), "converters": choices,
        "converting": any(c["converting"] for c in choices), "is_admin": has_role(request.user, ADMIN),
        "path_form": path_form or AddByPathForm(),
    }  # fmt: skip


@viewer_required
@require_GET
def base_model_list(request):
    return render_page(request, "training/base_models.html", _context(request), partial="models")


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
    return render_page(request, "training/base_models.html", _context(request, form), status=400)


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


def no_base_model_help():
    """The training forms' help when nothing is registered: where to add one."""
    from django.urls import reverse
    from django.utils.html import format_html

    if BaseModel.objects.exists():
        return "A registered base model, or a path below."
    return format_html('No base model is registered yet: <a href="{}">add one on the Base models page</a> (a '
                       "shipped model such as {} is one click), or give a folder's path below.",
                       reverse("training:base-models"), next(iter(converters.CONVERTERS)))  # fmt: skip
