"""create_user and ensure_admin check passwords with the project's validators (AUTH_PASSWORD_VALIDATORS)."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from accounts.roles import REVIEWER, user_role

User = get_user_model()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "password, why",
    [
        ("abc12", "This password is too short. It must contain at least 8 characters."),
        ("password", "This password is too common."),
    ],
)
def test_a_weak_password_is_refused_and_no_user_is_made(password, why):
    with pytest.raises(CommandError, match=f"the password is refused: {why}"):
        call_command("create_user", "rita", "--role", "reviewer", "--password", password)
    assert not User.objects.filter(username="rita").exists()


@pytest.mark.django_db
def test_a_strong_password_is_set_and_a_weak_one_never_replaces_it(capsys):
    call_command("create_user", "rita", "--role", "reviewer", "--password", "quiet-otter-42-lantern")
    rita = User.objects.get(username="rita")
    assert rita.check_password("quiet-otter-42-lantern") and user_role(rita) == REVIEWER
    assert "Created rita with role reviewer." in capsys.readouterr().out

    with pytest.raises(CommandError, match="too short"):
        call_command("create_user", "rita", "--role", "admin", "--password", "short")
    rita.refresh_from_db()
    assert rita.check_password("quiet-otter-42-lantern") and user_role(rita) == REVIEWER


@pytest.mark.django_db
def test_without_a_password_the_user_cannot_log_in_until_one_is_set():
    call_command("create_user", "vic", "--role", "viewer")
    assert not User.objects.get(username="vic").has_usable_password()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["bad name!", "x" * 151])
def test_a_username_the_user_model_refuses_is_refused(username):
    with pytest.raises(CommandError, match="the username is refused"):
        call_command("create_user", username, "--role", "viewer")
    assert not User.objects.exists()


@pytest.mark.django_db
def test_ensure_admin_refuses_a_weak_password():
    with pytest.raises(CommandError, match="too common"):
        call_command("ensure_admin", "--password", "password")
    assert not User.objects.filter(username="admin").exists()
