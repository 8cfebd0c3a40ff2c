"""Filters that print evaluation figures on the run, leaderboard and comparison pages.

They stand in for floatformat/intcomma/includes in tables of hundreds of rows: those are locale-aware and slow, and
the pages must stay fast with 200-task runs (a page's p95 is benchmarked, bench/eval_bench.py). Rounding is half up,
as floatformat's.
"""

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.html import format_html

register = template.Library()
NONE = "—"
_PLACES = {2: Decimal("0.01"), 3: Decimal("0.001"), 4: Decimal("0.0001")}


def fixed(value, places: int = 3) -> str:
    if value is None or value == "":
        return NONE
    return str(Decimal(repr(float(value))).quantize(_PLACES[places], rounding=ROUND_HALF_UP))


@register.filter
def score(value, places=3) -> str:
    """0.8125 -> "0.813"; None -> "—"."""
    return fixed(value, int(places))


@register.filter
def repeat_scores(scores) -> str:
    """A task's scores by repeat: "1.00 · 0.75 · —"."""
    return " · ".join(fixed(s, 2) for s in scores or [])


@register.filter
def thousands(value) -> str:
    return NONE if value is None else f"{int(value):,}"


@register.filter
def with_ci(figure) -> str:
    """A {"mean", "lo", "hi"} figure (views.runs.ci_row) as the mean and its 95% interval."""
    if not figure or figure.get("mean") is None:
        return format_html('<span class="muted">{}</span>', NONE)
    if figure.get("lo") is None:
        return format_html('<span class="mean">{}</span>', fixed(figure["mean"]))
    return format_html(
        '<span class="mean">{}</span> <span class="muted ci" title="95% confidence interval">[{}, {}]</span>',
        fixed(figure["mean"]),
        fixed(figure["lo"]),
        fixed(figure["hi"]),
    )
