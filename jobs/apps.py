from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Background jobs"

    def ready(self):
        # Each app declares its background entry points in <app>/jobs.py with @job(...).
        autodiscover_modules("jobs")
        from . import engine  # noqa: F401  connects the django-q worker start-up hook (lost-run recovery)
