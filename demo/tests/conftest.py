"""The demo server on loopback (uvicorn in a thread of the test process) with its endpoints registered, and the
synthesis seeds for tests on a transactional database (whose flush removes what the migrations loaded)."""

import importlib

import pytest

from demo import server
from demo.services import register_demo_endpoints
from llm.testing import serve_in_thread, stop_server


@pytest.fixture
def demo_server(transactional_db):
    """The demo models' base URL; the server reads the test database (it sees committed rows only)."""
    uvicorn_server, thread, port = serve_in_thread(server.app())
    base_url = f"http://127.0.0.1:{port}/v1"
    register_demo_endpoints(base_url)
    yield base_url
    stop_server(uvicorn_server, thread)


@pytest.fixture
def shipped_seeds(transactional_db):
    """The shipped personas and atomic operations (with the `taxonomy` fixture: the persona route's seeds)."""
    from django.apps import apps

    importlib.import_module("synthesis.migrations.0003_shipped_seeds").load(apps, None)
