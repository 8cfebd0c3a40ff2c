"""The names of the catalog's background jobs (jobs.registry), in one place: jobs.py registers its entry points
under them and the modules that queue or look up those jobs read them here, importing nothing else."""

IMPORT_JOB = "tasks.import_upload"
SANITY_JOB = "tasks.sanity_check"
SANITY_BATCH_JOB = "tasks.sanity_check_batch"
CATEGORIZE_JOB = "tasks.categorize"
ACCEPT_JOB = "tasks.accept_categories"
