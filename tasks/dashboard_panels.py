"""Panels other apps add to the dashboard, without the dashboard knowing them.

Arrows point one way (evaluation uses tasks, never the reverse), so an app registers its panel from its
AppConfig.ready():

    register("evaluation", "evaluation/_dashboard_panel.html", panel_context, order=10, scripts=["js/charts.js"])

The dashboard renders each panel's template with `panel` = context_function(request) (a dict), in `order`, and
loads the panels' `scripts` (static paths, each once) at the end of the page. A panel whose context function returns
None is left out (nothing to show to this user).
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    name: str
    template: str
    context_function: Callable
    order: int = 100
    scripts: tuple[str, ...] = ()


_PANELS: dict[str, Panel] = {}


def register(name: str, template: str, context_function: Callable, order: int = 100, scripts=()) -> None:
    """Add (or replace, by name: ready() may run twice in tests) a dashboard panel."""
    _PANELS[name] = Panel(
        name=name, template=template, context_function=context_function, order=order, scripts=tuple(scripts)
    )


def panels() -> list[Panel]:
    return sorted(_PANELS.values(), key=lambda p: (p.order, p.name))


def rendered(request) -> tuple[list[dict], list[str]]:
    """([{"name", "template", "context"}], scripts) for the dashboard template, in order; panels with nothing to
    show left out, and so are their scripts."""
    shown, scripts = [], []
    for panel in panels():
        context = panel.context_function(request)
        if context is None:
            continue
        shown.append({"name": panel.name, "template": panel.template, "context": context})
        scripts += [s for s in panel.scripts if s not in scripts]
    return shown, scripts
