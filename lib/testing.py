"""What every app's tests share and that knows no app: the test password and a fast hasher for it, clients signed in
or holding an API token, an ASGI app served on loopback, and the marks CI selects by. The users of each role are
`accounts.testing`'s."""

import asyncio
import socket
import threading
import time

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "correct-horse-battery"
READY_TIMEOUT = 20.0  # s: how long serve_in_thread waits for uvicorn to listen


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


def _bound_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def serve_in_thread(app, host: str = "127.0.0.1", **config):
    """Run `app` (an ASGI app or "module:attr") under uvicorn on a free port of `host` in a daemon thread.

    Returns (server, thread, port); stop it with stop_server(server, thread).
    """
    import uvicorn

    sock = _bound_socket(host)
    options = {"log_level": "warning", "access_log": False, "lifespan": "off", "http": "h11", "loop": "asyncio"}
    server = uvicorn.Server(uvicorn.Config(app, **(options | config)))
    server.install_signal_handlers = lambda: None  # the main thread keeps its own handlers
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn serving {app!r} did not start within {READY_TIMEOUT} s")
        time.sleep(0.01)
    return server, thread, sock.getsockname()[1]


def stop_server(server, thread) -> None:
    if server is None:
        return
    server.should_exit = True
    thread.join(timeout=10)
