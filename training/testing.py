"""pytest fixtures for code that trains or serves a model (registered in the root conftest.py): the tiny Qwen3
(training.tiny_model), built once a session, for the training library's tests and the training_jobs app's."""

import pytest

from .tiny_model import tiny_model


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    return str(tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3"))
