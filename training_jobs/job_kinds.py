"""The names of training's background jobs (jobs.registry), in one place: the modules with @job entry points
register them under these names and the ones that queue or look up those jobs read them here, so a job's name is
never spelled twice (an SFT run's job was written out in both runs.py and run_jobs.py)."""

BUILD_JOB = "training_jobs.build_dataset"
CONVERT_JOB = "training.convert_base_model"
SFT_RUN_JOB = "training.sft_run"
RL_RUN_JOB = "training.rl_run"
SERVE_JOB = "training.serve_checkpoint"
STOP_IDLE_SERVERS_JOB = "training.stop_idle_servers"  # also in jobs.periodic's schedule, by name
EVALUATE_JOB = "training.evaluate_checkpoints"
