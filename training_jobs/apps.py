from django.apps import AppConfig


class TrainingJobsConfig(AppConfig):
    name = "training_jobs"

    def ready(self):
        # The dashboard belongs to tasks, which must not import training_jobs: training adds its panels.
        from tasks.dashboard_panels import register

        from .views.datasets import dashboard_panel_context
        from .views.runs import dashboard_panel_context as runs_panel_context

        register("training-data", "training_jobs/_datasets_panel.html", dashboard_panel_context, order=30)
        register("training-runs", "training_jobs/_runs_panel.html", runs_panel_context, order=31)

        # Freezing a benchmark version checks its tasks against training data, which benchmarks cannot import.
        from benchmarks.contamination import register as register_contamination_check

        from .contamination import check_revisions

        register_contamination_check(check_revisions)
