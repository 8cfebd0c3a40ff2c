"""python manage.py import_personas PATH [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from synthesis.seed_files import SeedError
from synthesis.services import import_personas


class Command(BaseCommand):
    help = (
        'Import personas from Persona Hub style JSONL ({"persona": "..."} per line) or plain text (one persona '
        "per non-empty line). A persona already there (same text, case and white space aside) is left unchanged. "
        "Exits 0 when the import ran, even if some lines failed (they are listed, with their line numbers). With "
        '--json the last line is {"imported", "updated", "unchanged", "failed": [{"source", "error"}], "failed_count"}.'
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the report as JSON last")

    def handle(self, *args, path, as_json=False, **options):
        try:
            report = import_personas(path).as_dict()
        except SeedError as exc:
            raise CommandError(str(exc)) from None
        for failure in report["failed"]:
            self.stderr.write(f"failed: {failure['source']}: {failure['error']}")
        if report["failed_count"] > len(report["failed"]):
            self.stderr.write(f"failed: {report['failed_count'] - len(report['failed'])} more, not listed")
        summary = (
            f"imported {report['imported']}, updated {report['updated']}, "
            f"unchanged {report['unchanged']}, failed {report['failed_count']}"
        )
        if as_json:
            self.stdout.write(summary)
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            self.stdout.write(self.style.SUCCESS(summary) if not report["failed"] else self.style.WARNING(summary))
