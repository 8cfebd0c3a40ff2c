"""python manage.py synthesize --route persona|skill --count N --generator E --judge E [--seed S] [--preview]
    [--budget-usd X] [--budget-tokens N] [--qa-stages A,B] [--here] [--json]
python manage.py synthesize --resume BATCH [--budget-usd X] [--budget-tokens N] [--here] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for

from ...batch_plan import BatchError
from ...batch_report import batch_json
from ...job_kinds import RUN_ITEM_JOB
from ...models import QAStage, SynthesisBatch, SynthesisItem
from ...pipeline import reclaim_lost_items
from ...services import cancel_batch, resume_batch, run_here, start_batch

_UNSET = object()


class Command(BaseCommand):
    help = (
        "Synthesize tasks: start a batch (route, count, generator and judge endpoints, seed) and wait for it; its "
        "items run as jobs (synthesis.run_item on the `sandbox` queue), or in this process with --here. A batch "
        "with the same configuration as an earlier one (same --seed) resumes that one. --preview runs 5 items "
        "through every stage. One line per finished item goes to stderr; with --json the last line is "
        '{"batch", "status", "requested", "kept", "rejected", "failed", "tokens", "cost"} (also when it did not '
        "complete). Exit status (jobs.cli): 0 when the batch is complete, 1 when it is paused (budget), failed or "
        "cancelled, 2 when refused, 3 when no worker took it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--route", choices=["persona", "skill"])
        parser.add_argument("--count", type=int, help="tasks wanted (one item each)")
        parser.add_argument("--generator", help="the generator endpoint's name")
        parser.add_argument("--judge", help="the judge endpoint's name (QA)")
        parser.add_argument("--seed", type=int, help="draws the items (default: a random one)")
        parser.add_argument("--preview", action="store_true", help="a preview batch: 5 items through every stage")
        parser.add_argument("--budget-usd", type=float, default=_UNSET, help="pause the batch at this cost")
        parser.add_argument("--budget-tokens", type=int, default=_UNSET, help="pause the batch at this many tokens")
        parser.add_argument(
            "--qa-stages",
            metavar="A,B",
            help="the QA stages to run (default every one: novelty,plausibility,difficulty,leak,alignment,rubric; "
            '"" none)',
        )
        parser.add_argument("--resume", type=int, metavar="BATCH", help="go on with that batch")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the batch as JSON last")
        add_wait_arguments(parser, timeout=24 * 3600.0)

    def handle(self, *args, **flags):
        try:
            batch = self._resume(flags) if flags["resume"] else self._start(flags)
        except BatchError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the batch", exc) from None
        if flags["here"]:
            batch = run_here(batch, on_item=lambda item: self.stderr.write(item_line(item)))
        else:
            try:
                self._wait(batch, timeout=flags["timeout"], start_timeout=flags["start_timeout"])
            except (NoWorker, NotFinished):
                batch.refresh_from_db()
                self._print(batch, flags["as_json"])
                raise
            batch.refresh_from_db()
        self._print(batch, flags["as_json"])
        if batch.status != SynthesisBatch.Status.COMPLETE:
            why = f": {batch.status_reason}" if batch.status_reason else ""
            raise CommandError(
                f"batch #{batch.pk} is {batch.status}{why}. `manage.py synthesize --resume {batch.pk}` "
                "goes on with it (--budget-usd / --budget-tokens to raise its budget)"
            )

    def _budgets(self, flags) -> dict:
        budgets = {}
        if flags["budget_usd"] is not _UNSET:
            budgets["budget_usd"] = flags["budget_usd"]
        if flags["budget_tokens"] is not _UNSET:
            budgets["budget_tokens"] = flags["budget_tokens"]
        return budgets

    def _start(self, flags) -> SynthesisBatch:
        missing = [f"--{name}" for name in ("route", "generator", "judge") if not flags[name]]
        if flags["count"] is None and not flags["preview"]:
            missing.append("--count")
        if missing:
            raise UsageError(f"{', '.join(missing)} required (or --resume BATCH)")
        batch = start_batch(
            flags["route"],
            flags["count"] or 0,
            flags["generator"],
            flags["judge"],
            seed=flags["seed"],
            preview=flags["preview"],
            here=flags["here"],
            options=qa_options(flags["qa_stages"]),
            user=None,
            **self._budgets(flags),
        )
        self.stderr.write(
            f"batch #{batch.pk} ({batch.route}, seed {batch.seed}): {batch.requested} items, "
            f"{batch.items.filter(status__in=SynthesisItem.FINISHED).count()} finished before"
        )
        return batch

    def _resume(self, flags) -> SynthesisBatch:
        given = [f"--{name}" for name in ("route", "count", "generator", "judge", "seed") if flags[name] is not None]
        if given or flags["preview"]:
            raise UsageError(
                f"--resume goes on with the batch as it was started: {', '.join(given) or '--preview'} "
                "does not go with it"
            )
        batch = SynthesisBatch.objects.filter(pk=flags["resume"]).first()
        if batch is None:
            raise UsageError(f"no synthesis batch #{flags['resume']}")
        batch = resume_batch(batch, here=flags["here"], user=None, **self._budgets(flags))
        self.stderr.write(
            f"batch #{batch.pk} resumed: {batch.items.filter(status__in=SynthesisItem.FINISHED).count()}"
            f" of {batch.requested} items finished before"
        )
        return batch

    def _wait(self, batch: SynthesisBatch, *, timeout: float, start_timeout: float) -> None:
        seen = set(self._finished(batch))  # finished before this command started: not reported again
        finished_before = len(seen)

        def report_finished() -> None:
            for item in batch.items.filter(status__in=SynthesisItem.FINISHED).exclude(pk__in=seen).order_by("index"):
                seen.add(item.pk)
                self.stderr.write(item_line(item))

        def finished() -> bool:
            batch.refresh_from_db()
            return batch.is_finished or batch.status == SynthesisBatch.Status.PAUSED

        def reclaim_lost() -> None:
            if reclaim_lost_items(batch):  # a killed worker's items would otherwise look "running" forever
                resume_batch(batch, user=None)

        wait_for(
            Work(
                what=f"batch #{batch.pk}",
                queues=("default", "sandbox"),
                finished=finished,
                taken=lambda: self._taken(batch, finished_before=finished_before),
                cancel=lambda: cancel_batch(
                    batch, user=None
                ),  # a worker starting later must not run what nobody waits for
                cancelled=f"The batch was cancelled; `manage.py synthesize --resume {batch.pk}` runs it again.",
                follow=f"`manage.py synthesis_report {batch.pk}` shows where it is",
                progress=report_finished,
                reclaim_lost=reclaim_lost,
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )

    def _taken(self, batch: SynthesisBatch, *, finished_before: int) -> bool:
        """Whether a worker has started on the batch's items (its own job only fans them out)."""
        if batch.items.filter(status=SynthesisItem.Status.RUNNING).exists():
            return True
        if batch.items.filter(status__in=SynthesisItem.FINISHED).count() != finished_before:
            return True
        return (
            JobRun.objects.filter(parent_id=batch.job_run_id, kind=RUN_ITEM_JOB)
            .exclude(status=JobRun.Status.QUEUED)
            .exists()
        )

    def _finished(self, batch):
        return batch.items.filter(status__in=SynthesisItem.FINISHED).values_list("pk", flat=True)

    def _print(self, batch: SynthesisBatch, as_json: bool) -> None:
        report = batch_json(batch)
        if as_json:
            self.stdout.write(json.dumps(report))
            return
        self.stdout.write(
            f"batch #{report['batch']}: {report['status']}, {report['kept']} of {report['requested']} "
            f"kept; tokens {report['tokens']:,}, cost {report['cost']:.4f}"
        )
        for what in ("rejected", "failed"):
            if report[what]:
                self.stdout.write(f"{what}: " + ", ".join(f"{stage} {n}" for stage, n in report[what].items()))


def qa_options(value: str | None) -> dict:
    if value is None:
        return {}
    stages = [stage.strip() for stage in value.split(",") if stage.strip()]
    unknown = [stage for stage in stages if stage not in QAStage.values]
    if unknown:
        raise UsageError(f"unknown QA stage(s) {', '.join(unknown)}; choose from {', '.join(QAStage.values)}")
    return {"qa_stages": stages}


def item_line(item: SynthesisItem) -> str:
    line = f"item {item.index + 1} (#{item.pk}): {item.status} at {item.stage}"
    return line + (f": {item.reason.splitlines()[0][:200]}" if item.reason else "")
