"""Quality sampling: draw N tasks at random from a pool, collect reviewers' 1-5 scores on four dimensions
(QUALITY_DIMENSIONS) and sum them up per dimension: mean, sample standard deviation, n and the distribution.

A draw is reproducible and auditable: the pool's task ids, in id order, go through random.Random(seed).sample, and the
pool filters, the pool size and the seed are stored with the sample. Each drawn task is pinned to its current revision,
so a rating always names what was rated. A reviewer has one rating per item; rating it again updates it in place.

The pages, the API and the quality_sample command call these with the acting user (None: a trusted script).
"""

import random
import secrets
import statistics
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q

from accounts.roles import ADMIN, REVIEWER
from benchmarks.models import Benchmark
from tasks.models import BenchmarkCategory, Task

from .models import (
    QUALITY_DIMENSIONS,
    QUALITY_SCALE,
    BenchmarkCandidate,
    QualityRating,
    QualitySample,
    QualitySampleItem,
)
from .services import ReviewError, _require

POOL_FILTERS = ("benchmark", "candidate_status", "task_status", "category", "source")
MAX_SAMPLE_SIZE = 1_000  # people rate every item: more is not a study anyone finishes
MAX_SEED = 2**63 - 1  # fits the BigIntegerField
# Seeds made up for the user stay short enough to read out and retype.
DRAWN_SEED_BELOW = 10**9
MAX_COMMENT = 5_000


class EmptyPool(ReviewError):
    """No task with a revision matches the pool's filters."""


# --- the pool --------------------------------------------------------------------------------------------------


def clean_pool(pool: dict) -> dict:
    """The pool filters that are set, checked: unknown filters, benchmarks, categories and values are refused."""
    unknown = sorted(set(pool) - set(POOL_FILTERS))
    if unknown:
        raise ReviewError(f"unknown pool filter(s) {', '.join(unknown)}; use {', '.join(POOL_FILTERS)}")
    stripped = {key: str(value).strip() for key, value in pool.items() if value is not None}
    cleaned = {key: value for key, value in stripped.items() if value}
    if "benchmark" in cleaned and not Benchmark.objects.filter(name=cleaned["benchmark"]).exists():
        raise ReviewError(f"no benchmark is named {cleaned['benchmark']!r}")
    if "candidate_status" in cleaned:
        if "benchmark" not in cleaned:
            raise ReviewError("a candidate status filter needs a benchmark: candidates belong to one")
        _check_choice("candidate status", cleaned["candidate_status"], BenchmarkCandidate.Status.values)
    if "task_status" in cleaned:
        _check_choice("task status", cleaned["task_status"], Task.Status.values)
    if "source" in cleaned:
        _check_choice("source", cleaned["source"], Task.Source.values)
    if "category" in cleaned and not BenchmarkCategory.objects.filter(slug=cleaned["category"]).exists():
        raise ReviewError(f"no benchmark category has the slug {cleaned['category']!r}")
    return cleaned


