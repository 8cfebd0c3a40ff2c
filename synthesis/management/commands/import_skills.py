"""python manage.py import_skills (PATH | --bundled) [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from synthesis.services import import_skills
from synthesis.skills import SkillImportError


class Command(BaseCommand):
    help = (
        "Import agent skills (AgentSkills / OpenClaw SKILL.md folders) from a folder of skill folders, one skill "
        "folder, or a .zip/.tar.gz/.tgz/.tar of either; --bundled imports the skills shipped with the installed "
        "OpenClaw harness (make harness). A skill with the same files as before is left unchanged; changed files "
        "update it. Exits 0 when the import ran, even if some skills failed (they are listed). With --json the "
        'last line is {"imported", "updated", "unchanged", "failed": [{"source", "error"}], "failed_count"}.'
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("path", nargs="?", help="a folder or an archive")
        which.add_argument("--bundled", action="store_true", help="the skills of the installed OpenClaw harness")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the report as JSON last")

    def handle(self, *args, path=None, bundled=False, as_json=False, **options):
        try:
            report = (import_skills(bundled=True) if bundled else import_skills(path)).as_dict()
        except SkillImportError as exc:
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
