"""pytest fixtures for code that runs things in the sandbox (registered in the root conftest.py)."""

import os

import pytest

from . import SandboxUnavailable, get_backend


def require_bwrap():
    """The default (bubblewrap) backend. Skips the test where it cannot work, except in CI, which must test it."""
    backend = get_backend("bwrap")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must test the default sandbox: {exc}")
        pytest.skip(str(exc))
    return backend


@pytest.fixture
def bwrap():
    return require_bwrap()
