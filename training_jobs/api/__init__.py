"""Training over the API: datasets (training_jobs.api.datasets), runs, checkpoints and servers, on the site's one
router."""

from . import runs
from .base_models import BaseModelViewSet
from .datasets import TrainingDatasetViewSet


def register(router) -> None:
    router.register("training/datasets", TrainingDatasetViewSet, basename="training-dataset")
    router.register("training/base-models", BaseModelViewSet, basename="training-base-model")
    runs.register(router)
