"""python manage.py evaluate (--benchmark NAME [--version N] | --task ID ... | --tasks-from SELECTION)
    --endpoint NAME [--harness H] [--repeats N] [--option k=v ...] [--time-limit S] [--max-turns N]
    [--token-limit N] [--pass-threshold X] [--name NAME] [--fresh] [--resume RUN] [--here] [--json]
python manage.py evaluate --resume RUN [--here] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Benchmark
from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from llm.models import ModelEndpoint
from tasks.selection import add_task_arguments, tasks_given, tasks_of

from ...harnesses import HARNESSES
from ...models import EvalRun, Outcome, Rollout
from ...reports import current_summary, run_json
from ...services.rollouts import fail_lost_rollouts
from ...services.run_progress import outcome_of
from ...services.runs import (
    EvalRunError,
    cancel_eval_run,
    create_eval_run,
    resume_eval_run,
    run_config,
    run_here,
    set_pass_threshold,
    start_eval_run,
)
from .rollout import _options


class Command(BaseCommand):
    help = (
        "Evaluate a model on a frozen benchmark version (default: its latest) or on tasks' current revisions, each "
        "task --repeats times, and wait for the run: its rollouts run as jobs on the `sandbox` queue (--here: in "
        "this process). A run with the configuration of an earlier one resumes that one (its finished rollouts "
        "are kept) unless --fresh. One line per finished rollout goes to stderr; the figures to stdout, with --json "
        "as one JSON object on the last line (also when the run did not complete). Exit status (jobs.cli): 1 when the "
        "run is incomplete or cancelled, 2 when refused, 3 when no worker took its jobs."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the benchmark version's number here, not Django's version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="the benchmark's name")
        parser.add_argument("--version", type=int, help="its version number (default: the latest frozen one)")
        add_task_arguments(parser, what="task external ids (their current revisions), instead of --benchmark")
        parser.add_argument("--endpoint", help="the agent model endpoint's name")
        parser.add_argument("--harness", choices=sorted(HARNESSES), help="default: settings.CLAWGYM_DEFAULT_HARNESS")
        parser.add_argument("--repeats", type=int, help="rollouts per task (epochs; default 1)")
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a harness option (VALUE is JSON, or else a string); repeatable",
        )
        parser.add_argument("--time-limit", type=int, metavar="SECONDS", help="per rollout (the timeout limit)")
        parser.add_argument("--max-turns", type=int, metavar="N", help="per rollout")
        parser.add_argument("--token-limit", type=int, metavar="N", help="input + output tokens per rollout")
        parser.add_argument(
            "--pass-threshold",
            type=float,
            metavar="X",
            help="a repeat passes at this score (pass@k, solved tasks; default 1.0)",
        )
        parser.add_argument("--name", default="", help="the run's name (default: endpoint on benchmark version)")
        parser.add_argument("--fresh", action="store_true", help="a new run even if one has the same configuration")
        parser.add_argument("--resume", type=int, metavar="RUN", help="run again what is left of that run")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the run as JSON last")
        add_wait_arguments(parser, timeout=24 * 3600.0)

    def handle(self, *args, **flags):
        try:
            run = self._resume(flags) if flags["resume"] else self._start(flags)
        except EvalRunError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the rollouts", exc) from None
        if flags["here"]:
            run = run_here(run, on_rollout=lambda rollout: self.stderr.write(rollout_line(rollout, run.repeats)))
        else:
            try:
                self._wait(run, timeout=flags["timeout"], start_timeout=flags["start_timeout"])
            except (NoWorker, NotFinished):
                run.refresh_from_db()
                self._print(run, flags["as_json"])
                raise
            run.refresh_from_db()
        self._print(run, flags["as_json"])
        if run.status != EvalRun.Status.COMPLETE:
            raise CommandError(unfinished_message(run))

    # --- what to run ---------------------------------------------------------------------------------------------

    def _start(self, flags) -> EvalRun:
        if not flags["endpoint"]:
            raise UsageError("--endpoint NAME is required (or --resume RUN)")
        if bool(flags["benchmark"]) == tasks_given(flags):
            raise UsageError(
                "give either --benchmark NAME [--version N] or --task ID ... / --tasks-from SELECTION (or --resume RUN)"
            )
        if flags["version"] is not None and not flags["benchmark"]:
            raise UsageError("--version goes with --benchmark")
        settings_ = {
            "endpoint": endpoint_named(flags["endpoint"]),
            "harness": flags["harness"],
            "repeats": 1 if flags["repeats"] is None else flags["repeats"],
            "options": harness_options(flags["option"]),
            "limits": given_limits(flags),
            "name": flags["name"],
            "fresh": flags["fresh"],
        }
        if flags["pass_threshold"] is not None:
            settings_["pass_threshold"] = flags["pass_threshold"]
        if flags["benchmark"]:
            settings_["benchmark_version"] = benchmark_version(flags["benchmark"], flags["version"])
        else:
            settings_["revisions"] = current_revisions(flags)
        if flags["here"]:
            run, reused = create_eval_run(inline=True, user=None, **settings_)
            if reused:
                self._set_inline(run, True)
                run = resume_eval_run(run, user=None)
        else:
            run, reused = start_eval_run(user=None, **settings_)
        if reused:
            self.stderr.write(
                f"run #{run.pk} ({run.name}) has this configuration: resuming it (its finished "
                "rollouts are kept; --fresh starts a new run)"
            )
            run = self._new_threshold(run, flags)
            if flags["name"] and flags["name"].strip() != run.name:
                self.stderr.write(f"(it keeps its name; --fresh starts a new run named {flags['name'].strip()!r})")
        else:
            self.stderr.write(f"run #{run.pk} ({run.name}): {run.rollouts_total} rollouts")
        return run

    def _new_threshold(self, run: EvalRun, flags) -> EvalRun:
        """--pass-threshold on a run resumed or reused: its figures are recounted at it, and the command says so
        (a threshold decides what a pass is, not what ran)."""
        threshold = flags["pass_threshold"]
        if threshold is None or threshold == run.pass_threshold:
            return run
        before = run.pass_threshold
        run = set_pass_threshold(run, threshold, user=None)
        self.stderr.write(f"run #{run.pk}: pass threshold {before:g} -> {threshold:g} (its pass figures recounted)")
        return run

    def _resume(self, flags) -> EvalRun:
        if flags["fresh"]:
            raise UsageError("--fresh starts a new run: it does not go with --resume")
        run = EvalRun.objects.select_related("endpoint", "benchmark_version").filter(pk=flags["resume"]).first()
        if run is None:
            raise UsageError(f"no evaluation run #{flags['resume']}")
        config = self._asked_config(run, flags)
        inline = run.inline
        self._set_inline(run, flags["here"])
        try:
            run = resume_eval_run(run, config=config, user=None)
        except EvalRunError:
            self._set_inline(run, inline)  # refused: whoever runs it goes on as before
            raise
        run = self._new_threshold(run, flags)
        self.stderr.write(
            f"run #{run.pk} ({run.name}) resumed: {run.rollouts_finished} of {run.rollouts_total} "
            "rollouts finished before"
        )
        return run

    def _asked_config(self, run: EvalRun, flags) -> dict | None:
        """The configuration the flags given with --resume describe (the run's own settings where none is given),
        or None when none is given: the run is resumed as it is."""
        keys = (
            "benchmark",
            "version",
            "task_ids",
            "tasks_from",
            "endpoint",
            "harness",
            "repeats",
            "option",
            "time_limit",
            "max_turns",
            "token_limit",
        )
        if not any(flags[key] not in (None, []) for key in keys):
            return None
        if flags["benchmark"] and tasks_given(flags):
            raise UsageError("give either --benchmark or --task / --tasks-from, not both")
        if flags["version"] is not None and not flags["benchmark"]:
            raise UsageError("--version goes with --benchmark")
        version = run.benchmark_version
        revisions = [row.revision for row in run.task_results.select_related("revision")]
        if flags["benchmark"]:
            version = benchmark_version(flags["benchmark"], flags["version"])
            revisions = list(version.revisions.all())
        elif tasks_given(flags):
            version, revisions = None, current_revisions(flags)
        return run_config(
            revisions=revisions,
            benchmark_version=version,
            endpoint=endpoint_named(flags["endpoint"]) if flags["endpoint"] else run.endpoint,
            harness=flags["harness"] or run.harness,
            options=harness_options(flags["option"]) if flags["option"] else run.harness_options,
            limits={**run.limits, **given_limits(flags)},
            repeats=flags["repeats"] if flags["repeats"] is not None else run.repeats,
        )

    def _set_inline(self, run: EvalRun, here: bool) -> None:
        # Who runs it from now on: with --here this process (a resume must not queue jobs for the workers), else
        # the workers (a run started --here before must have its rollouts queued as jobs now).
        if run.inline != here:
            EvalRun.objects.filter(pk=run.pk).update(inline=here)
            run.refresh_from_db()

    # --- waiting for the workers ---------------------------------------------------------------------------------

    def _wait(self, run: EvalRun, *, timeout: float, start_timeout: float) -> None:
        finished_before = run.rollouts_finished
        seen = set(self._finished(run))  # finished before this command started: not reported again

        def report_finished():
            new = [pk for pk, *_ in set(self._finished(run)) - seen]
            for rollout in self._finished(run, objects=True).filter(pk__in=new).select_related("revision__task"):
                seen.add((rollout.pk, rollout.attempt, rollout.status))
                self.stderr.write(rollout_line(rollout, run.repeats))

        def finished() -> bool:
            run.refresh_from_db()
            return run.is_finished

        def taken() -> bool:
            pending = run.rollouts.exclude(status__in=Rollout.FINISHED)
            return (
                run.rollouts_finished != finished_before
                or pending.filter(job_run__isnull=False).exclude(job_run__status=JobRun.Status.QUEUED).exists()
            )

        wait_for(
            Work(
                what=f"the rollout jobs of run #{run.pk}",
                queues=("sandbox",),
                finished=finished,
                taken=taken,
                cancel=lambda: cancel_eval_run(
                    run, user=None
                ),  # a worker starting later must not run what nobody waits for
                cancelled=f"The run was cancelled; `manage.py evaluate --resume {run.pk}` runs it again.",
                follow=f"`manage.py eval_report {run.pk}` shows where it is",
                progress=report_finished,
                reclaim_lost=fail_lost_rollouts,  # a killed worker's rollout would otherwise look "running" forever
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )

    def _finished(self, run: EvalRun, *, objects: bool = False):
        finished = run.rollouts.filter(status__in=Rollout.FINISHED).order_by("pk")
        return finished if objects else finished.values_list("pk", "attempt", "status")

    # --- output --------------------------------------------------------------------------------------------------

    def _print(self, run: EvalRun, as_json: bool) -> None:
        report = run_json(run)
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False, default=str))
        else:
            write_summary(self.stdout, run, report)


# --- shared with eval_report ---------------------------------------------------------------------------------


def endpoint_named(name: str) -> ModelEndpoint:
    endpoint = ModelEndpoint.objects.filter(name=name).first()
    if endpoint is None:
        known = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none"
        raise UsageError(f"no model endpoint named {name!r} (known: {known}); add one with `endpoints add`")
    return endpoint


def benchmark_version(name: str, number: int | None):
    benchmark = Benchmark.objects.filter(name=name).first()
    if benchmark is None:
        known = ", ".join(Benchmark.objects.values_list("name", flat=True)) or "none"
        raise UsageError(f"no benchmark named {name!r} (known: {known})")
    versions = benchmark.versions.order_by("-number")
    version = versions.filter(number=number).first() if number is not None else versions.first()
    if version is None:
        if number is None:
            raise UsageError(
                f"benchmark {name} has no frozen version yet: freeze one first "
                f"(`manage.py freeze_benchmark --benchmark {name}`, or on its page)"
            )
        known = ", ".join(f"v{n}" for n in versions.values_list("number", flat=True))
        raise UsageError(f"benchmark {name} has no version {number} (it has: {known})")
    return version


def current_revisions(flags) -> list:
    """The current revisions of the tasks --task and --tasks-from name."""
    return [task.current_revision for task in tasks_of(flags, revision="to evaluate")]


def harness_options(pairs: list[str]) -> dict:
    options = _options(pairs)
    limits = {"timeout": "--time-limit", "max_turns": "--max-turns", "token_limit": "--token-limit"}
    clash = [f"{limits[key]} instead of --option {key}=…" for key in limits if key in options]
    if clash:
        raise UsageError(f"the limits are flags of their own: give {', '.join(clash)}")
    return options


def given_limits(flags) -> dict:
    limits = {"timeout": flags["time_limit"], "max_turns": flags["max_turns"], "token_limit": flags["token_limit"]}
    return {key: value for key, value in limits.items() if value is not None}


def rollout_line(rollout: Rollout, repeats: int) -> str:
    task = rollout.revision.task.external_id
    line = f"{task} repeat {rollout.repeat_index + 1}/{repeats} (rollout #{rollout.pk}, attempt {rollout.attempt}): "
    # From the row's state, not its stored outcome: that is written just after, and a line read between said "failed".
    outcome = outcome_of(rollout.status, rollout.exit_reason)
    line += outcome or rollout.status
    if outcome in (Outcome.SCORED, Outcome.AGENT_LIMIT, Outcome.AGENT_ERROR):
        line += f", score {rollout.score:g}"
        if outcome != Outcome.SCORED:
            line += f" ({rollout.exit_reason})"
    elif outcome == Outcome.JUDGE_INCOMPLETE:
        line += f": code score {_num(rollout.code_score)}; {rollout.score_reason}"
    elif rollout.is_finished:
        line += f": {rollout.exit_reason}"
        if rollout.error:
            line += f": {rollout.error.splitlines()[0][:200]}"
    return line


def _num(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci) -> str:
    lo, hi = ci or (None, None)
    return "-" if lo is None else f"[{lo:.3f}, {hi:.3f}]"


def write_summary(out, run: EvalRun, report: dict) -> None:
    """The run's figures for people: overall mean with its interval, the categories, pass@k, the outcomes."""
    what = report["benchmark_version"] or f"{len(report['tasks'])} task(s)"
    out.write(
        f"run #{run.pk} {run.name}: {run.endpoint.name} ({run.endpoint.model}, {run.harness}) on {what}, "
        f"{run.repeats} repeat(s): {run.status}, {run.rollouts_finished} of {run.rollouts_total} rollouts "
        "finished"
    )
    if run.status != EvalRun.Status.COMPLETE:
        out.write(
            "partial figures: "
            + (
                f"tasks lacking a score: {', '.join(report['missing'])}"
                if report["missing"]
                else "no task lacks a score"
            )
        )
    overall = report["overall"]
    out.write(
        f"overall {_num(overall['mean'])} (95% CI {_ci(overall['ci'])}), std across repeats "
        f"{_num(overall['std_across_repeats'])}"
    )
    passes = "  ".join(f"pass@{k} {_num(v)}" for k, v in report["pass_at_k"].items())
    hats = "  ".join(f"pass^{k} {_num(v)}" for k, v in report["pass_hat_k"].items())
    out.write(f"{passes}  {hats}  (a repeat passes at {run.pass_threshold:g})")
    width = max([len("category"), *map(len, report["categories"])])
    out.write(f"{'category':<{width}}  tasks  mean   95% CI")
    for name, figures in report["categories"].items():
        out.write(f"{name:<{width}}  {figures['tasks']:>5}  {_num(figures['mean'])}  {_ci(figures['ci'])}")
    out.write("outcomes: " + ", ".join(f"{k} {v}" for k, v in report["outcomes"].items()))
    out.write(
        f"tokens {report['tokens']} (input {report['input_tokens']}, output {report['output_tokens']}), "
        f"cost {report['cost']:.4f}, agent time {report['agent_seconds']:.1f} s"
    )


def unfinished_message(run: EvalRun) -> str:
    missing = current_summary(run)["missing"]
    lacking = f"task(s) lacking a score: {', '.join(missing)}" if missing else "no task lacks a score"
    return f"run #{run.pk} is {run.status}; {lacking}. `manage.py evaluate --resume {run.pk}` runs what is left."
