"""The evaluation API, one module per area: rollouts (and their trajectories) and evaluation runs (and the
leaderboard). clawgym_site.api_urls registers both through `register`."""

from . import rollouts, runs


def register(router):
    rollouts.register(router)
    runs.register(router)
