"""Background entry points of evaluation (found by jobs' autodiscovery of `<app>.jobs`), one module per area:
rollouts (one job per rollout attempt), runs (regrade) and scans (transcript scanners)."""

from . import rollouts, runs, scans  # noqa: F401  (importing them registers their job kinds)
