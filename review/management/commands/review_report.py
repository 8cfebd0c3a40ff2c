"""python manage.py review_report --benchmark NAME [--json]"""

import json

from django.core.management.base import BaseCommand

from benchmarks.models import Benchmark
from jobs.cli import UsageError
from review.report import review_report


def _share(value) -> str:
    return "—" if value is None else f"{value:.2f}"


class Command(BaseCommand):
    help = (
        "How a benchmark's review stands: candidates and decided ones, reviewer agreement (Cohen's kappa on the "
        "decision and on issue verdicts), the LLM diagnosis's precision, what planted flaws the LLM named and the "
        "reviewers caught, and the open or accepted candidates blocked as unsolvable, contaminated or paying a lazy "
        "agent. With --json the last line is "
        '{"candidates", "decided", "agreement": {"decision": {"kappa", "n"}, "issue_verdicts": {"kappa", "n"}}, '
        '"diagnosis_precision": {"overall", "by_component"}, "planted": {"total", "caught_by_llm", '
        '"caught_by_reviewers", "by_kind"}, "blocked": {"unsolvable", "contaminated", "lazy"}}. '
        "Exit status (jobs.cli): 2 when there is no such benchmark."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="the benchmark's name")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the report as JSON last")

    def handle(self, *args, benchmark, as_json, **options):
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise UsageError(f"no benchmark {benchmark!r} (`manage.py propose_candidates --benchmark NAME` makes one)")
        report = review_report(bench)
        agreement, diagnosis, planted, blocked = (
            report["agreement"],
            report["diagnosis_precision"],
            report["planted"],
            report["blocked"],
        )
        lines = [
            f"{bench.name}: {report['candidates']} candidate(s), {report['decided']} decided",
            "agreement (Cohen's kappa): decision {} over {} candidate(s), issue verdicts {} over {} issue(s)".format(
                _share(agreement["decision"]["kappa"]),
                agreement["decision"]["n"],
                _share(agreement["issue_verdicts"]["kappa"]),
                agreement["issue_verdicts"]["n"],
            ),
            f"diagnosis precision: {_share(diagnosis['overall'])} overall; "
            + ", ".join(f"{key} {_share(value)}" for key, value in diagnosis["by_component"].items()),
            f"planted flaws: {planted['total']}, named by the LLM {planted['caught_by_llm']}, caught by reviewers "
            f"{planted['caught_by_reviewers']}",
            f"blocked: {blocked['unsolvable']} unsolvable, {blocked['contaminated']} contaminated, "
            f"{blocked['lazy']} paying a lazy agent",
        ]
        for line in lines:
            self.stdout.write(line)
        if as_json:
            self.stdout.write(json.dumps(report))
