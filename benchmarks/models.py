"""Benchmarks and their frozen versions: a version pins exact task revisions, so a score always names exactly what
was scored. A frozen BenchmarkVersion never changes.

What goes into a version is review's business (review.services.freeze_version pins the revisions its reviewers
accepted); evaluation runs and training runs read versions from here. Every change goes through
benchmarks.services or review.services.

The tables keep the names they had when these models lived in `review` (migrations benchmarks 0001 and review
0007 moved them without touching the database).
"""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from lib.nulsafe import NulSafeCharField, NulSafeTextField


class Benchmark(models.Model):
    name = models.SlugField(max_length=120, unique=True)
    description = NulSafeTextField(blank=True)
    # The accept gate: a candidate whose checker pays a lazy agent more than this (the lazy score of its latest
    # sanity report) cannot be accepted without an admin's override (review.services.sanity_block).
    lazy_tolerance = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Accepting is blocked while a lazy agent earns more than this with the candidate's checker.",
    )
    # Difficulty filtering (review.difficulty) keeps a candidate when strong >= strong_min, small <= small_max and
    # strong > small + margin, the means over n rollouts of a strong and a small agent.
    difficulty_strong_min = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Difficulty filtering: a candidate whose strong agent scores below this (mean) is too hard.",
    )
    difficulty_small_max = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Difficulty filtering: a candidate whose small agent scores above this (mean) is too easy.",
    )
    difficulty_margin = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Difficulty filtering: the strong agent must beat the small one by more than this, else the "
        "candidate does not tell them apart (0: strictly better).",
    )
    # Review as a team (review.team): who reviews, how many independent decisions each candidate needs, and the
    # share of candidates that get one more, chosen by a hash of the candidate's id, to measure agreement.
    reviewers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="reviewed_benchmarks",
        help_text="Who the queue routes this benchmark's candidates to (none: every reviewer).",
    )
    decisions_needed = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(5)],
        help_text="Independent accept/reject decisions a candidate needs before it is accepted or rejected.",
    )
    overlap_share = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of candidates that get one more independent decision, to measure agreement.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "review_benchmark"
        ordering = ["name"]

    def __str__(self):
        return self.name


class BenchmarkVersion(models.Model):
    """A frozen benchmark: the revisions of the accepted candidates at freezing time. Immutable once created."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    frozen_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = NulSafeCharField(max_length=500, blank=True)
    revisions = models.ManyToManyField(
        "tasks.TaskRevision", through="PinnedRevision", related_name="benchmark_versions"
    )

    class Meta:
        db_table = "review_benchmarkversion"
        ordering = ["benchmark", "-number"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "number"], name="unique_benchmark_version")]

    def __str__(self):
        return f"{self.benchmark.name} v{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("a frozen BenchmarkVersion is immutable: freeze a new version instead")
        super().save(*args, **kwargs)


class PinnedRevision(models.Model):
    version = models.ForeignKey(BenchmarkVersion, on_delete=models.CASCADE, related_name="pins")
    # PROTECT: a task whose revision a frozen version pins cannot be deleted out from under it.
    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.PROTECT, related_name="+")

    class Meta:
        db_table = "review_pinnedrevision"
        constraints = [models.UniqueConstraint(fields=["version", "revision"], name="unique_pinned_revision")]
