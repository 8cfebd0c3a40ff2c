"""pytest fixtures and helpers for code that runs things in the sandbox (registered in the root conftest.py).

What a test needs and this machine lacks (bubblewrap, the OpenClaw harness) skips the test on a developer's machine,
but fails it in CI: a CI run must never lose a module to a quiet skip.
"""

import os
from typing import NoReturn

import pytest

from . import SandboxUnavailable, get_backend


def in_ci() -> bool:
    """True where the CI variable is set to anything but empty, 0, false or no (CI services set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip the test: `reason` says what this machine lacks. In CI, fail it instead: CI must run it."""
    if in_ci():
        pytest.fail(f"CI must run this test, but {reason}", pytrace=False)
    pytest.skip(reason)


def require_bwrap():
    """The default (bubblewrap) backend; `unavailable` where it cannot work."""
    backend = get_backend("bwrap")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        unavailable(f"the default sandbox cannot run here: {exc}")
    return backend


@pytest.fixture
def bwrap():
    return require_bwrap()
