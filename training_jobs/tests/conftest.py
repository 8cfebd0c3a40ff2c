"""Fixtures shared by training_jobs' tests: a training folder of the test's own, a small SFT dataset, a django-q GPU
worker (one per module) and a recording proxy session. The tiny Qwen3 (`tiny_model_path`) is training.testing's.

`training_dir` is not autouse: the modules that train ask for it (`pytest.mark.usefixtures("training_dir")`).
"""

import os

import pytest

from jobs.testing import start_django_q_worker
from llm.models import ModelEndpoint, ProxySession
from training_jobs.services.datasets import build_dataset
from training_jobs.testing.corpus import make_corpus
from training_jobs.testing.runs import MAX_BODY, PROBE


@pytest.fixture
def training_dir(settings, tmp_path):
    settings.CLAWGYM_TRAINING_DIR = tmp_path / "training"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture
def dataset():
    corpus = make_corpus()
    return build_dataset(selection={"eval_runs": [corpus.run.pk], "groups": [corpus.group]}, name="sales", user=None)


@pytest.fixture(scope="module")
def gpu_worker(django_db_setup, django_db_blocker):
    # The worker's environment is this process's: it listens on every interface, the endpoint names the machine. It
    # holds secrets as a deployed one does (SECRET_KEY, the same as here, and a model key; DATABASE_URL it is given).
    from django.conf import settings

    worker_env = {
        "CLAWGYM_SERVE_HOST": "0.0.0.0",
        "CLAWGYM_SERVE_MAX_REQUEST_BYTES": str(MAX_BODY),
        "SECRET_KEY": settings.SECRET_KEY,
        "CLAWGYM_KEY_PROBE": PROBE,
    }
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=1, env=worker_env)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def session(db):
    endpoint = ModelEndpoint.objects.create(name="policy", base_url="http://127.0.0.1:9/v1", model="policy")
    return ProxySession.objects.create(endpoint=endpoint, subject="rollout:1", record_tokens=True)
