"""The users tests act as: one per role plus an outsider who holds none, and clients signed in as each."""

import pytest
from django.contrib.auth import get_user_model

from accounts.roles import ADMIN, REVIEWER, VIEWER, grant_role
from lib.testing import PASSWORD, signed_in_client


def make_user(username: str, role: str | None):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    if role:
        grant_role(user, role)
    return user


@pytest.fixture
def admin_user(db):
    return make_user("ada_admin", ADMIN)


@pytest.fixture
def reviewer(db):
    return make_user("rita_reviewer", REVIEWER)


@pytest.fixture
def viewer(db):
    return make_user("vic_viewer", VIEWER)


@pytest.fixture
def outsider(db):
    """Signed in, but holds no role."""
    return make_user("olga_outsider", None)


@pytest.fixture
def admin_client(admin_user):
    return signed_in_client(admin_user)


@pytest.fixture
def reviewer_client(reviewer):
    return signed_in_client(reviewer)


@pytest.fixture
def viewer_client(viewer):
    return signed_in_client(viewer)


@pytest.fixture
def outsider_client(outsider):
    return signed_in_client(outsider)
