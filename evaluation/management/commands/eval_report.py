"""python manage.py eval_report RUN [--json | --csv | --hf FOLDER [--force]]"""

import json

from django.core.management.base import BaseCommand, CommandError

from lib.hf_dataset import HfExportError

from ...exports import iter_csv, run_export
from ...reports import run_json
from .compare import eval_run
from .evaluate import write_summary


class Command(BaseCommand):
    help = (
        "An evaluation run's report: its figures and every task's mean, std, min and max over the repeats (best "
        "first); --json the whole export (settings, figures, every rollout) as one JSON line; --csv one row per "
        "rollout; --hf FOLDER writes the rollouts as a Hugging Face dataset (Parquet and a README.md dataset card) and "
        'prints {"path", "format", "rows", "files", "paths", "splits", "bytes"}. An incomplete or running run shows '
        "its partial figures."
    )

    def add_arguments(self, parser):
        parser.add_argument("run", type=int, metavar="RUN")
        form = parser.add_mutually_exclusive_group()
        form.add_argument("--json", dest="as_json", action="store_true", help="the export as one JSON line")
        form.add_argument("--csv", dest="as_csv", action="store_true", help="the rollouts as CSV")
        form.add_argument("--hf", metavar="FOLDER", help="write the rollouts as a Hugging Face dataset folder")
        parser.add_argument("--force", action="store_true", help="--hf: replace FOLDER when it is not empty")

    def handle(self, *args, run, as_json, as_csv, hf, force, **_options):
        run = eval_run(run)
        if hf:
            from ...hf_export import export_run_hf

            try:
                result = export_run_hf(run, hf, force=force)
            except (HfExportError, OSError) as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(json.dumps(result.as_dict()))
            return
        if as_json:
            self.stdout.write(json.dumps(run_export(run), ensure_ascii=False, default=str))
            return
        if as_csv:
            for chunk in iter_csv(run):
                self.stdout.write(chunk, ending="")
            return
        report = run_json(run)
        write_summary(self.stdout, run, report)
        rows = sorted(
            report["tasks"].items(), key=lambda item: (item[1]["mean"] is None, -(item[1]["mean"] or 0), item[0])
        )
        width = max([len("task"), *(len(task) for task, _ in rows)])
        self.stdout.write(f"{'task':<{width}}  mean   std    min    max    n")
        for task, figures in rows:
            cells = "  ".join(_num(figures[key]) for key in ("mean", "std", "min", "max"))
            self.stdout.write(f"{task:<{width}}  {cells}  {figures['n']}")


def _num(value) -> str:
    return "-    " if value is None else f"{value:.3f}"
