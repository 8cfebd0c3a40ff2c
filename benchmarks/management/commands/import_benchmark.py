"""python manage.py import_benchmark FOLDER [--benchmark NAME] [--note TEXT] [--by USERNAME] [--json]"""

import json

from django.core.management.base import BaseCommand

from accounts.roles import admin_named
from benchmarks.hf_export import import_version_hf
from benchmarks.services import BenchmarkError
from jobs.cli import UsageError


class Command(BaseCommand):
    help = (
        "Import a benchmark from its Hugging Face export (`export_benchmark --format hf`): every task is saved "
        "through the catalog's import (identical content unchanged, changed content a new revision), each checked "
        "against the content hash the export recorded, and a new version of the benchmark is frozen pinning them "
        "(an admin's act: --by names the admin, default admin). With --json the last line is "
        '{"benchmark", "version", "tasks", "imported", "updated", "unchanged"}. Exit status (jobs.cli): 2 when '
        "refused (not an export, a changed task, no such admin); nothing is imported then."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", metavar="FOLDER", help="the export's folder (README.md and data/)")
        parser.add_argument("--benchmark", help="the benchmark to freeze into (default: the exported one's name)")
        parser.add_argument("--note", default="", help="the new version's note (default: where it came from)")
        parser.add_argument("--by", default="admin", metavar="USERNAME", help="the admin who imports (default admin)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, folder, benchmark, note, by, as_json, **options):
        user = admin_named(by, error=UsageError)
        try:
            result = import_version_hf(folder, user=user, benchmark_name=benchmark, note=note)
        except BenchmarkError as exc:
            raise UsageError(str(exc)) from None
        report = result.as_dict()
        if as_json:
            self.stdout.write(json.dumps(report))
            return
        self.stdout.write(
            f"{report['benchmark']} v{report['version']}: {report['tasks']} task(s) pinned "
            f"({report['imported']} new, {report['updated']} updated, {report['unchanged']} unchanged)"
        )
