"""The one rule every page follows: htmx requests get the page's named partial, plain requests the whole page."""

from django.template.response import TemplateResponse
from django.utils.cache import patch_vary_headers


def render_page(request, template: str, context: dict, partial: str | None = None, status: int = 200):
    """Render `template`, or its partial `template#partial` for an htmx request.

    A history-restore request (back button after an htmx swap) needs the whole page, not the partial. The response
    varies on HX-Request so that a cache never serves one for the other.
    """
    name = template
    if partial and request.htmx and not request.htmx.history_restore_request:
        name = f"{template}#{partial}"
    response = TemplateResponse(request, name, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response
