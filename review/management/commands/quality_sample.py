"""python manage.py quality_sample --name NAME --size N [--benchmark NAME] [--candidate-status S] [--status S]
    [--category SLUG] [--source S] [--seed S] [--json]
python manage.py quality_sample --report ID [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from review import quality
from review.models import QualitySample
from review.services import ReviewError


class Command(BaseCommand):
    help = (
        "Draw a quality sample: --size tasks uniformly at random from the pool the filters describe, each pinned to "
        "its current revision (reproducible: the same --seed over the same pool draws the same tasks). Or, with "
        "--report ID, print a sample's scores per dimension (n, mean, sample std, counts of 1..5). With --json the "
        "last line is a JSON object."
    )

    def add_arguments(self, parser):
        parser.add_argument("--report", type=int, metavar="ID", help="print the statistics of sample ID")
        parser.add_argument("--name", help="the new sample's name")
        parser.add_argument("--size", type=int, help="N: how many tasks to draw")
        parser.add_argument("--seed", type=int, help="the random seed (default: a random one, printed)")
        parser.add_argument("--benchmark", help="only candidates of this benchmark")
        parser.add_argument("--candidate-status", help="with --benchmark: only candidates with this status")
        parser.add_argument("--status", dest="task_status", help="only tasks with this status (draft, ready, ...)")
        parser.add_argument("--category", help="only tasks of this benchmark category (slug)")
        parser.add_argument("--source", help="only tasks from this source (imported, persona, skill, manual)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, report, name, size, seed, as_json, **options):
        if report is not None:
            if name or size is not None:
                raise CommandError("--report prints an existing sample: leave out --name and --size")
            sample = QualitySample.objects.filter(pk=report).first()
            if sample is None:
                raise CommandError(f"no quality sample has the id {report}")
            self._report(sample, as_json)
            return
        if not name or size is None:
            raise CommandError("drawing a sample needs --name and --size (or pass --report ID)")
        pool = {key: options[key] for key in quality.POOL_FILTERS if options.get(key)}
        try:
            sample = quality.draw_sample(name=name, size=size, seed=seed, pool=pool, user=None)
        except ReviewError as exc:
            raise CommandError(str(exc)) from None
        items = sample.items.select_related("revision__task").order_by("position")
        self.stdout.write(f"quality sample #{sample.pk} “{sample.name}”: {quality.size_note(sample)}")
        self.stdout.write(f"pool: {sample.pool_description}; seed {sample.seed}")
        rows = [
            {"position": i.position, "task": i.revision.task.external_id, "revision": i.revision.number} for i in items
        ]
        if not as_json:
            for row in rows:
                self.stdout.write(f"{row['position']:>5}  {row['task']} r{row['revision']}")
            return
        self.stdout.write(json.dumps(_sample_dict(sample) | {"items": rows}, ensure_ascii=False))

    def _report(self, sample, as_json: bool) -> None:
        stats = quality.sample_stats(sample)
        self.stdout.write(f"quality sample #{sample.pk} “{sample.name}”: {sample.pool_description}; seed {sample.seed}")
        self.stdout.write(
            f"{stats.ratings} ratings by {len(stats.raters)} reviewers; "
            f"{stats.items_rated} of {stats.items} items rated at least once"
        )
        self.stdout.write(
            f"{'dimension':<24} {'n':>5} {'mean':>6} {'std':>6}   " + " ".join(f"{s:>4}" for s in range(1, 6))
        )
        for d in stats.dimensions:
            mean = f"{d.mean:.2f}" if d.mean is not None else "-"
            std = f"{d.std:.2f}" if d.std is not None else "-"
            counts = " ".join(f"{n:>4}" for n in d.counts.values())
            self.stdout.write(f"{d.label:<24} {d.n:>5} {mean:>6} {std:>6}   {counts}")
        if as_json:
            self.stdout.write(json.dumps(_sample_dict(sample) | {"stats": stats.as_dict()}, ensure_ascii=False))


def _sample_dict(sample: QualitySample) -> dict:
    return {
        "id": sample.pk,
        "name": sample.name,
        "pool": sample.pool,
        "pool_description": sample.pool_description,
        "pool_size": sample.pool_size,
        "requested_size": sample.requested_size,
        "size": sample.items.count(),
        "whole_pool": sample.whole_pool,
        "seed": sample.seed,
    }
