"""Fixtures of the synthesis tests (their plain helpers are in synthesis/testing.py)."""

import pytest

from synthesis.testing import make_endpoints


@pytest.fixture
def endpoints(scripted_upstream):
    """The generator "gen" and the judge "judge" on the scripted upstream."""
    return make_endpoints(scripted_upstream)
