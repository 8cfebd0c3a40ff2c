"""Fixtures of the tasks app that other apps' tests use."""

import importlib

import pytest
from django.apps import apps


@pytest.fixture
def taxonomy(transactional_db):
    """Load the taxonomy the data migration loads: a transactional test's flush empties it.

    (serialized_rollback cannot do it here: once Playwright's event loop runs in this thread, Django's
    connection handler hands out a fresh connection object that lacks the serialized test data.)
    """
    importlib.import_module("tasks.migrations.0002_taxonomy").load(apps, None)
