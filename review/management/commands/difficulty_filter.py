"""python manage.py difficulty_filter --benchmark NAME --strong E --small E [--n 4] [--candidate TASK_ID ...]
[--harness openclaw|builtin] [--here] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Benchmark
from evaluation.harnesses import HARNESSES
from evaluation.models import EvalRun, Rollout
from evaluation.services.rollouts import MAX_REPEATS, fail_lost_rollouts
from evaluation.services.runs import cancel_eval_run
from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from llm.models import ModelEndpoint
from review.difficulty import (
    DifficultyError,
    filter_json,
    finish_difficulty_filter,
    run_difficulty_filter_here,
    start_difficulty_filter,
    verdict_counts,
)
from review.models import DifficultyFilter

PROGRESS_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Difficulty-aware filtering of a benchmark's candidates (the open and accepted ones, or --candidate ...): "
        "a strong and a small agent endpoint each run N times on every candidate's current revision, as two "
        "evaluation runs on the job workers (--here: in this process), and each candidate gets a verdict: keep "
        "(strong >= the benchmark's strong minimum, small <= its small maximum, strong > small), too_hard, "
        "too_easy, not_discriminative or incomplete (an agent has no score: infrastructure failures). "
        'With --json the last line is {task id: {"strong", "small", "verdict"}} (also when the filter failed). '
        "Exit status (jobs.cli): 1 when the filter failed or did not finish, 2 when refused, 3 when no worker took "
        "the rollout jobs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument("--strong", required=True, metavar="ENDPOINT", help="the strong agent's model endpoint")
        parser.add_argument("--small", required=True, metavar="ENDPOINT", help="the small agent's model endpoint")
        parser.add_argument("--n", type=int, default=4, help="rollouts of each agent per candidate (4)")
        parser.add_argument(
            "--candidate",
            action="extend",
            nargs="+",
            default=[],
            metavar="TASK_ID",
            help="only these candidates (their task ids); repeatable. Default: the open and accepted candidates",
        )
        parser.add_argument("--harness", choices=sorted(HARNESSES), help="default: settings.CLAWGYM_DEFAULT_HARNESS")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the verdicts as JSON last")
        add_wait_arguments(parser, timeout=24 * 3600.0)

    def handle(
        self, *args, benchmark, strong, small, n, candidate, harness, as_json, here, timeout, start_timeout, **options
    ):
        if not 1 <= n <= MAX_REPEATS:
            raise UsageError(f"--n (rollouts of each agent per candidate) must be between 1 and {MAX_REPEATS}, got {n}")
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise UsageError(f"no benchmark is named {benchmark!r}")
        settings_ = {
            "strong": _endpoint(strong),
            "small": _endpoint(small),
            "n": n,
            "harness": harness,
            "candidates": _candidates(bench, candidate) if candidate else None,
            "user": None,
        }
        try:
            if here:
                flt = run_difficulty_filter_here(bench, on_rollout=self._report_rollout, **settings_)
            else:
                flt = start_difficulty_filter(bench, **settings_)
                self.stderr.write(
                    f"difficulty filter #{flt.pk}: runs #{flt.strong_run_id} (strong, {strong}) and "
                    f"#{flt.small_run_id} (small, {small}) queued"
                )
                flt = self._wait(flt, timeout=timeout, start_timeout=start_timeout)
        except DifficultyError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the rollouts", exc) from None
        except (NoWorker, NotFinished):
            flt.refresh_from_db()
            self._print(flt, as_json)
            raise
        self._print(flt, as_json)
        if flt.status == DifficultyFilter.Status.FAILED:
            raise CommandError(f"difficulty filter #{flt.pk} failed: {flt.error}")
        if flt.status != DifficultyFilter.Status.FINISHED:
            raise CommandError(f"difficulty filter #{flt.pk} has not finished")

    # --- waiting for the workers ---------------------------------------------------------------------------------

    def _wait(self, flt: DifficultyFilter, *, timeout: float, start_timeout: float) -> DifficultyFilter:
        """Until both runs have finished, then the verdicts."""
        run_ids = [flt.strong_run_id, flt.small_run_id]

        def runs() -> list[EvalRun]:
            return list(EvalRun.objects.filter(pk__in=run_ids).order_by("pk"))

        def cancel() -> None:
            for run in runs():
                cancel_eval_run(run, user=None)  # a worker starting later must not run stale requests
            finish_difficulty_filter(flt)  # fails it: its runs were cancelled

        wait_for(
            Work(
                what="the rollout jobs",
                queues=("sandbox",),
                finished=lambda: all(run.is_finished for run in runs()),
                taken=lambda: self._taken(run_ids),
                cancel=cancel,
                cancelled="The runs were cancelled.",
                follow=f"the filter gives its verdicts when they end: GET /api/difficulty-filters/{flt.pk}/",
                progress=lambda: self.stderr.write(
                    ", ".join(f"run #{r.pk} {r.status}: {r.rollouts_finished}/{r.rollouts_total}" for r in runs())
                ),
                progress_every=PROGRESS_SECONDS,
                reclaim_lost=fail_lost_rollouts,  # a killed worker's rollout would otherwise look "running" forever
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )
        # The runs' jobs give the verdicts too; whichever comes first does it, the other finds it done.
        return finish_difficulty_filter(flt)

    @staticmethod
    def _taken(run_ids) -> bool:
        """Whether a worker has taken any of the runs' rollout jobs (or a rollout got further than queued)."""
        rollouts = Rollout.objects.filter(eval_run_id__in=run_ids)
        if rollouts.exclude(status=Rollout.Status.QUEUED).exists():
            return True
        return rollouts.exclude(job_run__status=JobRun.Status.QUEUED).exclude(job_run__isnull=True).exists()

    # --- output --------------------------------------------------------------------------------------------------

    def _report_rollout(self, rollout: Rollout) -> None:
        score = "-" if rollout.score is None else f"{rollout.score:g}"
        self.stderr.write(
            f"rollout #{rollout.pk} {rollout.revision.task.external_id} with {rollout.endpoint.name} "
            f"(repeat {rollout.repeat_index}): {rollout.status}, score {score}"
        )

    def _print(self, flt: DifficultyFilter, as_json: bool) -> None:
        verdicts = filter_json(flt)
        if not as_json:
            for task, row in verdicts.items():
                self.stdout.write(f"{task}: strong {_mean(row['strong'])} small {_mean(row['small'])} {row['verdict']}")
        counts = ", ".join(f"{n} {verdict}" for verdict, n in verdict_counts(flt).items() if n)
        self.stdout.write(
            f"difficulty filter #{flt.pk} of {flt.benchmark.name} {flt.status}: {counts or 'no verdicts'} "
            f"(strong >= {flt.strong_min:g}, small <= {flt.small_max:g}, strong > small"
            f"{f' + {flt.margin:g}' if flt.margin else ''})"
        )
        if as_json:
            self.stdout.write(json.dumps(verdicts, ensure_ascii=False))


def _mean(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _endpoint(name: str) -> ModelEndpoint:
    endpoint = ModelEndpoint.objects.filter(name=name).first()
    if endpoint is None:
        known = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none"
        raise UsageError(f"no model endpoint named {name!r} (known: {known}); add one with `endpoints add`")
    return endpoint


def _candidates(benchmark: Benchmark, task_ids: list[str]) -> list:
    found = {
        c.task.external_id: c
        for c in benchmark.candidates.filter(task__external_id__in=task_ids).select_related("task")
    }
    missing = [t for t in task_ids if t not in found]
    if missing:
        raise UsageError(f"not candidates of {benchmark.name}: {', '.join(missing)}")
    return [found[t] for t in dict.fromkeys(task_ids)]
