"""A study: a grid over one parameter whose cells are ordinary objects (datasets, training runs, evaluation runs).

What a study of each kind makes of its parameters is its kind's (studies.kinds); the rows here only record what was
asked, which objects each cell made, and where each cell is. A study is complete only when every cell is."""

from django.conf import settings
from django.db import models

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField


class Study(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        COMPLETE = "complete", "Complete"  # every cell is complete
        INCOMPLETE = "incomplete", "Incomplete"  # nothing is left to run, and some cells failed (each says why)
        CANCELLED = "cancelled", "Cancelled"  # by someone, or by its command when no worker took it

    FINISHED = (Status.COMPLETE, Status.INCOMPLETE, Status.CANCELLED)

    kind = NulSafeCharField(max_length=40, db_index=True)
    name = NulSafeCharField(max_length=200)
    params = NulSafeJSONField(default=dict)  # what was asked, as the kind normalised it
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.RUNNING, db_index=True)
    error = NulSafeTextField(blank=True)
    summary = NulSafeJSONField(default=dict, blank=True)  # the figures once finished (studies.summary)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"

    def __str__(self):
        return self.name or f"study #{self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class StudyCell(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # nothing started yet
        RUNNING = "running", "Running"  # one of its objects is being made
        COMPLETE = "complete", "Complete"  # its evaluation run is complete
        FAILED = "failed", "Failed"  # error says why

    FINISHED = (Status.COMPLETE, Status.FAILED)

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="cells")
    index = models.PositiveIntegerField()
    coordinates = NulSafeJSONField(default=dict)  # {"threshold": 0.5}, {"run": 2}, {"step": 60}, {"route": "persona"}
    label = NulSafeCharField(max_length=100)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    error = NulSafeTextField(blank=True)
    # What the cell made (SET_NULL: a deleted object leaves the cell saying so, not the study gone).
    dataset = models.ForeignKey(
        "training_jobs.TrainingDataset", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    training_run = models.ForeignKey(
        "training_jobs.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    eval_run = models.ForeignKey(
        "evaluation.EvalRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study", "index"]
        constraints = [models.UniqueConstraint(fields=["study", "index"], name="unique_study_cell")]

    def __str__(self):
        return f"{self.study} · {self.label}"