def _check_choice(what: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ReviewError(f"{value!r} is not a {what}; use one of {', '.join(allowed)}")


def pool_tasks(pool: dict):
    """The tasks of a (cleaned) pool, in id order. Tasks without a revision have nothing to rate: never in a pool."""
    tasks = Task.objects.filter(current_revision__isnull=False)
    if "benchmark" in pool:
        candidates = BenchmarkCandidate.objects.filter(task=OuterRef("pk"), benchmark__name=pool["benchmark"])
        if "candidate_status" in pool:
            candidates = candidates.filter(status=pool["candidate_status"])
        tasks = tasks.filter(Exists(candidates))
    if "task_status" in pool:
        tasks = tasks.filter(status=pool["task_status"])
    if "category" in pool:
        tasks = tasks.filter(benchmark_category__slug=pool["category"])
    if "source" in pool:
        tasks = tasks.filter(source=pool["source"])
    return tasks.order_by("pk")


def describe_pool(pool: dict) -> str:
    """The pool in words, as the sample's pages and reports name it."""
    parts = []
    if "benchmark" in pool:
        what = f"candidates of {pool['benchmark']}"
        if "candidate_status" in pool:
            what += f" ({BenchmarkCandidate.Status(pool['candidate_status']).label.lower()})"
        parts.append(what)
    if "task_status" in pool:
        parts.append(f"status {Task.Status(pool['task_status']).label}")
    if "category" in pool:
        parts.append(f"category {BenchmarkCategory.objects.get(slug=pool['category']).name}")
    if "source" in pool:
        parts.append(f"source {Task.Source(pool['source']).label}")
    if not parts:
        return "All tasks"
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


# --- drawing ---------------------------------------------------------------------------------------------------


def draw_sample(*, name: str, size: int, pool: dict, user, seed: int | None = None) -> QualitySample:
    """Draw `size` tasks uniformly at random without replacement from the pool, pinned to their current revisions.

    A `size` above the pool's takes the whole pool (in random order: raters go through it in draw order; the sample's
    `whole_pool` tells). An empty pool is an EmptyPool error. Without a seed one is made up; either way it is stored.
    """
    if user is not None:
        _require(user, ADMIN, "drawing a quality sample")
    name = name.strip()
    if not name:
        raise ReviewError("a quality sample needs a name")
    name_chars = QualitySample._meta.get_field("name").max_length
    if len(name) > name_chars:
        raise ReviewError(f"the sample name is {len(name):,} characters, over the limit of {name_chars:,}")
    if not 1 <= size <= MAX_SAMPLE_SIZE:
        raise ReviewError(f"the sample size must be from 1 to {MAX_SAMPLE_SIZE}")
    if seed is None:
        seed = secrets.randbelow(DRAWN_SEED_BELOW)
    elif not 0 <= seed <= MAX_SEED:
        raise ReviewError(f"the seed must be from 0 to {MAX_SEED}")
    pool = clean_pool(pool)
    description = describe_pool(pool)
    with transaction.atomic():
        pool_rows = list(pool_tasks(pool).values_list("pk", "current_revision_id"))
        if not pool_rows:
            raise EmptyPool(f"the pool is empty: no task with a revision matches it ({description})")
        drawn = random.Random(seed).sample(pool_rows, min(size, len(pool_rows)))
        sample = QualitySample.objects.create(
            name=name,
            pool=pool,
            pool_description=description,
            pool_size=len(pool_rows),
            requested_size=size,
            seed=seed,
            created_by=user,
        )
        QualitySampleItem.objects.bulk_create(
            QualitySampleItem(sample=sample, position=position, revision_id=revision_id)
            for position, (_task_id, revision_id) in enumerate(drawn, start=1)
        )
    return sample


def size_note(sample: QualitySample) -> str:
    """What was drawn, in words; says so when N asked for more than the pool held."""
    if sample.requested_size > sample.pool_size:
        return (
            f"{sample.requested_size} tasks were asked for but the pool held only {sample.pool_size}: "
            "the sample is the whole pool"
        )
    return f"{sample.requested_size} of the pool's {sample.pool_size} tasks"


# --- rating ----------------------------------------------------------------------------------------------------


def rate_item(item: QualitySampleItem, scores: dict, *, user, comment: str = "") -> tuple[QualityRating, bool]:
    """Record `user`'s scores of the item ({dimension field: 1..5}, every dimension); returns (rating, created).

    Rating an item again replaces the reviewer's earlier scores and comment (one rating per reviewer and item).
    """
    _require(user, REVIEWER, "rating a quality sample")
    values = {}
    for dimension in QUALITY_DIMENSIONS:
        score = scores.get(dimension.field)
        if isinstance(score, bool) or not isinstance(score, int) or score not in QUALITY_SCALE:
            raise ReviewError(f"{dimension.label} needs a whole-number score from 1 to 5 (got {score!r})")
        values[dimension.field] = score
    unknown = sorted(set(scores) - set(values))
    if unknown:
        raise ReviewError(f"unknown dimension(s) {', '.join(unknown)}")
    comment = comment.strip()
    if len(comment) > MAX_COMMENT:
        raise ReviewError(f"the comment is longer than {MAX_COMMENT} characters")
    return QualityRating.objects.update_or_create(item=item, reviewer=user, defaults={**values, "comment": comment})


def next_unrated_item(sample: QualitySample, user, after: int = 0) -> QualitySampleItem | None:
    """The first item after position `after` that `user` has not rated, wrapping round; None when all are rated."""
    unrated = sample.items.exclude(ratings__reviewer=user).select_related("revision__task").order_by("position")
    return unrated.filter(position__gt=after).first() or unrated.first()


def samples_with_progress(user):
    """Every sample annotated with `size` (items), `ratings` (all reviewers') and `mine` (items `user` rated)."""
    return (
        QualitySample.objects.select_related("created_by")
        .annotate(
            size=Count("items", distinct=True),
            ratings=Count("items__ratings"),
            mine=Count("items__ratings", filter=Q(items__ratings__reviewer=user)),
        )
        .order_by("-created_at", "-id")  # Meta.ordering is not applied to aggregating queries
    )


# --- statistics ------------------------------------------------------------------------------------------------


@dataclass
class DimensionStats:
    field: str
    label: str
    help: str
    n: int
    mean: float | None  # None without ratings
    std: float | None  # sample standard deviation (n - 1 in the denominator); None below two ratings
    counts: dict[int, int]  # how many ratings gave each score 1..5

    def as_dict(self) -> dict:
        return {
            "dimension": self.field,
            "label": self.label,
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "counts": {str(score): n for score, n in self.counts.items()},
        }


@dataclass
class SampleStats:
    dimensions: list[DimensionStats]
    items: int
    items_rated: int  # items with at least one rating
    ratings: int
    raters: list[tuple[str, int]]  # (username, ratings), most ratings first; a deleted account is "(deleted user)"

    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "items_rated": self.items_rated,
            "ratings": self.ratings,
            "dimensions": [d.as_dict() for d in self.dimensions],
            "raters": [{"reviewer": name, "ratings": n} for name, n in self.raters],
        }


def sample_stats(sample: QualitySample) -> SampleStats:
    """Per dimension over every rating of the sample (each reviewer's current rating of each item counts once)."""
    ratings = QualityRating.objects.filter(item__sample=sample)
    fields = [d.field for d in QUALITY_DIMENSIONS]
    rows = list(ratings.values_list(*fields))
    dimensions = []
    for i, d in enumerate(QUALITY_DIMENSIONS):
        scores = [row[i] for row in rows]
        counts = dict.fromkeys(QUALITY_SCALE, 0)
        for score in scores:
            counts[score] += 1
        dimensions.append(
            DimensionStats(
                field=d.field,
                label=d.label,
                help=d.help,
                n=len(scores),
                mean=statistics.fmean(scores) if scores else None,
                std=statistics.stdev(scores) if len(scores) >= 2 else None,
                counts=counts,
            )
        )
    per_rater = ratings.order_by().values_list("reviewer__username").annotate(n=Count("id"))
    raters = sorted(((name or "(deleted user)", n) for name, n in per_rater), key=lambda r: (-r[1], r[0]))
    return SampleStats(
        dimensions=dimensions,
        items=sample.items.count(),
        items_rated=sample.items.filter(ratings__isnull=False).distinct().count(),
        ratings=len(rows),
        raters=raters,
    )
