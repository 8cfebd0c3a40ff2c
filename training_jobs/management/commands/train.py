"""python manage.py train --kind sft --dataset ID --base-model PATH [--preset paper] [--set key=value …] [--cpu]
[--report-to tensorboard] [--here] [--json]
python manage.py train --kind rl --base-model PATH (--task ID … | --tasks-from SELECTION) [--mix-task ID … |
--mix-tasks-from SELECTION] [--harness builtin|openclaw] [--preset paper] [--set key=value …] [--cpu] [--here] [--json]
python manage.py train --resume RUN [--set key=value …] [--here] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from jobs.cli import UsageError, engine_refused
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.waiting import NotFinished, NoWorker, Work, add_wait_arguments, wait_for
from tasks.selection import SELECTION_HELP, add_task_arguments

from ...base_models import BaseModelError, named_or_folder
from ...kinds import KINDS, TrainingRunError, parse_overrides
from ...kinds.rl import tasks_from
from ...models import REPORT_TO, BaseModel, TrainingDataset, TrainingRun
from ...run_jobs import execute_training
from ...services.runs import cancel_training_run, resume_training_run, run_json, start_training_run


class Command(BaseCommand):
    help = (
        "Fine-tune a base model on a dataset (SFT with TRL, loss on the model's own tokens). The run is a job on the "
        "`gpu` queue and this command waits for it; --here runs the job body in this process. What cannot train is "
        "refused before anything is queued (an empty dataset, a base model that is no model folder here, GPUs this "
        "install lacks, samples that keep no assistant token once cut to max_length). --resume RUN goes on "
        "from the run's last checkpoint (a worker killed mid-run leaves it resumable). With --json the last line is "
        '{"run", "status", "steps", "checkpoints": [{"id", "step", "path"}], "metrics": {"loss": [...]}}. '
        "--kind rl trains with GRPO on sandboxed rollouts of the given tasks (their checker's score the reward); its "
        '--json line is {"run", "status", "steps", "rollouts", "checkpoints", "metrics": [{"step", "reward_mean", '
        '"reward_std", "groups_dropped", "inexact_samples", "rollout_p50_s", "rollout_max_s", "loss"}]}; a selection '
        "(--tasks-from) leaves benchmark tasks out, and a benchmark task given by id is refused; --mix-task or "
        "--mix-tasks-from with --set mix_share=S draws the share S of every step's prompts from those other tasks. The "
        "JSON is printed when the run did not succeed too. Exit status (jobs.cli): 1 when the run did not succeed, 2 "
        "when refused, 3 when no gpu worker took it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--kind", default="sft", choices=list(KINDS))
        parser.add_argument("--dataset", type=int, help="the training dataset's id")
        parser.add_argument("--base-model", help="a local folder, or the name of a registered base model")
        add_task_arguments(
            parser,
            what="RL: the tasks to train on (external ids, or revision ids)",
            selection=f"RL: {SELECTION_HELP}; benchmark tasks left out",
        )
        parser.add_argument(
            "--mix-task",
            dest="mix_task_ids",
            action="extend",
            nargs="+",
            metavar="ID",
            help="RL: other tasks mixed into every step (the share mix_share of its prompts: --set mix_share=0.25)",
        )
        parser.add_argument(
            "--mix-tasks-from",
            metavar="SELECTION",
            help="RL: the mix tasks as a selection (as --tasks-from; the run's own tasks left out of it)",
        )
        parser.add_argument(
            "--harness",
            default="",
            choices=["", "builtin", "openclaw"],
            help="RL: the agent each rollout runs (the preset's: builtin)",
        )
        parser.add_argument(
            "--preset", default="paper", choices=sorted({name for kind in KINDS.values() for name in kind.presets})
        )
        parser.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a config edit, dotted keys (lora.enabled=true, learning_rate=2e-5); repeatable",
        )
        parser.add_argument("--cpu", action="store_true", help="train on CPU (tiny models)")
        parser.add_argument(
            "--report-to",
            choices=REPORT_TO,
            default="none",
            help="tensorboard: also write TensorBoard event files under the run's folder (default none)",
        )
        parser.add_argument("--resume", type=int, metavar="RUN", help="resume a run from its last checkpoint")
        parser.add_argument("--name", default="")
        parser.add_argument("--json", dest="as_json", action="store_true")
        add_wait_arguments(parser, timeout=7 * 24 * 3600.0, here="run in this process instead of on a gpu worker")

    def handle(
        self,
        *args,
        kind,
        dataset,
        base_model,
        preset,
        overrides,
        cpu,
        here,
        resume,
        name,
        as_json,
        timeout,
        start_timeout,
        task_ids,
        tasks_from,
        mix_task_ids,
        mix_tasks_from,
        harness,
        report_to,
        **_options,
    ):
        self.report_to = report_to
        try:
            edits = parse_overrides(overrides)
            if resume:
                run = TrainingRun.objects.filter(pk=resume).first()
                if run is None:
                    raise UsageError(f"no training run #{resume}")
                run = resume_training_run(run, user=None, overrides=edits or None, enqueue=not here)
                self.stderr.write(
                    f"run #{run.pk}: attempt {run.attempt + 1}, from "
                    f"{run.resumed_from.path if run.resumed_from else 'the start'}"
                )
            elif kind == "rl":
                run = self._start_rl(
                    base_model,
                    (task_ids or [], tasks_from),
                    (mix_task_ids or [], mix_tasks_from),
                    harness,
                    preset,
                    edits,
                    cpu,
                    here,
                    name,
                )
            else:
                run = self._start(kind, dataset, base_model, preset, edits, cpu, here, name)
        except TrainingRunError as exc:
            raise UsageError(str(exc)) from None
        except JobEngineError as exc:
            raise engine_refused("the run", exc) from None
        if here:
            self.stderr.write(f"run #{run.pk}: training here")
            execute_training(run.pk)
        else:
            try:
                self._wait(run, timeout=timeout, start_timeout=start_timeout)
            except (NoWorker, NotFinished):
                run.refresh_from_db()
                self._print(run, as_json)
                raise
        report = self._print(run, as_json)
        if report["status"] != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"run #{run.pk} {report['status']}: {run.error.splitlines()[0] if run.error else ''}")

    def _print(self, run: TrainingRun, as_json: bool) -> dict:
        report = run_json(run)
        if as_json:
            self.stdout.write(json.dumps(report))
        elif run.kind == TrainingRun.Kind.RL:
            rewards = [m["reward_mean"] for m in report["metrics"]]
            self.stdout.write(
                f"run #{run.pk} {report['status']}: {report['steps']} steps, {report['rollouts']} "
                f"rollouts, {len(report['checkpoints'])} checkpoints, reward_mean {rewards}"
            )
        else:
            self.stdout.write(
                f"run #{run.pk} {report['status']}: {report['steps']} steps, "
                f"{len(report['checkpoints'])} checkpoints, loss {report['metrics']['loss'][-1:]}"
            )
        return report

    @staticmethod
    def _base_model(value: str) -> tuple[BaseModel | None, str]:
        try:
            return named_or_folder(value)
        except BaseModelError as exc:
            raise UsageError(f"--base-model: {exc}") from None

    def _start(self, kind, dataset_id, base_model, preset, edits, cpu, here, name) -> TrainingRun:
        if not dataset_id or not base_model:
            raise UsageError("--dataset ID and --base-model PATH are required (or --resume RUN)")
        dataset = TrainingDataset.objects.filter(pk=dataset_id).first()
        if dataset is None:
            raise UsageError(f"no training dataset #{dataset_id}")
        registered, folder = self._base_model(base_model)
        run = start_training_run(
            kind=kind,
            dataset=dataset,
            base_model=registered,
            base_model_path=folder,
            preset=preset,
            overrides=edits,
            cpu=cpu,
            report_to=self.report_to,
            name=name,
            enqueue=not here,
            user=None,
        )
        self.stderr.write(
            f"run #{run.pk} ({run.name}): {run.config['gradient_accumulation_steps']} accumulation "
            f"steps, {'CPU' if run.cpu else str(run.config['distributed']['gpus']) + ' GPU(s)'}"
        )
        for warning in run.warnings:
            self.stderr.write(f"warning: {warning}")
        return run

    def _start_rl(self, base_model, given, mixed, harness, preset, edits, cpu, here, name) -> TrainingRun:
        """`given` and `mixed`: (task ids, a selection) of the run's own tasks and of its mix tasks."""
        (tasks, selection), (mix, mix_selection) = given, mixed
        if not base_model or not (tasks or selection):
            raise UsageError("--kind rl needs --base-model PATH and --task ID … or --tasks-from SELECTION")
        chosen = list(tasks) + (tasks_from(selection) if selection else [])
        mix = list(mix) + (tasks_from(mix_selection) if mix_selection else [])
        registered, folder = self._base_model(base_model)
        run = start_training_run(
            kind="rl",
            tasks=chosen,
            mix_tasks=mix,
            harness=harness,
            base_model=registered,
            base_model_path=folder,
            preset=preset,
            overrides=edits,
            cpu=cpu,
            report_to=self.report_to,
            name=name,
            enqueue=not here,
            user=None,
        )
        config = run.config
        mixed = len(config.get("mix_tasks") or [])
        self.stderr.write(
            f"run #{run.pk} ({run.name}): {len(config['tasks'])} tasks"
            + (f" ({mixed} of them the mix, {config['mix_share']:.0%} of each step)" if mixed else "")
            + f", {config['prompts_per_step']} "
            f"prompts × {config['num_generations']} rollouts a step, {config['harness']} harness, "
            f"policy {config['policy']['backend']}"
        )
        return run

    def _wait(self, run: TrainingRun, *, timeout: float, start_timeout: float) -> None:
        seen = None

        def progress() -> None:
            nonlocal seen
            run.refresh_from_db()
            if (run.status, run.steps) != seen:
                seen = (run.status, run.steps)
                self.stderr.write(
                    f"run #{run.pk}: {run.status}, step {run.steps}"
                    + (f" of {run.total_steps}" if run.total_steps else "")
                )

        def taken() -> bool:
            return not JobRun.objects.filter(pk=run.job_run_id, status=JobRun.Status.QUEUED).exists()

        # No lost-worker check here: a gpu worker killed mid-run leaves the run resumable, and the worker started
        # after it queues the run again (jobs.runner.recover_lost).
        wait_for(
            Work(
                what=f"training run #{run.pk}",
                queues=("gpu",),
                finished=lambda: run.is_finished,
                taken=taken,
                cancel=lambda: cancel_training_run(
                    run, user=None
                ),  # a worker starting later must not train what nobody waits for
                cancelled=f"The run was cancelled; `manage.py train --resume {run.pk}` starts it again.",
                follow=f"its page {reverse('training:run', args=[run.pk])} shows where it is",
                progress=progress,
            ),
            timeout=timeout,
            start_timeout=start_timeout,
        )
