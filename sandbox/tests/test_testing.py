"""The test helpers' rule: what this machine lacks skips a test on a developer's machine and fails it in CI."""

import pytest

from sandbox.backends.bwrap import BwrapBackend
from sandbox.testing import in_ci, require_bwrap, unavailable


@pytest.mark.parametrize(
    ("value", "ci"),
    [("true", True), ("1", True), ("yes", True), ("TRUE", True), ("", False), ("0", False), ("false", False)],
)
def test_ci_is_whatever_the_ci_variable_does_not_deny(monkeypatch, value, ci):
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_unset_ci_is_not_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()


def test_a_missing_sandbox_skips_here_and_fails_in_ci(monkeypatch, tmp_path):
    missing = BwrapBackend(bwrap=str(tmp_path / "bwrap"))  # a machine without bubblewrap
    monkeypatch.setattr("sandbox.testing.get_backend", lambda name: missing)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the default sandbox cannot run here"):
        require_bwrap()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run this test, but the default sandbox cannot run here"):
        require_bwrap()


def test_unavailable_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run this test, but no frobnicator"):
        unavailable("no frobnicator")
