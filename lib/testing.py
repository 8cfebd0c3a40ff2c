"""What every app's tests share and that knows no app: the test password and a fast hasher for it, clients signed in
or holding an API token, `wait_until` for what another thread or process does, and the marks CI selects by (servers
on loopback: lib.loopback). The users of each role are `accounts.testing`'s."""

import time

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "correct-horse-battery"


def pytest_configure(config):
    # Hashing a password with the deployment's PBKDF2 takes 0.3 s here, and most tests make users and sign them in:
    # the test process hashes new ones with MD5 (still checking passwords, so sign-in and rate limits are exercised)
    # and keeps the real hashers after it, for passwords set by a command in a subprocess.
    from django.conf import settings

    fast = "django.contrib.auth.hashers.MD5PasswordHasher"
    settings.PASSWORD_HASHERS = [fast, *[h for h in settings.PASSWORD_HASHERS if h != fast]]


def signed_in_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def wait_until(condition, what, *, timeout: float = 60.0):
    """Call `condition` until it returns something true, and return that: for what another thread or process does (a
    worker, a server, the proxy's record). After `timeout` s the test fails saying what it waited for (`what`, or what
    `what()` says then, such as a worker's log tail); the bound only ends a hung test, so it is wide."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what() if callable(what) else what}")
        time.sleep(0.05)
    return value


@pytest.fixture
def api_as():
    """api_as(user) -> an APIClient authenticated with the user's API token."""
    return token_client


# Fixtures through which a test reaches the database (item.fixturenames is the closure: admin_client counts too).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def pytest_collection_modifyitems(config, items):
    """Marks CI selects by (pytest.ini): `nodb` on a test that never touches the database (nothing about the
    database engine, so CI's SQLite pass leaves it to the PostgreSQL pass), `celery` on one that runs Celery workers
    (a deployment on PostgreSQL: the embedded SQLite default runs django-q2)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("django_db") is None and not names & DATABASE_FIXTURES:
            item.add_marker(pytest.mark.nodb)
        if "celery_broker_url" in names:
            item.add_marker(pytest.mark.celery)
