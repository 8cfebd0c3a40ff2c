"""The training pages (under /training/; training_jobs.urls lists them), one module per area:

    datasets     the datasets: list, build form, one dataset's figures and samples, the dashboard panel
    base_models  the registered base models: add by path or from a shipped converter, serve and stop
    runs         the runs: list, start forms (SFT, RL), one run's page (its kind's part from training_jobs.kinds),
                 checkpoints served and evaluated, curves overlaid, the dashboard panel
    clone        a run's clone page: its config as key=value lines to edit

State changes are training_jobs.services' (and base_models', serving's, evaluations'); these views validate with
training_jobs.forms and call them.
"""
