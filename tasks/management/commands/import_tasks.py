"""python manage.py import_tasks PATH [--format NAME] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from tasks.formats import FORMATS, FormatError
from tasks.importing import import_path


class Command(BaseCommand):
    help = (
        "Import tasks from a folder of ClawGym task folders, one task folder, a .jsonl file, a PinchBench "
        "folder, or a .tar.gz/.tgz/.tar/.zip of any of these. Identical tasks are left unchanged, changed "
        "ones get a new revision. Exits 0 when the import ran, even if some tasks failed (they are listed)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--format", dest="fmt", help=f"one of {', '.join(FORMATS)} (default: detected)")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="print the report as JSON on the last line"
        )

    def handle(self, *args, path, fmt=None, as_json=False, **options):
        try:
            report = import_path(path, fmt=fmt).as_dict()
        except FormatError as exc:
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
