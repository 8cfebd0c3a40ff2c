from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

from .roles import ADMIN, LEAD, REVIEWER, VIEWER, has_role


def role_required(role: str):
    """Anonymous users go to the login page; signed-in users without the role get 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


viewer_required = role_required(VIEWER)
reviewer_required = role_required(REVIEWER)
lead_required = role_required(LEAD)
admin_required = role_required(ADMIN)
