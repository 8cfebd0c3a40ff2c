"""python manage.py regrade (--run RUN | --task ID ... | --tasks-from SELECTION) [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError
from tasks.selection import add_task_arguments, tasks_given, tasks_of

from ...jobs.runs import NothingToRegrade, rollouts_to_regrade
from ...models import Rollout
from ...services.regrade import regradable, regrade_rollouts


class Command(BaseCommand):
    help = (
        "Score again, in this process, the stored final workspaces of a run's rollouts (--run) or of every finished "
        "rollout of tasks, in all runs and alone (--task, --tasks-from), with the task's current checker and rubric, "
        "without running the agent again. Each regrade is a new scoring record (the earlier ones are kept) and the "
        "runs' figures take the new scores. With --json the last line is one JSON object. Exit status (jobs.cli): 1 "
        "when a rollout could not be regraded, 2 when refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, metavar="RUN", help="the evaluation run's id")
        add_task_arguments(parser, what="the tasks' external ids")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, run, as_json, **flags):
        if (run is None) == (not tasks_given(flags)):
            raise UsageError("give --run RUN or --task ID ... / --tasks-from SELECTION: one of them")
        if run is not None:
            try:
                rollouts = rollouts_to_regrade(run_id=run)
            except NothingToRegrade as exc:
                raise UsageError(str(exc)) from None
        else:
            rollouts = regradable(Rollout.objects.filter(revision__task__in=tasks_of(flags))).order_by("pk")
        total = rollouts.count()
        self.stderr.write(f"regrading {total} rollout(s)")

        def progress(done: int, of: int) -> None:
            self.stderr.write(f"regraded {done} of {of}")

        result = regrade_rollouts(rollouts, on_progress=progress, user=None)
        if as_json:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(f"{result['rollouts']} rollout(s) regraded, {result['changed']} score(s) changed")
            for task_id, figures in result["tasks"].items():
                self.stdout.write(
                    f"{task_id} (now r{figures['revision']}, {figures['rollouts']} rollout(s)): "
                    f"{_num(figures['before'])} -> {_num(figures['after'])}"
                )
            for run_id, figures in result["runs"].items():
                self.stdout.write(f"run #{run_id} overall: {_num(figures['before'])} -> {_num(figures['after'])}")
        if result["failed"]:
            lines = "; ".join(f"#{f['rollout']}: {f['error']}" for f in result["failed"])
            raise CommandError(f"{len(result['failed'])} rollout(s) could not be regraded: {lines}")


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"
