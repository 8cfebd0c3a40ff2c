from django import template

from tasks.diffing import role_folder as _role_folder
from tasks.viewers import render_markdown

register = template.Library()


@register.filter
def markdown(text: str):
    """Task text as HTML: raw HTML in it is escaped, unsafe link URLs dropped (see tasks.viewers)."""
    return render_markdown(text or "")


@register.filter
def role_folder(role: str) -> str:
    """The folder a file of this role lives in inside a task package ("reward/", "solution/", or "")."""
    return _role_folder(role)


@register.filter
def basename(path) -> str:
    """The last part of a slash-separated path ("" for none)."""
    return str(path or "").rstrip("/").rsplit("/", 1)[-1]


@register.filter
def score_levels(rule: dict) -> list[tuple[str, str]]:
    """A rubric rule's score levels as (level, description), lowest first: the rule's own levels, whatever they are
    (five by default, steps of 0.2 for some imported rubrics); stored JSON may hold them in any key order."""
    scores = rule.get("scores") if isinstance(rule, dict) else None
    if not isinstance(scores, dict):
        return []

    def value(label):
        try:
            return float(label)
        except (TypeError, ValueError):
            return float("inf")

    return [(label, scores[label]) for label in sorted(scores, key=value)]
