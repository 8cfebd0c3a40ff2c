"""Fixtures for the sandbox tests. None of them needs a database."""

from __future__ import annotations

import os
import uuid

import pytest

from sandbox import SandboxUnavailable, Workspace, get_backend


@pytest.fixture
def bwrap():
    backend = get_backend("bwrap")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must test the default sandbox: {exc}")
        pytest.skip(str(exc))
    return backend


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
