"""python manage.py freeze_benchmark --benchmark NAME [--note TEXT] [--by USERNAME] [--json]"""

import json

from django.core.management.base import BaseCommand

from accounts.roles import admin_named
from benchmarks.models import Benchmark
from benchmarks.serializers import BenchmarkVersionSerializer
from jobs.cli import UsageError
from review.services import ReviewError, freeze_version


class Command(BaseCommand):
    help = (
        "Freeze a new version of a benchmark: it pins the revision each accepted candidate was accepted at, as the "
        "benchmark's page and POST /api/benchmarks/ID/freeze/ do (an admin's act: --by names the admin, default "
        "admin). Prints the version and its tasks; with --json the last line is the API's version object "
        '{"id", "benchmark", "number", "frozen_at", "created_by", "note", "task_count", "revisions", "downloads"} '
        "(downloads as paths). Exit status (jobs.cli): 2 when refused (nothing accepted, no such benchmark or admin)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument("--note", default="", help="what this version is (shown with it)")
        parser.add_argument("--by", default="admin", metavar="USERNAME", help="the admin who freezes (default admin)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the version as JSON last")

    def handle(self, *args, benchmark, note, by, as_json, **options):
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise UsageError(f"no benchmark {benchmark!r} (`manage.py propose_candidates --benchmark NAME` makes one)")
        user = admin_named(by, error=UsageError)
        try:
            version = freeze_version(bench, user=user, note=note)
        except ReviewError as exc:
            raise UsageError(str(exc)) from None
        report = BenchmarkVersionSerializer(version).data
        pinned = ", ".join(f"{pin['task']} r{pin['revision']}" for pin in report["revisions"])
        self.stdout.write(f"{bench.name} v{version.number}: {report['task_count']} task(s) pinned ({pinned})")
        if as_json:
            self.stdout.write(json.dumps(report))
