"""Filters for showing job errors and logs: `{{ run.error|error_summary }}`, `{{ text|hide_paths }}` (jobs.redaction)."""

from django import template

from .. import redaction

register = template.Library()


@register.filter
def error_summary(error) -> str:
    return redaction.error_summary(str(error or ""))


@register.filter
def hide_paths(text) -> str:
    return redaction.hide_paths(str(text or ""))


@register.filter
def hide_paths_unless(text, is_admin) -> str:
    """`{{ text|hide_paths_unless:is_admin }}`: the text as it is for admins, with paths cut for everyone else."""
    return str(text or "") if is_admin else redaction.hide_paths(str(text or ""))


@register.filter
def periodic_result(result) -> str:
    """A periodic job's result in short: {"requeued": 1, "failed": 0} → "failed 0, requeued 1" (keys sorted:
    PostgreSQL's jsonb gives them back in an order of its own)."""
    if isinstance(result, dict):
        parts = []
        for key, value in sorted(result.items()):
            shown = len(value) if isinstance(value, list) else value
            parts.append(f"{key.replace('_', ' ')} {shown}")
        return redaction.hide_paths(", ".join(parts))[:160]
    return redaction.hide_paths(str(result))[:160]
