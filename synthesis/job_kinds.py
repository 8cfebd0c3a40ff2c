"""The names of synthesis's background jobs (jobs.registry), in one place: jobs.py registers their entry
points under them and the modules that queue or look up those jobs read them here."""

ANNOTATE_JOB = "synthesis.annotate_skills"
RUN_BATCH_JOB = "synthesis.run_batch"
RUN_ITEM_JOB = "synthesis.run_item"
ASSESS_JOB = "synthesis.assess_tasks"
