"""Where training keeps its files: the training folder (CLAWGYM_TRAINING_DIR, default var/training) and each run's
folder in it. Its own module so that the run jobs and the model servers both find them, neither importing the other
for a path."""

from pathlib import Path

from django.conf import settings


def training_root() -> Path:
    return Path(getattr(settings, "CLAWGYM_TRAINING_DIR", settings.VAR_DIR / "training"))


def run_dir(run) -> Path:
    # The creation time in the name: a database started afresh (tests, a new deployment) reuses run ids, and a new
    # run must never find an old one's data or checkpoints.
    return training_root() / f"run-{run.pk}-{run.created_at:%Y%m%d%H%M%S%f}"


def tensorboard_dir(run) -> Path:
    """Where a run reporting to TensorBoard writes its event files (`tensorboard --logdir` this folder)."""
    return run_dir(run) / "tensorboard"
