"""Every state change of evaluation, one module per area; views, the API, commands and jobs call them.

    rollouts      a rollout's life: start, run one attempt, retry, rejudge, mark lost ones failed
    results       what an attempt leaves on its rollout (agent fields, scores, files, trajectories), and clearing it
    run_progress  an evaluation run as its rollouts change: outcome classes, task rows and counters, retries of
                  infrastructure failures, handing rollouts to the engine, finishing the run
    runs          an evaluation run's life: start (or resume the earlier run of the same settings), resume, cancel,
                  the pass threshold, running it in this process
    regrade       scoring stored final workspaces again with the tasks' current checkers and rubrics
    scans         transcript scans of finished runs

The read side (figures, JSON, comparisons, the leaderboard) is evaluation.reports.

Every one that acts for someone takes the acting user (`user=`, keyword, required): None where no one acts (an
automatic retry) or no one is signed in (a command's own process).
"""
