"""python manage.py export_benchmark --benchmark NAME [--version N] --out PATH [--format dir|tar.gz|zip|hf] [--force]
[--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from benchmarks.exporting import FORMATS, BenchmarkExportError, export_version, find_version
from benchmarks.hf_export import export_version_hf
from lib.hf_dataset import HfExportError

HF = "hf"


class Command(BaseCommand):
    help = (
        "Export a frozen benchmark version in the ClawGym folder format (benchmark.json and one task folder per "
        "pinned revision) to a folder, a .tar.gz or a .zip; or, with --format hf, as a Hugging Face dataset folder "
        "(Parquet, one row per task, and a README.md dataset card). With --json the last line is "
        '{"benchmark", "version", "format", "path", "tasks", "files", "bytes"} (for hf also "rows", "paths": '
        'the files written, "splits": rows per config/split).'
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the benchmark's version here: it replaces Django's own --version (its release).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument(
            "--version", dest="number", type=int, metavar="N", help="the version number (default: the latest)"
        )
        parser.add_argument("--out", required=True, help="the folder or archive file to write")
        parser.add_argument(
            "--format",
            dest="fmt",
            choices=(*FORMATS, HF),
            help="dir, tar.gz, zip or hf (a Hugging Face dataset folder; default: from the suffix of --out)",
        )
        parser.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
        parser.add_argument("--json", action="store_true", help="print the result as JSON on the last line")

    def handle(self, *args, benchmark, number, out, fmt, force, **options):
        try:
            version = find_version(benchmark, number)
            if fmt == HF:
                return self._hf(version, out, force, options["json"])
            result = export_version(version, out, fmt=fmt, force=force)
        except (BenchmarkExportError, HfExportError) as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror or exc}") from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(version), ensure_ascii=False))
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"exported {version} ({result.tasks} task{'' if result.tasks == 1 else 's'}, {result.files} files, "
                f"{result.bytes} bytes) to {result.path}"
            )
        )

    def _hf(self, version, out, force, as_json):
        result = export_version_hf(version, out, force=force)
        report = {**result.as_dict(), "benchmark": version.benchmark.name, "version": version.number}
        report["tasks"] = result.rows
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
            return
        self.stdout.write(
            self.style.SUCCESS(f"exported {version} ({result.rows} tasks) as a Hugging Face dataset to {result.path}")
        )
