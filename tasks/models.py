"""The task catalog: tasks, their immutable revisions, and content-addressed file blobs."""

import hashlib

from django.conf import settings
from django.db import models


class BenchmarkCategory(models.Model):
    """One of the benchmark's top-level categories (scores are reported per category)."""

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=120, unique=True)
    description = models.TextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "name"]
        verbose_name_plural = "benchmark categories"

    def __str__(self):
        return self.name


class ScenarioCategory(models.Model):
    """A scenario category for persona-driven synthesis."""

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=120, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "scenario categories"

    def __str__(self):
        return self.name


class ScenarioSubcategory(models.Model):
    category = models.ForeignKey(ScenarioCategory, on_delete=models.CASCADE, related_name="subcategories")
    slug = models.SlugField(max_length=80)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["category__name", "name"]
        constraints = [models.UniqueConstraint(fields=["category", "slug"], name="unique_subcategory_slug")]
        verbose_name_plural = "scenario subcategories"

    def __str__(self):
        return f"{self.category.name} / {self.name}"


class Blob(models.Model):
    """File content, stored once under its sha256. Revisions and rollout snapshots share blobs."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.BigIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.sha256[:12]} ({self.size} B)"

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    @classmethod
    def store(cls, data: bytes) -> "Blob":
        key = cls.digest(data)
        blob, _ = cls.objects.get_or_create(sha256=key, defaults={"size": len(data), "data": data})
        return blob

    @property
    def content(self) -> bytes:
        return bytes(self.data)


class Task(models.Model):
    class Source(models.TextChoices):
        IMPORTED = "imported", "Imported"
        PERSONA = "persona", "Persona-driven synthesis"
        SKILL = "skill", "Skill-grounded synthesis"
        MANUAL = "manual", "Written by hand"

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        READY = "ready", "Ready"
        REJECTED = "rejected", "Rejected"
        ARCHIVED = "archived", "Archived"

    external_id = models.CharField(max_length=200, unique=True, help_text="Stable id used in files and exports.")
    benchmark_category = models.ForeignKey(
        BenchmarkCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    scenario_category = models.ForeignKey(
        ScenarioCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    scenario_subcategory = models.ForeignKey(
        ScenarioSubcategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    current_revision = models.ForeignKey(
        "TaskRevision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The first line of the current instruction, kept for fast lists and search at 20,000+ tasks.
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-updated_at"], name="task_status_updated"),
            models.Index(fields=["benchmark_category", "-updated_at"], name="task_category_updated"),
            models.Index(fields=["source", "-updated_at"], name="task_source_updated"),
            models.Index(fields=["-updated_at", "-id"], name="task_updated"),
        ]

    def __str__(self):
        return self.external_id


class TaskRevision(models.Model):
    """One immutable state of a task. Every change, by a pipeline stage or a person, makes a new one."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    instruction = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    # Top-level keys of data_entry.json other than task_id/user_query/metadata (e.g. input_mount_dir).
    entry_extra = models.JSONField(default=dict, blank=True)
    checker_entry = models.CharField(max_length=500, default="bash reward/reward.sh")
    rubric = models.JSONField(default=list, blank=True, help_text="Rubric rules: name, target_file, scores, weight.")
    code_weight = models.FloatField(default=0.7, help_text="λ: task score = λ·code + (1−λ)·rubric when a rubric exists.")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    author_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_revisions"
    )
    author_stage = models.CharField(max_length=80, blank=True, help_text="Pipeline stage that wrote it, if no person did.")
    message = models.CharField(max_length=500, blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "-number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="unique_revision_number")]

    def __str__(self):
        return f"{self.task.external_id} r{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.pop("_allow_update", False):
            raise ValueError("TaskRevision is immutable: make a new revision instead.")
        super().save(*args, **kwargs)

    @property
    def author(self) -> str:
        if self.author_user_id:
            return self.author_user.get_username()
        return self.author_stage or "unknown"

    @property
    def has_rubric(self) -> bool:
        return bool(self.rubric)

    def files_by_role(self, role: str):
        return self.files.filter(role=role).select_related("blob").order_by("path")


class RevisionFile(models.Model):
    class Role(models.TextChoices):
        INPUT = "input", "Input file (s0)"
        REWARD = "reward", "Checker file (reward/)"
        SOLUTION = "solution", "Reference solution"

    revision = models.ForeignKey(TaskRevision, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=500)
    role = models.CharField(max_length=16, choices=Role.choices)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="revision_files")

    class Meta:
        ordering = ["role", "path"]
        constraints = [models.UniqueConstraint(fields=["revision", "role", "path"], name="unique_revision_file")]

    def __str__(self):
        return f"{self.role}:{self.path}"
