"""python manage.py regrade (--run RUN | --task ID) [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from ...regrade import regrade_rollouts
from ...run_jobs import NothingToRegrade, rollouts_to_regrade


class Command(BaseCommand):
    help = (
        "Score again, in this process, the stored final workspaces of a run's rollouts (--run) or of every finished "
        "rollout of a task, in all runs and alone (--task), with the task's current checker and rubric, without "
        "running the agent again. Each regrade is a new scoring record (the earlier ones are kept) and the runs' "
        "figures take the new scores. With --json the last line is one JSON object. Exits non-zero when a rollout "
        "could not be regraded."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--run", type=int, metavar="RUN", help="the evaluation run's id")
        which.add_argument("--task", metavar="ID", help="the task's external id")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, run, task, as_json, **_options):
        try:
            rollouts = rollouts_to_regrade(run_id=run, task_id=task)
        except NothingToRegrade as exc:
            raise CommandError(str(exc)) from None
        total = rollouts.count()
        self.stderr.write(f"regrading {total} rollout(s)")

        def progress(done: int, of: int) -> None:
            self.stderr.write(f"regraded {done} of {of}")

        result = regrade_rollouts(rollouts, on_progress=progress)
        if as_json:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(f"{result['rollouts']} rollout(s) regraded, {result['changed']} score(s) changed")
            for task_id, figures in result["tasks"].items():
                self.stdout.write(f"{task_id} (now r{figures['revision']}, {figures['rollouts']} rollout(s)): "
                                  f"{_num(figures['before'])} -> {_num(figures['after'])}")  # fmt: skip
            for run_id, figures in result["runs"].items():
                self.stdout.write(f"run #{run_id} overall: {_num(figures['before'])} -> {_num(figures['after'])}")
        if result["failed"]:
            lines = "; ".join(f"#{f['rollout']}: {f['error']}" for f in result["failed"])
            raise CommandError(f"{len(result['failed'])} rollout(s) could not be regraded: {lines}")


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"
