from django.apps import AppConfig


class SynthesisConfig(AppConfig):
    name = "synthesis"

    def ready(self):
        # The dashboard belongs to tasks, which must not import synthesis: synthesis adds its panel.
        from tasks.dashboard_panels import register

        from .dashboard import panel_context

        register("synthesis", "synthesis/_dashboard_panel.html", panel_context, order=20)
