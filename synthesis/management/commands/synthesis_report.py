"""python manage.py synthesis_report BATCH [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from ...batch_report import report
from ...models import SynthesisBatch


class Command(BaseCommand):
    help = (
        "What a synthesis batch produced: the funnel (generated → files valid → checker sane → solvable → rubric → "
        "novel → plausible → kept) with counts and the reasons per step, model calls, tokens and cost per stage, "
        "and the distributions. --json: one JSON object (batch_json's keys, funnel, stages, distributions)."
    )

    def add_arguments(self, parser):
        parser.add_argument("batch", type=int)
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, **flags):
        batch = SynthesisBatch.objects.filter(pk=flags["batch"]).first()
        if batch is None:
            raise CommandError(f"no synthesis batch #{flags['batch']}")
        found = report(batch)
        if flags["as_json"]:
            self.stdout.write(json.dumps(found))
            return
        out = self.stdout
        out.write(
            f"batch #{batch.pk} ({batch.route}, seed {batch.seed}): {found['status']}"
            + (f" ({found['status_reason']})" if found["status_reason"] else "")
            + f", {found['kept']} of {found['requested']} kept"
        )
        for row in found["funnel"]:
            lost = f"  rejected {row['rejected']}, failed {row['failed']}" if row["rejected"] or row["failed"] else ""
            out.write(f"{row['label']:<14} {row['count']:>6}{lost}")
            for reason in row["reasons"]:
                examples = ", ".join(f"#{pk}" for pk in reason["examples"])
                out.write(f"    {reason['count']} × {reason['status']}: {reason['reason']} (e.g. {examples})")
        out.write("stage            calls   tokens        cost")
        for purpose, row in found["stages"].items():
            tokens = row["input_tokens"] + row["output_tokens"]
            out.write(f"{purpose:<16} {row['calls']:>5} {tokens:>8} {row['cost']:>11.6f}")
        out.write(f"total tokens {found['tokens']:,}, cost {found['cost']:.6f}")
