from django.apps import AppConfig


class TrainingJobsConfig(AppConfig):
    name = "training_jobs"

    def ready(self):
        # The dashboard belongs to tasks, which must not import training_jobs: training adds its panels.
        from tasks.dashboard_panels import register

        from .dataset_views import dashboard_panel_context
        from .run_views import dashboard_panel_context as runs_panel_context

        register("training-data", "training/_datasets_panel.html", dashboard_panel_context, order=30)
        register("training-runs", "training/_runs_panel.html", runs_panel_context, order=31)
