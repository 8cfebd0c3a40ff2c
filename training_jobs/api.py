"""Training over the API: datasets (training_jobs.api_datasets), runs, checkpoints and servers, on the site's one
router."""

from . import api_runs
from .api_base_models import BaseModelViewSet
from .api_datasets import TrainingDatasetViewSet


def register(router) -> None:
    router.register("training/datasets", TrainingDatasetViewSet, basename="training-dataset")
    router.register("training/base-models", BaseModelViewSet, basename="training-base-model")
    api_runs.register(router)
