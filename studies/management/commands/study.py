"""Start a study and follow it to its end, or show one.

python manage.py study start --kind stability --benchmark NAME [--version N] --endpoint E --runs K [--subset N]
    [--seed S] [--harness H] [--name NAME] [--here] [--json]
python manage.py study start --kind training_exposure --training-run RUN --benchmark NAME [--version N] [--json]
python manage.py study start --kind reward_threshold --values 0.5,0.75,1.0 --runs R1,R2 --base-model M
    --benchmark NAME [--version N] [--preset P] [--overrides JSON] [--gpu] [--json]
python manage.py study start --kind synthesis_routes --runs R1,R2 | --batches B1,B2 [--routes persona,skill,both] [--min-reward X]
    --base-model M --benchmark NAME [--json]
python manage.py study show STUDY [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from evaluation.management.commands.evaluate import benchmark_version, endpoint_named
from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from studies.job_kinds import ADVANCE_JOB
from studies.kinds import KINDS, StudyError, get_kind
from studies.models import Study
from studies.services import cancel_study, run_study_here, start_study, study_json


class Command(BaseCommand):
    help = (
        "Start a study (a grid of datasets, training runs and evaluation runs over one parameter) and wait for it: "
        "its steps run as jobs on the workers (--here: an evaluation-only study in this process). Prints the "
        "figures, with --json one JSON line last: each cell's run ids, mean and CI, and the best cell. "
        "`study show ID` prints a study."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the benchmark version's number here, not Django's version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "show"], help="start a study and wait for it, or show one")
        parser.add_argument("study", nargs="?", type=int, help="show: the study's id")
        parser.add_argument("--kind", choices=list(KINDS), help="start: what the study varies")
        parser.add_argument("--name", default="", help="a name for the study")
        parser.add_argument("--benchmark", help="the benchmark whose version the cells are evaluated on")
        parser.add_argument("--version", type=int, help="the benchmark version's number (latest unless given)")
        parser.add_argument("--endpoint", help="stability: the model endpoint evaluated")
        parser.add_argument(
            "--runs",
            help="stability: how many evaluation runs (cells, 5); reward_threshold and synthesis_routes: the "
            "evaluation runs (ids, comma-separated) whose rollouts the datasets are built from",
        )
        parser.add_argument("--subset", type=int, default=0, help="stability: tasks in the stratified subset (0: all)")
        parser.add_argument("--seed", type=int, default=0, help="stability: the subset's seed (0)")
        parser.add_argument("--harness", help="the agent harness of the evaluation runs (the default harness)")
        parser.add_argument("--training-run", type=int, help="training_exposure: the training run")
        parser.add_argument("--values", help="reward_threshold: the minimum rewards, comma-separated")
        parser.add_argument(
            "--batches", help="synthesis_routes: synthesis batch ids, whose kept tasks' runs give the data (no --runs)"
        )
        parser.add_argument("--routes", help="synthesis_routes: persona, skill, both (all three unless given)")
        parser.add_argument("--min-reward", type=float, help="synthesis_routes: the datasets' minimum reward (0.5)")
        parser.add_argument("--base-model", help="reward_threshold, synthesis_routes: the base model trained")
        parser.add_argument("--preset", help="reward_threshold, synthesis_routes: the SFT preset (tiny-cpu)")
        parser.add_argument("--overrides", help="reward_threshold, synthesis_routes: SFT settings, a JSON object")
        parser.add_argument("--gpu", action="store_true", help="train on GPUs (CPU unless given)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the study as JSON last")
        add_wait_arguments(parser, timeout=7 * 24 * 3600.0, here="run an evaluation-only study in this process")

    def handle(self, *args, **flags):
        if flags["action"] == "show":
            if flags["study"] is None:
                raise UsageError("show needs the study's id: `study show ID`")
            study = Study.objects.filter(pk=flags["study"]).first()
            if study is None:
                raise UsageError(f"no study #{flags['study']}")
            self._print(study, flags["as_json"])
            return
        if not flags["kind"]:
            raise UsageError(f"start needs --kind, one of {', '.join(KINDS)}")
        try:
            params = self._params(flags)
            if flags["here"] and not get_kind(flags["kind"]).evaluation_only:
                raise StudyError(f"a {flags['kind']} study trains on gpu workers: it cannot run --here")
            study = start_study(
                kind=flags["kind"], params=params, user=None, name=flags["name"], queue=not flags["here"]
            )
        except StudyError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the study's first step", exc) from None
        self.stderr.write(f"study #{study.pk}: {study.cells.count()} cell(s)")
        if flags["here"]:
            study = run_study_here(
                study, on_run=lambda run: self.stderr.write(f"evaluation run #{run.pk}: {run.status}")
            )
        else:
            try:
                self._wait(study, timeout=flags["timeout"], start_timeout=flags["start_timeout"])
            except (NoWorker, NotFinished):
                study.refresh_from_db()
                self._print(study, flags["as_json"])
                raise
            study.refresh_from_db()
        self._print(study, flags["as_json"])
        if study.status != Study.Status.COMPLETE:
            missing = ", ".join(study_json(study)["missing"]) or "none"
            raise CommandError(f"study #{study.pk} is {study.status}: cells not complete: {missing}")

    def _params(self, flags) -> dict:
        kind = flags["kind"]
        params: dict = {"harness": flags["harness"]}
        if flags["benchmark"]:
            params["benchmark_version"] = benchmark_version(flags["benchmark"], flags["version"]).pk
        else:
            raise StudyError("--benchmark is needed: the cells are evaluated on its version")
        if kind == "stability":
            if not flags["endpoint"]:
                raise StudyError("--endpoint is needed: the model the stability study evaluates")
            params.update(endpoint=endpoint_named(flags["endpoint"]).pk, subset=flags["subset"], seed=flags["seed"])
            params["runs"] = flags["runs"] if flags["runs"] is not None else 5
        elif kind == "training_exposure":
            if flags["training_run"] is None:
                raise StudyError("--training-run is needed: the run whose checkpoints are evaluated")
            params["training_run"] = flags["training_run"]
        else:
            params.update(
                eval_runs=[r for r in (flags["runs"] or "").split(",") if r.strip()],
                base_model=flags["base_model"],
                cpu=not flags["gpu"],
            )
            if flags["preset"]:
                params["preset"] = flags["preset"]
            if flags["overrides"]:
                try:
                    params["overrides"] = json.loads(flags["overrides"])
                except json.JSONDecodeError as exc:
                    raise StudyError(f"--overrides is not JSON: {exc}") from None
            if kind == "reward_threshold":
                params["values"] = flags["values"] or ""
            else:
                if flags["routes"]:
                    params["routes"] = flags["routes"]
                if flags["batches"]:
                    params["batches"] = flags["batches"]
                if flags["min_reward"] is not None:
                    params["min_reward"] = flags["min_reward"]
        return params

    def _wait(self, study: Study, *, timeout: float, start_timeout: float) -> None:
        steps = JobRun.objects.filter(kind=ADVANCE_JOB, params__study_id=study.pk)
        queues = ("default", "sandbox") if get_kind(study.kind).evaluation_only else ("default", "sandbox", "gpu")

        def finished() -> bool:
            study.refresh_from_db()
            return study.is_finished

        wait_for(
            Work(
                what=f"the steps of study #{study.pk}",
                queues=queues,
                finished=finished,
                taken=lambda: steps.exclude(status=JobRun.Status.QUEUED).exists(),
                cancel=lambda: cancel_study(study, user=None),  # a worker starting later must not run it unwatched
                cancelled="The study was cancelled.",
                follow=f"`manage.py study show {study.pk}` shows where it is",
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )

    def _print(self, study: Study, as_json: bool) -> None:
        report = study_json(study)
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False, default=str))
            return
        self.stdout.write(f"study #{study.pk} {study.name} ({study.kind}): {study.status}")
        for row in report["cells"]:
            mean = "—" if row["mean"] is None else f"{row['mean']:.3f}"
            ci = "" if not row["ci"] else f" [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]"
            runs = f"eval run #{row['eval_run']}" if row["eval_run"] else "no evaluation run yet"
            error = f"  {row['error']}" if row["error"] else ""
            self.stdout.write(f"  {row['label']:<20} {row['status']:<9} {mean}{ci}  {runs}{error}")
        if report["best"]:
            self.stdout.write(f"best: {report['best']['label']} ({report['best']['mean']:.3f})")
        for row in report["comparisons"]:
            if "error" in row:
                self.stdout.write(f"  best − {row['label']}: {row['error']}")
            else:
                ci = row["ci"]
                self.stdout.write(
                    f"  best − {row['label']}: {row['mean_difference']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}], "
                    f"p = {row['p_value']:.3f}"
                )
        if report.get("stability"):
            spread = report["stability"]
            if spread["mean"] is not None:
                self.stdout.write(
                    f"run means: mean {spread['mean']:.3f}, std {spread['std']:.4f}, "
                    f"95% CI [{spread['ci'][0]:.3f}, {spread['ci'][1]:.3f}]"
                )
