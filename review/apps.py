from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"

    def ready(self):
        # tasks.sanity_check --json shows the solvability proof, whose rollouts tasks may not import: hand it in.
        from tasks.sanity import register_solvability

        from .solvability import solvability

        register_solvability(solvability)
