"""The evaluation pages, one module per area (evaluation/urls.py routes them: rollouts under /rollouts/, the rest
under /evaluations/).

    rollouts   the rollouts list and start form, one rollout, a rollout's trajectories, the trajectory statistics
    runs       evaluation runs: the list, starting one, one run and its actions and exports, the leaderboard, the
               comparison of two runs
    samples    a run's samples searched and filtered, and one task's rollouts of two runs side by side
    dashboard  the evaluation panel of the dashboard (registered in apps.py; it has no urls)
"""
