import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from accounts.roles import ADMIN, REVIEWER, VIEWER, grant_role, has_role, user_role
from accounts.testing import make_user


@pytest.mark.django_db
def test_roles_include_the_ones_below():
    viewer, reviewer, admin = make_user("v", VIEWER), make_user("r", REVIEWER), make_user("a", ADMIN)
    outsider = make_user("o", None)
    assert [has_role(u, VIEWER) for u in (outsider, viewer, reviewer, admin)] == [False, True, True, True]
    assert [has_role(u, REVIEWER) for u in (outsider, viewer, reviewer, admin)] == [False, False, True, True]
    assert [has_role(u, ADMIN) for u in (outsider, viewer, reviewer, admin)] == [False, False, False, True]
    assert user_role(outsider) is None and user_role(admin) == ADMIN
    assert admin.is_staff and not reviewer.is_staff


@pytest.mark.django_db
def test_granting_a_role_replaces_the_previous_one():
    user = make_user("x", ADMIN)
    grant_role(user, VIEWER)
    user = type(user).objects.get(pk=user.pk)
    assert user_role(user) == VIEWER and not user.is_staff
    assert set(user.groups.values_list("name", flat=True)) == {VIEWER}
    with pytest.raises(ValueError, match="unknown role"):
        grant_role(user, "owner")


@pytest.mark.django_db
def test_inactive_users_hold_no_role():
    user = make_user("gone", ADMIN)
    user.is_active = False
    assert user_role(user) is None


@pytest.mark.django_db
def test_groups_carry_admin_site_permissions():
    admin_perms = set(Group.objects.get(name=ADMIN).permissions.values_list("codename", flat=True))
    viewer_perms = set(Group.objects.get(name=VIEWER).permissions.values_list("codename", flat=True))
    assert {"change_task", "delete_task", "view_jobrun"} <= admin_perms
    assert "view_task" in viewer_perms and "change_task" not in viewer_perms


@pytest.mark.django_db
def test_ensure_admin_prints_the_login_once(capsys):
    call_command("ensure_admin", "--json")
    first = capsys.readouterr().out
    assert '"created": true' in first and '"password": "' in first
    call_command("ensure_admin")
    assert "password is unchanged" in capsys.readouterr().out
    from django.contrib.auth import get_user_model

    assert user_role(get_user_model().objects.get(username="admin")) == ADMIN


def test_a_lead_is_a_reviewer_below_admin(db):
    from accounts.roles import LEAD

    lead = make_user("lee_lead", LEAD)
    assert user_role(lead) == LEAD
    assert has_role(lead, REVIEWER) and has_role(lead, LEAD) and not has_role(lead, ADMIN)
    assert not lead.is_staff
    admin = make_user("ada_admin", ADMIN)
    assert has_role(admin, LEAD)
    assert not has_role(make_user("rita", REVIEWER), LEAD)
