from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self):
        # A rollout whose worker died is failed (retryable) when the lost job runs are recovered: as a new worker
        # starts, and periodically; not only when the next rollout job happens to start.
        from jobs.runner import register_recovery

        from .services.rollouts import fail_lost_rollouts

        register_recovery(fail_lost_rollouts)

        # The dashboard belongs to tasks, which must not import evaluation: evaluation adds its panel.
        from tasks.dashboard_panels import register

        from .views.dashboard import panel_context

        register(
            "evaluation",
            "evaluation/_dashboard_panel.html",
            panel_context,
            order=10,
            scripts=["vendor/chartjs/chart.umd.min.js", "js/charts.js"],
        )
