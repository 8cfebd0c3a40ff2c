"""Fixtures for the sandbox tests. None of them needs a database."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sandbox import Workspace


@pytest.fixture
def workspace():
    # Under /tmp, not pytest's tmp_path: the sandbox user must be able to reach the folder through its parents.
    ws = Workspace.create({"input.txt": b"hello\n", "data/table.csv": b"a,b\n1,2\n"})
    yield ws
    ws.cleanup()


@pytest.fixture
def marker():
    """A unique word put on the command line of every process a test starts, to find leftovers on the host."""
    return f"clawgym-sbx-{uuid.uuid4().hex}"


def pytest_collection_modifyitems(config, items):
    # The sandbox is a plain library (no database): its tests are `once`, run in CI's PostgreSQL pass only.
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.once)
