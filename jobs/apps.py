from django.apps import AppConfig
from django.core import checks
from django.utils.module_loading import autodiscover_modules


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Background jobs"

    def ready(self):
        # Each app declares its background entry points in <app>/jobs.py with @job(...).
        autodiscover_modules("jobs")
        # Connect the django-q worker start-up hooks: lost-run recovery, and each worker process's beat.
        from . import engine, workers  # noqa: F401
        from .periodic import check_table

        checks.register(check_table)
