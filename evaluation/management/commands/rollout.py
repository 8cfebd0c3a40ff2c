"""python manage.py rollout --task ID --endpoint NAME [--harness openclaw|builtin] [--repeats N] [--json] [--here]
python manage.py rollout --retry ROLLOUT_ID [...] [--json] [--here]
python manage.py rollout --rejudge ROLLOUT_ID [--json]"""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from llm.models import ModelEndpoint
from tasks.models import Task

from ...harnesses import HARNESSES
from ...models import Rollout
from ...services import (
    RolloutError,
    create_rollouts,
    enqueue_rollout,
    execute_rollout,
    fail_lost_rollouts,
    rejudge_rollout,
    retry_rollout,
)

POLL_SECONDS = 0.5
RECHECK_LOST_SECONDS = 10.0


class Command(BaseCommand):
    help = (
        "Run an agent harness with a model on a task's current revision (or --revision N), N times, and score "
        "each final workspace. The rollouts run as jobs on the `sandbox` queue and this command waits for them; "
        "--here runs them one after another in this process instead. With --json the last line is a JSON array, "
        "one object per rollout. Exits non-zero when a rollout could not be scored (failed) or did not finish."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--task", help="the task's external id")
        which.add_argument("--retry", type=int, metavar="ROLLOUT_ID", help="run the next attempt of a failed rollout")
        which.add_argument(
            "--rejudge", type=int, metavar="ROLLOUT_ID",
            help="judge a rollout's rubric again (here) from its stored final workspace, e.g. when it is incomplete",
        )  # fmt: skip
        parser.add_argument("--endpoint", help="the model endpoint's name (with --task)")
        parser.add_argument("--revision", type=int, help="the revision number (default: the current one)")
        parser.add_argument("--harness", choices=sorted(HARNESSES), help="default: settings.CLAWGYM_DEFAULT_HARNESS")
        parser.add_argument("--repeats", type=int, default=1, help="rollouts to run (default 1)")
        parser.add_argument(
            "--option", action="append", default=[], metavar="KEY=VALUE",
            help="a harness option (VALUE is JSON, or else a string), e.g. timeout=300, max_turns=20; repeatable",
        )  # fmt: skip
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the rollouts as JSON last")
        parser.add_argument("--here", action="store_true", help="run in this process instead of on the job workers")
        parser.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds to wait for all (6 h)")
        parser.add_argument(
            "--start-timeout", type=float, default=60.0,
            help="seconds to wait for a worker to take the first job before giving up (60)",
        )  # fmt: skip

    def handle(self, *args, task, retry, rejudge, endpoint, revision, harness, repeats, option, as_json, here,
               timeout, start_timeout, **_options):  # fmt: skip
        if rejudge:
            rollout = Rollout.objects.filter(pk=rejudge).first()
            if rollout is None:
                raise CommandError(f"no rollout #{rejudge}")
            try:
                rollout = rejudge_rollout(rollout)
            except RolloutError as exc:
                raise CommandError(str(exc)) from None
            self._report_one(rollout)
            self._print([rollout], as_json)
            return
        try:
            if retry:
                rollouts = self._retry(retry, here)
            else:
                rollouts = self._create(task, endpoint, revision, harness, repeats, option, here)
        except RolloutError as exc:
            raise CommandError(str(exc)) from None
        except JobEngineError as exc:
            raise CommandError(f"the job engine did not take the rollouts: {exc}") from None
        if here:
            for rollout in rollouts:
                self.stderr.write(f"rollout #{rollout.pk}: running here ({rollout.harness}, {rollout.endpoint.name})")
                try:
                    execute_rollout(rollout.pk)
                except Exception as exc:  # recorded on the rollout (failed, runner_error); the others still run
                    self.stderr.write(f"rollout #{rollout.pk}: {type(exc).__name__}: {exc}")
                self._report_one(Rollout.objects.get(pk=rollout.pk))
        else:
            self._wait(rollouts, timeout=timeout, start_timeout=start_timeout)
        final = Rollout.objects.select_related("revision__task", "endpoint").filter(pk__in=[r.pk for r in rollouts])
        self._print(sorted(final, key=lambda r: r.pk), as_json)

    # --- what to run ---------------------------------------------------------------------------------------------

    def _create(self, task_id, endpoint_name, number, harness, repeats, option, here) -> list[Rollout]:
        if not endpoint_name:
            raise CommandError("--endpoint NAME is required with --task")
        task = Task.objects.filter(external_id=task_id).select_related("current_revision").first()
        if task is None:
            raise CommandError(f"no such task: {task_id}")
        revision = task.revisions.filter(number=number).first() if number else task.current_revision
        if revision is None:
            raise CommandError(f"task {task_id} has no revision {number or ''}".rstrip())
        endpoint = ModelEndpoint.objects.filter(name=endpoint_name).first()
        if endpoint is None:
            known = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none"
            raise CommandError(
                f"no model endpoint named {endpoint_name!r} (known: {known}); add one with `endpoints add`"
            )
        rollouts = create_rollouts(revision, endpoint, harness=harness, repeats=repeats, options=_options(option))
        if not here:
            for rollout in rollouts:
                enqueue_rollout(rollout)
        return rollouts

    def _retry(self, rollout_id: int, here: bool) -> list[Rollout]:
        rollout = Rollout.objects.filter(pk=rollout_id).first()
        if rollout is None:
            raise CommandError(f"no rollout #{rollout_id}")
        return [retry_rollout(rollout, enqueue=not here)]

    # --- waiting for the workers ---------------------------------------------------------------------------------

    def _wait(self, rollouts: list[Rollout], *, timeout: float, start_timeout: float) -> None:
        ids = [r.pk for r in rollouts]
        started = time.monotonic()
        last_lost_check = started
        seen: dict[int, str] = {}
        while True:
            current = list(Rollout.objects.filter(pk__in=ids).select_related("job_run", "revision__task", "endpoint"))
            for rollout in current:
                if seen.get(rollout.pk) != rollout.status:
                    seen[rollout.pk] = rollout.status
                    self._report_one(rollout)
            if all(r.is_finished for r in current):
                return
            now = time.monotonic()
            untaken = [r for r in current if r.job_run and r.job_run.status == JobRun.Status.QUEUED]
            if len(untaken) == len(current) and now - started > start_timeout:
                for rollout in untaken:
                    cancel_job(rollout.job_run, user=None)  # a worker starting later must not run stale requests
                Rollout.objects.filter(pk__in=[r.pk for r in untaken], status=Rollout.Status.QUEUED).update(
                    status=Rollout.Status.CANCELLED, exit_reason="cancelled", error="no worker took the job"
                )
                raise CommandError(
                    f"no job worker took the rollout jobs within {start_timeout:g} s: are workers running on the "
                    "sandbox queue? (`manage.py check_workers` tells; `manage.py qcluster` or a Celery worker with "
                    "-Q sandbox starts one). Or pass --here to run them in this process. The rollouts were cancelled."
                )
            if now - started > timeout:
                raise CommandError(f"the rollouts did not finish within {timeout:g} s; they go on running")
            if now - last_lost_check > RECHECK_LOST_SECONDS:
                fail_lost_rollouts()  # a killed worker's rollout would otherwise look "running" forever
                last_lost_check = now
            time.sleep(POLL_SECONDS)

    # --- output --------------------------------------------------------------------------------------------------

    def _report_one(self, rollout: Rollout) -> None:
        line = f"rollout #{rollout.pk} (repeat {rollout.repeat_index}): {rollout.status}"
        if rollout.status == Rollout.Status.SCORED:
            line += f", score {rollout.score:g} ({rollout.exit_reason}, {rollout.turns} turns)"
        elif rollout.status == Rollout.Status.INCOMPLETE:
            line += f": code score {rollout.code_score:g}; {rollout.score_reason}"
        elif rollout.is_finished:
            line += f": {rollout.exit_reason}: {rollout.error.splitlines()[0] if rollout.error else ''}"
        self.stderr.write(line)

    def _print(self, rollouts: list[Rollout], as_json: bool) -> None:
        rows = [r.as_dict() for r in rollouts]
        scored = [r.score for r in rollouts if r.status == Rollout.Status.SCORED]
        summary = f"{len(scored)} of {len(rows)} rollouts scored"
        if scored:
            summary += f"; mean score {sum(scored) / len(scored):.3f}"
        if not as_json:
            for row in rows:
                score = "-" if row["score"] is None else f"{row['score']:g}"
                self.stdout.write(f"#{row['id']} {row['task']} r{row['revision']} {row['status']} score {score} "
                                  f"{row['exit_reason']} turns {row['turns']} tool calls {row['tool_calls']}")
        self.stdout.write(summary)
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))
        incomplete = [r.pk for r in rollouts if r.status == Rollout.Status.INCOMPLETE]
        if incomplete:
            raise CommandError(
                f"rollout(s) {', '.join(map(str, incomplete))} lack rubric judgements (see score_reason): add a judge "
                "endpoint (`endpoints add … --role judge`) and run `rollout --rejudge ID`"
            )
        if len(scored) < len(rows):
            raise CommandError(f"{len(rows) - len(scored)} rollout(s) were not scored")


def _options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options
