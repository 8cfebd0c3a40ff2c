from rest_framework.permissions import SAFE_METHODS, BasePermission

from .roles import ADMIN, VIEWER, has_role


class RolePermission(BasePermission):
    """Reads need the viewer role; writes need the view's `write_role` (admin unless the view says otherwise).

    A view may narrow writes per action with `write_roles = {"action_name": "reviewer"}`.
    """

    def has_permission(self, request, view):
        if request.method in SAFE_METHODS:
            return has_role(request.user, VIEWER)
        action = getattr(view, "action", None)
        role = getattr(view, "write_roles", {}).get(action) or getattr(view, "write_role", ADMIN)
        return has_role(request.user, role)
