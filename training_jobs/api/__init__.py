"""Training over the API (DRF), on the site's one router, one module per area:

datasets     /api/training/datasets/
base_models  /api/training/base-models/
runs         /api/training/runs/ (every kind through one POST), checkpoints/ and servers/
"""

from . import runs
from .base_models import BaseModelViewSet
from .datasets import TrainingDatasetViewSet


def register(router) -> None:
    router.register("training/datasets", TrainingDatasetViewSet, basename="training-dataset")
    router.register("training/base-models", BaseModelViewSet, basename="training-base-model")
    runs.register(router)
