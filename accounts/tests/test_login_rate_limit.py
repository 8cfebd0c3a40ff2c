"""Sign-in is rate limited per client address (issue 10, item 18): a password could be guessed on /login/ and
/api/auth/token/ as fast as the server answered. After AXES_FAILURE_LIMIT failures an address is refused (429),
even with the right password, until the cool-off; other addresses are not affected; a success clears the count."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from lib.testing import PASSWORD

ATTACKER = "203.0.113.7"
SOMEONE_ELSE = "198.51.100.2"


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.AXES_FAILURE_LIMIT = 3


def _login(user, password, address):
    return Client(REMOTE_ADDR=address).post("/login/", {"username": user.username, "password": password})


def _token(user, password, address):
    return APIClient(REMOTE_ADDR=address).post(
        "/api/auth/token/", {"username": user.username, "password": password}, format="json"
    )


def test_the_login_page_locks_an_address_out_after_the_failure_limit(viewer):
    for _ in range(2):
        assert _login(viewer, "guess", ATTACKER).status_code == 200  # the form again, with its error
    assert _login(viewer, "guess", ATTACKER).status_code == 429  # the third failure locks the address out
    locked = _login(viewer, PASSWORD, ATTACKER)
    assert locked.status_code == 429 and "_auth_user_id" not in locked.client.session
    assert _login(viewer, PASSWORD, SOMEONE_ELSE).status_code == 302  # signed in


def test_the_token_endpoint_locks_an_address_out_too(viewer):
    for _ in range(2):
        assert _token(viewer, "guess", ATTACKER).status_code == 400
    assert _token(viewer, "guess", ATTACKER).status_code == 429
    locked = _token(viewer, PASSWORD, ATTACKER)
    assert locked.status_code == 429 and "token" not in locked.json()
    assert int(locked["Retry-After"]) > 0
    assert _token(viewer, PASSWORD, SOMEONE_ELSE).status_code == 200


def test_failures_on_either_route_count_together(viewer):
    _login(viewer, "guess", ATTACKER)
    _token(viewer, "guess", ATTACKER)
    _login(viewer, "guess", ATTACKER)
    assert _token(viewer, PASSWORD, ATTACKER).status_code == 429


def test_a_success_clears_the_count(viewer):
    for _ in range(2):
        _login(viewer, "typo", ATTACKER)
    assert _login(viewer, PASSWORD, ATTACKER).status_code == 302
    for _ in range(2):
        _login(viewer, "typo", ATTACKER)
    assert _login(viewer, PASSWORD, ATTACKER).status_code == 302


def test_deeply_nested_json_to_the_token_endpoint_is_a_400():
    """json.loads' RecursionError was a 500 for anyone: 30,000 brackets fit in an anonymous body."""
    deep = b'{"username": ' + b"[" * 30000 + b"]" * 30000 + b"}"
    response = APIClient(raise_request_exception=False).post(
        "/api/auth/token/", data=deep, content_type="application/json"
    )
    assert response.status_code == 400 and "nested too deeply" in response.json()["detail"]
