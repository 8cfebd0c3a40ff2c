"""The task catalog: tasks, their immutable revisions, and content-addressed file blobs."""

import hashlib

from django.conf import settings
from django.db import models

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField

from .lazy_workspaces import BASE_RUNS, MOVES

PLANNED = BASE_RUNS + MOVES


def workspace_order(kind: str) -> tuple:
    """A lazy workspace's place: the planned ones in their order, any other after them by name."""
    return (PLANNED.index(kind), "") if kind in PLANNED else (len(PLANNED), kind)


class BenchmarkCategory(models.Model):
    """One of the benchmark's top-level categories (scores are reported per category)."""

    slug = models.SlugField(max_length=80, unique=True)
    name = NulSafeCharField(max_length=120, unique=True)
    description = NulSafeTextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "name"]
        verbose_name_plural = "benchmark categories"

    def __str__(self):
        return self.name


class ScenarioCategory(models.Model):
    """A scenario category for persona-driven synthesis."""

    slug = models.SlugField(max_length=80, unique=True)
    name = NulSafeCharField(max_length=120, unique=True)
    description = NulSafeTextField(blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "scenario categories"

    def __str__(self):
        return self.name


class ScenarioSubcategory(models.Model):
    category = models.ForeignKey(ScenarioCategory, on_delete=models.CASCADE, related_name="subcategories")
    slug = models.SlugField(max_length=80)
    name = NulSafeCharField(max_length=120)
    description = NulSafeTextField(blank=True)

    class Meta:
        ordering = ["category__name", "name"]
        constraints = [models.UniqueConstraint(fields=["category", "slug"], name="unique_subcategory_slug")]
        verbose_name_plural = "scenario subcategories"

    def __str__(self):
        return f"{self.category.name} / {self.name}"


class Blob(models.Model):
    """File content, stored once under its sha256. Revisions and rollout snapshots share blobs."""

    sha256 = NulSafeCharField(max_length=64, primary_key=True)
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

    external_id = NulSafeCharField(max_length=200, unique=True, help_text="Stable id used in files and exports.")
    benchmark_category = models.ForeignKey(
        BenchmarkCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    scenario_category = models.ForeignKey(
        ScenarioCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    scenario_subcategory = models.ForeignKey(
        ScenarioSubcategory, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    source = NulSafeCharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    current_revision = models.ForeignKey(
        "TaskRevision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The first line of the current instruction, kept for fast lists and search at 20,000+ tasks.
    title = NulSafeCharField(max_length=200, blank=True)
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
    instruction = NulSafeTextField()
    metadata = NulSafeJSONField(default=dict, blank=True)
    # Top-level keys of data_entry.json other than task_id/user_query/metadata (e.g. input_mount_dir).
    entry_extra = NulSafeJSONField(default=dict, blank=True)
    checker_entry = NulSafeCharField(max_length=500, default="bash reward/reward.sh")
    rubric = NulSafeJSONField(default=list, blank=True, help_text="Rubric rules: name, target_file, scores, weight.")
    code_weight = models.FloatField(
        default=0.7, help_text="λ: task score = λ·code + (1−λ)·rubric when a rubric exists."
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    author_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_revisions"
    )
    author_stage = NulSafeCharField(
        max_length=80, blank=True, help_text="Pipeline stage that wrote it, if no person did."
    )
    message = NulSafeCharField(max_length=500, blank=True)
    content_hash = NulSafeCharField(max_length=64, db_index=True)
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
        INPUT = "input", "Input file (starting workspace)"
        REWARD = "reward", "Checker file (reward/)"
        SOLUTION = "solution", "Reference solution"

    revision = models.ForeignKey(TaskRevision, on_delete=models.CASCADE, related_name="files")
    path = NulSafeCharField(max_length=500)
    role = NulSafeCharField(max_length=16, choices=Role.choices)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="revision_files")

    class Meta:
        ordering = ["role", "path"]
        constraints = [models.UniqueConstraint(fields=["revision", "role", "path"], name="unique_revision_file")]

    def __str__(self):
        return f"{self.role}:{self.path}"


class SanityReport(models.Model):
    """One sanity check of a revision's checker (tasks.sanity): how it scored the empty, initial and scaffold
    workspaces, the workspaces of the moves lazy agents make (tasks.lazy_workspaces) and the reference solution.
    Append-only: the latest per revision is the one shown."""

    # What a lazy agent leaves: nothing, the inputs, placeholders. Always run; a crash there is a crashed checker.
    LAZY_RUNS = ("empty", "initial", "scaffold")

    revision = models.ForeignKey(TaskRevision, on_delete=models.CASCADE, related_name="sanity_reports")
    # {lazy workspace: {score, status, reason, subscores, duration, runtime, stdout, stderr[, workspace_writes,
    #  workspace_writes_count]}}: LAZY_RUNS, then each move run (tasks.lazy_workspaces.MOVES). Reports made before
    #  the moves hold LAZY_RUNS only, and keep stderr of failed runs only.
    runs = NulSafeJSONField(default=dict)
    # The run on the initial workspace with the reference solution applied; null when the task has none.
    solution_run = NulSafeJSONField(null=True, blank=True)
    # Output paths the instruction names, given placeholders in the scaffold workspace.
    scaffold_paths = NulSafeJSONField(default=list, blank=True)
    crashed = models.BooleanField(help_text="No score could be read on one of the workspaces.")
    # Indexed: the task list and the review queue sort and filter by it.
    lazy_score = models.FloatField(
        default=0.0, db_index=True, help_text="What a lazy agent earns: the highest score of the lazy workspaces."
    )
    lazy_best = NulSafeCharField(
        max_length=40, blank=True, help_text="The lazy workspace that earned the lazy score (blank: an older report)."
    )
    # {lazy workspace: {description, files: [{path, size}], final_message}}: what each run was given.
    lazy_workspaces = NulSafeJSONField(default=dict, blank=True)
    # {move: why it was not run}: no output named, the same workspace as another, no judge endpoint, …
    moves_not_run = NulSafeJSONField(default=dict, blank=True)
    over_lenient = models.BooleanField(help_text="The lazy score is above the tolerance.")
    solvable = models.BooleanField(null=True, help_text="The reference solution scores 1.0 (null: no solution).")
    tolerance = models.FloatField()
    backend = NulSafeCharField(max_length=40)
    runtime = NulSafeCharField(max_length=80, blank=True, help_text="The sandbox runtime version that judged it.")
    isolated = models.BooleanField(help_text="False: the checker ran without a sandbox.")
    job_run = models.ForeignKey(
        "jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="sanity_reports"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The latest report of a revision, looked up once per task row by the task list's sanity filter.
        indexes = [models.Index(fields=["revision", "-created_at", "-id"], name="sanity_revision_latest")]

    def __str__(self):
        return f"sanity of {self.revision} ({self.verdict})"

    # Task list filter values: which tasks a latest report of their current revision puts in each group.
    FILTERS = {
        "crashed": "Checker crashed",
        "over_lenient": "Over-lenient checker",
        "unsolvable": "Solution fails",
        "passed": "Passed sanity",
        "unchecked": "Not sanity-checked",
    }

    @classmethod
    def latest_for(cls, revision_ref):
        """The latest report of a revision; `revision_ref` may be an OuterRef in a subquery."""
        return cls.objects.filter(revision=revision_ref).order_by("-created_at", "-id")

    @classmethod
    def filter_tasks(cls, tasks, which: str):
        """Tasks whose current revision's latest report is in group `which` (a key of FILTERS)."""
        latest = cls.latest_for(models.OuterRef("current_revision"))
        if which == "unchecked":
            return tasks.exclude(models.Exists(latest))
        if which == "passed":
            condition = models.Q(crashed=False, over_lenient=False) & ~models.Q(solvable=False)
        else:
            condition = {
                "crashed": models.Q(crashed=True),
                "over_lenient": models.Q(over_lenient=True),
                "unsolvable": models.Q(solvable=False),
            }[which]
        tasks = tasks.alias(latest_sanity=models.Subquery(latest.values("pk")[:1]))
        return tasks.filter(models.Exists(cls.objects.filter(condition, pk=models.OuterRef("latest_sanity"))))

    # Task list and review queue filter: the latest report's lazy score is above one of these.
    LAZY_THRESHOLDS = (0.0, 0.1, 0.2, 0.5)

    @classmethod
    def latest_lazy_score(cls, revision_ref):
        """The lazy score of a revision's latest report, as a subquery (null: never checked)."""
        return models.Subquery(cls.latest_for(revision_ref).values("lazy_score")[:1])

    @classmethod
    def filter_lazy_above(cls, rows, threshold: float, revision_field: str = "current_revision"):
        """Rows (tasks, or anything reaching a revision through `revision_field`) whose revision's latest report
        pays a lazy agent more than `threshold`."""
        return rows.alias(latest_lazy=cls.latest_lazy_score(models.OuterRef(revision_field))).filter(
            latest_lazy__gt=threshold
        )

    @property
    def verdict(self) -> str:
        if self.crashed:
            return "crashed"
        if self.over_lenient:
            return "over-lenient"
        if self.solvable is False:
            return "unsolvable"
        return "passed"

    @property
    def lazy_scores(self) -> dict[str, float]:
        """What a lazy agent earns on each lazy workspace, in the order the check plans them (PostgreSQL's jsonb keeps
        no key order: a message listing them must read the same on either database)."""
        return {kind: self.runs[kind]["score"] for kind in sorted(self.runs, key=workspace_order)}

    @property
    def lazy_best_run(self) -> dict | None:
        """The lazy workspace that earned the lazy score: workspace, score, the checks that pay there, its files and
        final message (None on a report that stored no runs)."""
        kind = self.lazy_best or max(self.runs, key=lambda k: self.runs[k]["score"], default="")
        if not kind or kind not in self.runs:
            return None
        given = (self.lazy_workspaces or {}).get(kind) or {}
        return {
            "workspace": kind,
            "score": self.runs[kind]["score"],
            "paying_checks": self.paying_on(kind),
            "description": given.get("description", ""),
            "files": given.get("files", []),
            "final_message": given.get("final_message", ""),
        }

    def paying_on(self, kind: str) -> dict[str, float]:
        """The sub-scores above 0 of one run: the checks that pay out on that workspace."""
        run = self.runs.get(kind) or {}
        return {name: value for name, value in (run.get("subscores") or {}).items() if value > 0}

    @property
    def paying_checks(self) -> dict[str, float]:
        """The checks that pay a lazy agent, each with the most it pays on any lazy workspace, best first."""
        found: dict[str, float] = {}
        for kind in self.runs:
            for name, value in self.paying_on(kind).items():
                found[name] = max(value, found.get(name, 0.0))
        return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

    def paying_checks_text(self, limit: int = 8) -> str:
        """'name=1, other=0.5' for the paying checks (the first `limit`, then how many more)."""
        items = list(self.paying_checks.items())
        text = ", ".join(f"{name}={value:g}" for name, value in items[:limit])
        return text + (f" and {len(items) - limit} more" if len(items) > limit else "")

    @property
    def warnings(self) -> list[str]:
        """What to know that is no finding: the checker wrote into a workspace it judged (it ran the agent's
        script, say); the score stands."""
        found = []
        for kind, run in self.runs.items():
            if kind not in self.LAZY_RUNS and run["status"] != "ok":
                found.append(
                    f"the checker crashed on the {kind} workspace (a lazy move: it scores 0 there): "
                    f"{run['status']}: {run['reason']}"
                )
        for kind, run in [*self.runs.items(), ("solution", self.solution_run)]:
            writes = (run or {}).get("workspace_writes") or []
            if writes:
                shown = ", ".join(f"{w['change']} {w['path']}" for w in writes[:5])
                more = run.get("workspace_writes_count", len(writes)) - min(len(writes), 5)
                found.append(
                    f"the checker wrote to the {kind} workspace while judging: {shown}"
                    + (f" and {more} more" if more > 0 else "")
                )
        return found

    @property
    def problems(self) -> list[str]:
        """Each finding in words, with the run's reason or the sub-scores that gave points."""
        found = []
        for kind in self.LAZY_RUNS:
            run = self.runs.get(kind)
            if run and run["status"] != "ok":
                found.append(f"crashed on the {kind} workspace: {run['status']}: {run['reason']}")
        # A move (tasks.lazy_workspaces) is named when it earns more than the base workspaces do: it says no more.
        base_best = max((self.runs[kind]["score"] for kind in self.LAZY_RUNS if kind in self.runs), default=0.0)
        for kind, run in self.runs.items():
            if run["score"] > self.tolerance and (kind in self.LAZY_RUNS or run["score"] > base_best):
                credited = ", ".join(f"{name}={value:g}" for name, value in self.paying_on(kind).items())
                found.append(
                    f"over-lenient: a lazy agent earns {run['score']:g} on the {kind} workspace"
                    + (f" (paying checks: {credited})" if credited else "")
                )
        if self.solvable is False:
            run = self.solution_run
            detail = f"{run['status']}: {run['reason']}" if run["status"] != "ok" else f"scored {run['score']:g}"
            found.append(f"the reference solution does not score 1: {detail}")
        return found

    def as_dict(self) -> dict:
        """The report as `sanity_check --json` prints it and jobs return it."""
        return {
            "task": self.revision.task.external_id,
            "revision": self.revision.number,
            "runs": self.runs,
            "crashed": self.crashed,
            "over_lenient": self.over_lenient,
            "lazy_score": self.lazy_score,
            "lazy_scores": self.lazy_scores,
            "lazy_best": self.lazy_best_run,
            "lazy_workspaces": self.lazy_workspaces,
            "moves_not_run": self.moves_not_run,
            "paying_checks": self.paying_checks,
            "solvable": self.solvable,
            "solution_run": self.solution_run,
            "scaffold_paths": self.scaffold_paths,
            "tolerance": self.tolerance,
            "backend": self.backend,
            "runtime": self.runtime,
            "isolated": self.isolated,
            "warnings": self.warnings,
            "checked_at": self.created_at.isoformat() if self.created_at else None,
        }


class CategoryProposal(models.Model):
    """A model's proposal of a benchmark category for a task (tasks.categorizing), until an admin decides it.

    Accepting or editing one makes a new revision of the task with metadata.category set (the history of the
    change); the proposal keeps what was proposed, what was decided, by whom and the revision that made it.
    A proposal that could not be had (the call failed, or no valid answer) is stored as failed, with the error.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        EDITED = "edited", "Edited"  # an admin chose another category than the proposed one
        REJECTED = "rejected", "Rejected"  # by an admin, superseded by a newer proposal, or stale
        FAILED = "failed", "Failed"

    OPEN = (Status.PENDING, Status.FAILED)  # what an admin may still decide

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="category_proposals")
    revision = models.ForeignKey(
        TaskRevision, on_delete=models.CASCADE, related_name="category_proposals", help_text="The revision shown."
    )
    # The task's category when the proposal was made: a decision on a task whose category changed since is stale.
    category_before = models.ForeignKey(
        BenchmarkCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    category = models.ForeignKey(
        BenchmarkCategory,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="proposals",
        help_text="What the model proposed (null: the proposal failed).",
    )
    reason = NulSafeTextField(blank=True)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = NulSafeTextField(blank=True, help_text="Why no proposal was had (status failed).")
    endpoint_name = NulSafeCharField(max_length=80, blank=True)
    prompt_version = NulSafeCharField(max_length=40, blank=True)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job_run = models.ForeignKey(
        "jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="category_proposals"
    )
    decided_category = models.ForeignKey(
        BenchmarkCategory,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="What was set: the proposed category (accepted) or an admin's choice (edited).",
    )
    decided_revision = models.ForeignKey(
        TaskRevision,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The revision the decision made (or the current one, when the content was already so).",
    )
    decision_note = NulSafeCharField(max_length=500, blank=True, help_text="Why it was rejected, when it was.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="proposal_status_created"),
            models.Index(fields=["task", "status"], name="proposal_task_status"),
        ]

    def __str__(self):
        what = self.category.name if self.category_id else self.status
        return f"#{self.pk} {self.task.external_id}: {what}"
