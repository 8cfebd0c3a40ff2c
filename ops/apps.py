from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Health and metrics"

    def ready(self):
        from . import metrics  # reads the models of jobs and evaluation: only once the apps are loaded

        metrics.register()  # our collectors beside django-prometheus's, on the default registry
