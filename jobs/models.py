from django.conf import settings
from django.db import models

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField

from . import registry
from .redaction import hide_paths


class JobRunQuerySet(models.QuerySet):
    def with_failed_children(self):
        """Each run with `failed_children`: a batch that queued runs which then failed has failed items too."""
        failed = models.Count("children", filter=models.Q(children__status="failed"))
        # A GROUP BY drops Meta.ordering: keep the order the runs had (newest first by default).
        return self.annotate(failed_children=failed).order_by(*(self.query.order_by or self.model._meta.ordering))


class JobRun(models.Model):
    """One run of a background job: what it is, where it stands, and what it said."""

    objects = JobRunQuerySet.as_manager()

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    ACTIVE = (Status.QUEUED, Status.RUNNING)
    PARTIAL = "partial"  # an outcome, not a status: succeeded, with failed items
    LOG_TAIL_CHARS = 20_000

    kind = NulSafeCharField(max_length=100, db_index=True)
    queue = NulSafeCharField(max_length=40, default="default")
    engine = NulSafeCharField(max_length=20)
    params = NulSafeJSONField(default=dict, blank=True)
    subject = NulSafeCharField(max_length=300, blank=True, help_text="What the run is about, e.g. a task and revision.")
    subject_url = NulSafeCharField(max_length=500, blank=True)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    message = NulSafeCharField(max_length=300, blank=True, help_text="What the job is doing now.")
    log_tail = NulSafeTextField(blank=True)
    result = NulSafeJSONField(null=True, blank=True)
    error = NulSafeTextField(blank=True, help_text="The error and its traceback, when it failed.")
    failed_items = models.PositiveIntegerField(
        default=0,
        help_text="How many of its items a job could not do (e.g. tasks an import could not read).",
    )
    items_total = models.PositiveIntegerField(
        default=0, help_text="How many items the job went through, when it reports failed items (0: not told)."
    )
    attempts = models.PositiveIntegerField(default=0)
    worker = NulSafeCharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    held = models.BooleanField(
        default=False,
        db_default=False,  # rows written by code from before the field (a rolling upgrade) are not held
        help_text="Queued but not yet handed to its engine: its parent keeps only so many children there at once "
        "(jobs.fanout); the next is handed over as one finishes.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="job_runs"
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="jobrun_recent"),
            models.Index(fields=["parent", "held", "status"], name="jobrun_children"),
        ]

    def __str__(self):
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def title(self) -> str:
        """The registered job's title (its kind when the kind is no longer registered)."""
        try:
            return registry.get(self.kind).title
        except registry.UnknownJobKind:
            return self.kind

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def about(self) -> str:
        """What the run is about: its subject, else (runs queued before subjects, kinds without one) its scalar
        parameters in short, paths cut to their last part."""
        if self.subject:
            return self.subject
        shown = [f"{k} {v}" for k, v in sorted((self.params or {}).items()) if isinstance(v, str | int | float)]
        return hide_paths(", ".join(shown))[:120]

    @property
    def failed_count(self) -> int:
        """Its failed items: what the job reported, or (loaded `with_failed_children`) its children that failed."""
        return self.failed_items or getattr(self, "failed_children", 0)

    @property
    def outcome(self) -> str:
        """The status, except that a run which succeeded with failed items is "partial" (shown in amber). A run whose
        every item failed has the status failed (jobs.runner)."""
        if self.status == self.Status.SUCCEEDED and self.failed_count:
            return self.PARTIAL
        return self.status

    @property
    def outcome_display(self) -> str:
        if self.outcome == self.PARTIAL:
            of = f" of {self.items_total}" if self.items_total else ""
            return f"Completed with {self.failed_count}{of} failed"
        if self.status == self.Status.FAILED and self.items_total and self.failed_items >= self.items_total:
            return f"Failed: all {self.items_total} items failed" if self.items_total > 1 else "Failed: its item failed"
        return self.get_status_display()

    @property
    def report_template(self) -> str:
        """The template that shows this kind's result to people (its counts, its failures), or ""."""
        try:
            return registry.get(self.kind).report
        except registry.UnknownJobKind:
            return ""

    @property
    def percent(self) -> int:
        if self.status == self.Status.SUCCEEDED:
            return 100
        if not self.progress_total:
            return 0
        return min(100, int(100 * self.progress_done / self.progress_total))

    def batch(self) -> "BatchProgress":
        """How far this run's children are: a batch job that only queues its children finishes first."""
        counts, held = {}, 0
        for status, is_held, n in self.children.order_by().values_list("status", "held").annotate(n=models.Count("id")):
            counts[status] = counts.get(status, 0) + n
            held += n if is_held and status == self.Status.QUEUED else 0
        return BatchProgress(self, counts, held)

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or self.heartbeat_at or self.started_at) - self.started_at


class BatchProgress:
    """A parent run and the statuses of its children, for the batch progress partial."""

    def __init__(self, run: JobRun, counts: dict[str, int], held: int = 0):
        self.run = run
        self.held = held  # queued children not handed to the engine yet (jobs.fanout)
        self.total = sum(counts.values())
        self.succeeded = counts.get(JobRun.Status.SUCCEEDED, 0)
        self.failed = counts.get(JobRun.Status.FAILED, 0)
        self.cancelled = counts.get(JobRun.Status.CANCELLED, 0)
        self.running = counts.get(JobRun.Status.RUNNING, 0)
        self.done = self.succeeded + self.failed + self.cancelled

    @property
    def is_finished(self) -> bool:
        """The parent finished and so did every child it queued (a failed parent queues no more)."""
        return self.run.is_finished and self.done == self.total

    @property
    def percent(self) -> int:
        if not self.total:
            return 100 if self.run.is_finished else 0
        return int(100 * self.done / self.total)

    @property
    def outcome(self) -> str:
        """How the finished batch went: failed (the parent did, or every child), partial (some children failed) or
        succeeded; the badge and the bar's colour."""
        if self.run.status == JobRun.Status.FAILED or (self.total and self.failed == self.total):
            return JobRun.Status.FAILED
        return JobRun.PARTIAL if self.failed else JobRun.Status.SUCCEEDED

    @property
    def outcome_display(self) -> str:
        if self.outcome == JobRun.Status.FAILED:
            return f"Failed: all {self.total} failed" if self.total > 1 and self.failed == self.total else "Failed"
        return f"Finished · {self.failed} of {self.total} failed" if self.failed else "Finished"


class Worker(models.Model):
    """A worker process that said it is alive: it writes `seen_at` every CLAWGYM_WORKER_BEAT_SECONDS (jobs.workers).

    /healthz counts, per queue, the workers seen within CLAWGYM_WORKER_SEEN_SECONDS; a worker that was killed just
    stops being seen, and its row is removed by the reaper's periodic job a day later.
    """

    name = NulSafeCharField(max_length=200, unique=True, help_text="host:pid:start, as in JobRun.worker.")
    host = NulSafeCharField(max_length=200)
    engine = NulSafeCharField(max_length=20)
    queues = NulSafeCharField(max_length=200, help_text="The queues it takes jobs from, comma-separated.")
    slots = models.PositiveSmallIntegerField(
        default=1,
        db_default=1,
        help_text="How many jobs it runs at once (a Celery worker's concurrency; 1 per django-q process).",
    )
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["host", "name"]

    def __str__(self):
        return f"{self.engine} worker {self.name} ({self.queues})"

    @property
    def queue_list(self) -> list[str]:
        return [q for q in self.queues.split(",") if q]
