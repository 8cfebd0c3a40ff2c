"""The synthesis panel of the dashboard (registered in apps.py through tasks.dashboard_panels): for admins a small
form that launches a batch (route, count, endpoints, seed, QA stages; preview first) through the start page, and the
running and recent batches with their progress and cost, refreshing themselves while one runs."""

from accounts.roles import ADMIN, VIEWER, has_role

from .forms import StartBatchForm
from .views.batches import running_context


def panel_context(request) -> dict | None:
    if not has_role(request.user, VIEWER):
        return None
    return {"form": StartBatchForm() if has_role(request.user, ADMIN) else None, **running_context()}
