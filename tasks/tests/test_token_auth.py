"""The API takes `Authorization: Token <key>` and the browser session; both honour roles."""

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tasks.package import TaskPackage
from tasks.services import save_package

URL = "/api/tasks/"


@pytest.fixture
def task(db):
    return save_package(TaskPackage(external_id="token-task", instruction="Read me")).task


def with_header(value: str | None) -> APIClient:
    client = APIClient()
    if value is not None:
        client.credentials(HTTP_AUTHORIZATION=value)
    return client


def test_a_valid_token_reads(viewer, task):
    key = Token.objects.create(user=viewer).key
    response = with_header(f"Token {key}").get(URL)
    assert response.status_code == 200
    assert [row["external_id"] for row in response.json()["results"]] == ["token-task"]


@pytest.mark.parametrize(
    "header, message",
    [
        (None, "Authentication credentials were not provided."),
        ("Token 0123456789abcdef0123456789abcdef01234567", "Invalid token."),
        ("Token", "Invalid token header. No credentials provided."),
        ("Token two parts", "Invalid token header. Token string should not contain spaces."),
    ],
)
def test_missing_or_invalid_tokens_are_401(db, task, header, message):
    response = with_header(header).get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": message}


def test_an_inactive_users_token_is_refused(viewer, task):
    key = Token.objects.create(user=viewer).key
    viewer.is_active = False
    viewer.save()
    response = with_header(f"Token {key}").get(URL)
    assert response.status_code == 401 and response.json()["detail"] == "User inactive or deleted."


def test_a_token_carries_its_users_role_not_more(api_as, outsider, viewer, task):
    assert api_as(outsider).get(URL).status_code == 403
    assert api_as(viewer).patch("/api/tasks/token-task/", {"status": "rejected"}, format="json").status_code == 403


def test_token_writes_need_no_csrf_token(api_as, reviewer, task):
    client = api_as(reviewer)
    client.enforce_csrf_checks = True
    response = client.patch("/api/tasks/token-task/", {"status": "rejected"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "rejected"


def test_session_auth_reads_and_writes_with_csrf(reviewer, task):
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.get(URL).status_code == 200

    body = '{"status": "rejected"}'
    refused = client.patch("/api/tasks/token-task/", body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]

    token = "k" * 32  # what a page's CSRF cookie carries; the header must repeat it
    client.cookies["csrftoken"] = token
    accepted = client.patch("/api/tasks/token-task/", body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 200 and accepted.json()["status"] == "rejected"


def test_scripts_exchange_a_password_for_their_token(viewer):
    from lib.testing import PASSWORD

    response = APIClient().post("/api/auth/token/", {"username": viewer.username, "password": PASSWORD}, format="json")
    assert response.status_code == 200
    assert response.json()["token"] == Token.objects.get(user=viewer).key
    wrong = APIClient().post("/api/auth/token/", {"username": viewer.username, "password": "nope"}, format="json")
    assert wrong.status_code == 400 and "token" not in wrong.json()
