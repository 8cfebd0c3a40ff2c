from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"

    def ready(self):
        # tasks.sanity_check --json shows the solvability proof, whose rollouts tasks may not import: hand it in.
        from tasks.sanity import register_solvability
        from tasks.services import register_checker_change

        from .rediagnosis import after_checker_change
        from .solvability import solvability

        register_solvability(solvability)
        # Every path that changes a candidate's checker (review, task API, import) re-checks and re-diagnoses it.
        register_checker_change(after_checker_change)
