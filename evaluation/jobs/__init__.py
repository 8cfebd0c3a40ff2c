"""Background entry points of evaluation (found by jobs' autodiscovery of `<app>.jobs`), one module per area:
rollouts (one job per rollout attempt) and runs (regrade)."""

from . import rollouts, runs  # noqa: F401  (importing them registers their job kinds)
