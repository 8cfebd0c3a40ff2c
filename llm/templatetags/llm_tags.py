"""`{{ endpoint|demo_badge }}` (or `{{ row.model|demo_badge }}`, a model id): a "demo" badge after the name of an
endpoint serving a demo model (llm.models.DEMO_MODEL_PREFIX), nothing otherwise. Every page that names a model an
agent, judge or generator ran as shows it, so that a demo model's figures are never read as a real model's."""

from django import template
from django.utils.html import format_html

from ..models import ModelEndpoint, is_demo_model

register = template.Library()

TITLE = "A scripted demo model (manage.py demo_models): it answers from reference solutions and fixed templates, not a real model"


@register.filter
def demo_badge(value) -> str:
    model = value.model if isinstance(value, ModelEndpoint) else str(value or "")
    if not is_demo_model(model):
        return ""
    return format_html(' <span class="badge demo" title="{}">demo</span>', TITLE)
