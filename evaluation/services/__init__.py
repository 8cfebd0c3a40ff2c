"""Every state change of evaluation, one module per area; views, the API, commands and jobs call them.

    rollouts  a rollout's life: start, run one attempt, retry, rejudge, mark lost ones failed
    runs      an evaluation run's life: start (or resume the earlier run of the same settings), resume, cancel,
              the pass threshold, its figures as its rollouts finish
    regrade   scoring stored final workspaces again with the tasks' current checkers and rubrics

The read side (figures, JSON, comparisons, the leaderboard) is evaluation.reports.

Every one that acts for someone takes the acting user (`user=`, keyword, required): None where no one acts (an
automatic retry) or no one is signed in (a command's own process).
"""
