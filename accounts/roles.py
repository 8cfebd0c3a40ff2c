"""The four roles. A role is a Django group; each role includes the ones below it.

- viewer: reads everything (pages and API).
- reviewer: a viewer who may also change task content (each change makes a new revision).
- lead: a reviewer who may also adjudicate, when a benchmark's reviewers disagree on a candidate (review.team).
- admin: a reviewer who may also import tasks, start and cancel jobs, and use the Django admin.

Superusers count as admins.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

VIEWER = "viewer"
REVIEWER = "reviewer"
LEAD = "lead"
ADMIN = "admin"
ORDER = [VIEWER, REVIEWER, LEAD, ADMIN]

# Model permissions each group carries for the Django admin (the pages and API use role checks).
_GROUP_PERMISSIONS = {
    VIEWER: {"view"},
    REVIEWER: {"view"},
    LEAD: {"view"},
    ADMIN: {"view", "add", "change", "delete"},
}
_ADMIN_APPS = {
    "tasks",
    "jobs",
    "accounts",
    "llm",
    "synthesis",
    "benchmarks",
    "evaluation",
    "review",
    "training_jobs",
    "authtoken",
}


def user_role(user) -> str | None:
    """The highest role the user holds, or None."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = getattr(user, "_clawgym_group_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._clawgym_group_names = names
    for role in reversed(ORDER):
        if role in names:
            return role
    return None


def has_role(user, role: str) -> bool:
    """True when the user holds `role` or a role above it."""
    held = user_role(user)
    return held is not None and ORDER.index(held) >= ORDER.index(role)


def grant_role(user, role: str) -> None:
    """Give exactly `role` (removing the other role groups). Admins are staff, for the Django admin."""
    if role not in ORDER:
        raise ValueError(f"unknown role {role!r}; choose one of {ORDER}")
    sync_role_groups()
    user.groups.remove(*Group.objects.filter(name__in=ORDER))
    user.groups.add(Group.objects.get(name=role))
    user.is_staff = role == ADMIN or user.is_superuser
    user.save(update_fields=["is_staff"])
    if hasattr(user, "_clawgym_group_names"):
        del user._clawgym_group_names


def sync_role_groups(**kwargs) -> None:
    for role, actions in _GROUP_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = Permission.objects.filter(content_type__app_label__in=_ADMIN_APPS)
        wanted = [p for p in perms if p.codename.split("_", 1)[0] in actions]
        group.permissions.set(wanted)


def admin_named(username: str, *, error: type[Exception]):
    """The active admin `username`, for a command acting as one (--by); else `error` saying how to name one."""
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None or not has_role(user, ADMIN):
        raise error(f"no admin {username!r}: pass --by USERNAME of an admin (`manage.py ensure_admin` makes one)")
    return user
