"""python manage.py rollout (--task ID ... | --tasks-from SELECTION) --endpoint NAME [--harness openclaw|builtin]
    [--revision N] [--repeats N] [--json] [--here]
python manage.py rollout --retry ROLLOUT_ID [...] [--json] [--here]
python manage.py rollout --rejudge ROLLOUT_ID [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.services import cancel_job
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from llm.models import ModelEndpoint
from tasks.selection import add_task_arguments, tasks_given, tasks_of

from ...harnesses import HARNESSES
from ...models import Rollout
from ...services.rollouts import (
    RolloutError,
    create_rollouts,
    enqueue_rollout,
    execute_rollout,
    fail_lost_rollouts,
    rejudge_rollout,
    retry_rollout,
)


class Command(BaseCommand):
    help = (
        "Run an agent harness with a model on tasks' current revisions (or, for one task, --revision N), N times "
        "each, and score each final workspace. The rollouts run as jobs on the `sandbox` queue and this command "
        "waits for them; --here runs them one after another in this process instead. With --json the last line is "
        "a JSON array, one object per rollout (also when some failed). Exit status (jobs.cli): 1 when a rollout "
        "could not be scored (failed) or did not finish, 2 when refused, 3 when no worker took the jobs."
    )

    def add_arguments(self, parser):
        add_task_arguments(parser, what="the tasks (external ids)")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--retry", type=int, metavar="ROLLOUT_ID", help="run the next attempt of a failed rollout")
        which.add_argument(
            "--rejudge",
            type=int,
            metavar="ROLLOUT_ID",
            help="judge a rollout's rubric again (here) from its stored final workspace, e.g. when it is incomplete",
        )
        parser.add_argument("--endpoint", help="the model endpoint's name (with --task)")
        parser.add_argument("--revision", type=int, help="with one --task: its revision number (default: the current)")
        parser.add_argument("--harness", choices=sorted(HARNESSES), help="default: settings.CLAWGYM_DEFAULT_HARNESS")
        parser.add_argument("--repeats", type=int, default=1, help="rollouts to run (default 1)")
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a harness option (VALUE is JSON, or else a string), e.g. timeout=300, max_turns=20; repeatable",
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the rollouts as JSON last")
        add_wait_arguments(parser, timeout=6 * 3600.0)

    def handle(
        self,
        *args,
        retry,
        rejudge,
        endpoint,
        revision,
        harness,
        repeats,
        option,
        as_json,
        here,
        timeout,
        start_timeout,
        **flags,
    ):
        if sum(map(bool, (tasks_given(flags), retry, rejudge))) != 1:
            raise UsageError(
                "give --task ID ... (or --tasks-from SELECTION), or --retry ROLLOUT_ID, or --rejudge "
                "ROLLOUT_ID: one of them"
            )
        if rejudge:
            rollout = Rollout.objects.filter(pk=rejudge).first()
            if rollout is None:
                raise UsageError(f"no rollout #{rejudge}")
            try:
                rollout = rejudge_rollout(rollout, user=None)
            except RolloutError as exc:
                raise UsageError(str(exc)) from None
            self._report_one(rollout)
            self._end([rollout], as_json)
            return
        try:
            if retry:
                rollouts = self._retry(retry, here)
            else:
                rollouts = self._create(flags, endpoint, revision, harness, repeats, option, here)
        except RolloutError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the rollouts", exc) from None
        if here:
            for rollout in rollouts:
                self.stderr.write(f"rollout #{rollout.pk}: running here ({rollout.harness}, {rollout.endpoint.name})")
                try:
                    execute_rollout(rollout.pk)
                except Exception as exc:  # recorded on the rollout (failed, runner_error); the others still run
                    self.stderr.write(f"rollout #{rollout.pk}: {type(exc).__name__}: {exc}")
                self._report_one(Rollout.objects.get(pk=rollout.pk))
        else:
            try:
                self._wait(rollouts, timeout=timeout, start_timeout=start_timeout)
            except (NoWorker, NotFinished):
                self._print(self._final(rollouts), as_json)
                raise
        self._end(self._final(rollouts), as_json)

    def _final(self, rollouts: list[Rollout]) -> list[Rollout]:
        final = Rollout.objects.select_related("revision__task", "endpoint").filter(pk__in=[r.pk for r in rollouts])
        return sorted(final, key=lambda r: r.pk)

    # --- what to run ---------------------------------------------------------------------------------------------

    def _create(self, flags, endpoint_name, number, harness, repeats, option, here) -> list[Rollout]:
        if not endpoint_name:
            raise UsageError("--endpoint NAME is required with --task")
        tasks = tasks_of(flags)
        if number and len(tasks) > 1:
            raise UsageError("--revision N goes with one task")
        revisions = []
        for task in tasks:
            revision = task.revisions.filter(number=number).first() if number else task.current_revision
            if revision is None:
                raise UsageError(f"task {task.external_id} has no revision {number or ''}".rstrip())
            revisions.append(revision)
        endpoint = ModelEndpoint.objects.filter(name=endpoint_name).first()
        if endpoint is None:
            known = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none"
            raise UsageError(
                f"no model endpoint named {endpoint_name!r} (known: {known}); add one with `endpoints add`"
            )
        options = _options(option)
        rollouts = [
            rollout
            for revision in revisions
            for rollout in create_rollouts(
                revision, endpoint, harness=harness, repeats=repeats, options=options, user=None
            )
        ]
        if not here:
            for rollout in rollouts:
                enqueue_rollout(rollout, user=None)
        return rollouts

    def _retry(self, rollout_id: int, here: bool) -> list[Rollout]:
        rollout = Rollout.objects.filter(pk=rollout_id).first()
        if rollout is None:
            raise UsageError(f"no rollout #{rollout_id}")
        return [retry_rollout(rollout, enqueue=not here, user=None)]

    # --- waiting for the workers ---------------------------------------------------------------------------------

    def _wait(self, rollouts: list[Rollout], *, timeout: float, start_timeout: float) -> None:
        ids = [r.pk for r in rollouts]
        seen: dict[int, str] = {}
        current: list[Rollout] = []

        def finished() -> bool:
            current[:] = Rollout.objects.filter(pk__in=ids).select_related("job_run", "revision__task", "endpoint")
            for rollout in current:
                if seen.get(rollout.pk) != rollout.status:
                    seen[rollout.pk] = rollout.status
                    self._report_one(rollout)
            return all(r.is_finished for r in current)

        def taken() -> bool:
            return any(not r.job_run or r.job_run.status != JobRun.Status.QUEUED for r in current)

        def cancel() -> None:
            untaken = [r for r in current if r.job_run and r.job_run.status == JobRun.Status.QUEUED]
            for rollout in untaken:
                cancel_job(rollout.job_run, user=None)  # a worker starting later must not run stale requests
            Rollout.objects.filter(pk__in=[r.pk for r in untaken], status=Rollout.Status.QUEUED).update(
                status=Rollout.Status.CANCELLED, exit_reason="cancelled", error="no worker took the job"
            )

        wait_for(
            Work(
                what="the rollout jobs",
                queues=("sandbox",),
                finished=finished,
                taken=taken,
                cancel=cancel,
                cancelled="The rollouts were cancelled.",
                reclaim_lost=fail_lost_rollouts,  # a killed worker's rollout would otherwise look "running" forever
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )

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

    def _end(self, rollouts: list[Rollout], as_json: bool) -> None:
        """Print the rollouts, then exit 1 when one is not scored."""
        self._print(rollouts, as_json)
        incomplete = [r.pk for r in rollouts if r.status == Rollout.Status.INCOMPLETE]
        if incomplete:
            raise CommandError(
                f"rollout(s) {', '.join(map(str, incomplete))} lack rubric judgements (see score_reason): add a judge "
                "endpoint (`endpoints add … --role judge`) and run `rollout --rejudge ID`"
            )
        scored = [r for r in rollouts if r.status == Rollout.Status.SCORED]
        if len(scored) < len(rollouts):
            raise CommandError(f"{len(rollouts) - len(scored)} rollout(s) were not scored")

    def _print(self, rollouts: list[Rollout], as_json: bool) -> None:
        rows = [r.as_dict() for r in rollouts]
        scored = [r.score for r in rollouts if r.status == Rollout.Status.SCORED]
        summary = f"{len(scored)} of {len(rows)} rollouts scored"
        if scored:
            summary += f"; mean score {sum(scored) / len(scored):.3f}"
        if not as_json:
            for row in rows:
                score = "-" if row["score"] is None else f"{row['score']:g}"
                self.stdout.write(
                    f"#{row['id']} {row['task']} r{row['revision']} {row['status']} score {score} "
                    f"{row['exit_reason']} turns {row['turns']} tool calls {row['tool_calls']}"
                )
        self.stdout.write(summary)
        if as_json:
            self.stdout.write(json.dumps(rows, ensure_ascii=False))


def _options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options
