"""python manage.py leaderboard --benchmark NAME [--version N] [--json]"""

import json

from django.core.management.base import BaseCommand

from ...reports import leaderboard
from .evaluate import benchmark_version


class Command(BaseCommand):
    help = (
        "The leaderboard of a benchmark version (default: its latest): the latest complete run of each model "
        "(endpoint and harness), best first, with its overall score and 95% interval, per-category scores, cost "
        "and tokens. Incomplete runs never enter. With --json the last line is one JSON object."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the benchmark version's number here, not Django's version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument("--version", type=int, help="its version number (default: the latest frozen one)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the leaderboard as JSON last")

    def handle(self, *args, benchmark, version, as_json, **_options):
        frozen = benchmark_version(benchmark, version)
        entries = leaderboard(frozen)
        if as_json:
            board = {"benchmark": frozen.benchmark.name, "version": frozen.number, "entries": entries}
            self.stdout.write(json.dumps(board, ensure_ascii=False))
            return
        self.stdout.write(f"{frozen}: {len(entries)} model(s) with a complete run")
        if not entries:
            return
        categories = sorted({name for entry in entries for name in entry["categories"]})
        rows = [["model", "harness", "run", "overall", "95% CI", *categories, "cost", "tokens"]]
        for entry in entries:
            overall = entry["overall"]
            lo, hi = overall["ci"]
            rows.append(
                [
                    f"{entry['endpoint']} ({entry['model']})",
                    entry["harness"],
                    f"#{entry['run']}",
                    _num(overall["mean"]),
                    "-" if lo is None else f"[{lo:.3f}, {hi:.3f}]",
                    *(_num(entry["categories"].get(name, {}).get("mean")) for name in categories),
                    f"{entry['cost']:.4f}",
                    str(entry["tokens"]),
                ]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"
