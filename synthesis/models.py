"""Synthesis: the seeds (personas, atomic operations, skills and their annotations), batches of items that go
through the pipeline's stages, and the quality assessments of any task.

Seeds are editable data. A batch's items each carry their own progress (the stage they reached, what every stage
produced and why it passed or rejected them), so a batch resumes without redoing finished work and no item is
ever dropped without a recorded reason. Quality assessments are append-only: the latest per revision and stage is
the one shown.
"""

from django.conf import settings
from django.db import models

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField

# --- seeds ------------------------------------------------------------------------------------------------------


class Persona(models.Model):
    """Who asks: one line or paragraph describing a user (Persona Hub style)."""

    text = NulSafeTextField()
    # sha256 of the text with case and white space folded: the same persona imported twice is one row.
    text_hash = NulSafeCharField(max_length=64, unique=True, editable=False)
    source = NulSafeCharField(max_length=200, blank=True, help_text='Where it came from: "clawgym" (shipped), a file.')
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return self.text[:80]


class OperationCategory(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    name = NulSafeCharField(max_length=120, unique=True)
    description = NulSafeTextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "name"]
        verbose_name_plural = "operation categories"

    def __str__(self):
        return self.name


class AtomicOperation(models.Model):
    """One basic thing a task may ask an agent to do (read a CSV, fill a template, run a script, …)."""

    category = models.ForeignKey(OperationCategory, on_delete=models.PROTECT, related_name="operations")
    slug = models.SlugField(max_length=80, unique=True)
    name = NulSafeCharField(max_length=160)
    description = NulSafeTextField(blank=True)
    # The sandbox has no network: operations that need it are left out of prompts unless a batch asks for them.
    needs_network = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["category__order", "name"]

    def __str__(self):
        return self.name


class Skill(models.Model):
    """An agent skill (an AgentSkills / OpenClaw `SKILL.md` folder), its files kept as blobs."""

    name = NulSafeCharField(max_length=200, unique=True)
    description = NulSafeTextField(blank=True)
    source = NulSafeCharField(max_length=500, blank=True, help_text='"openclaw-bundled", a folder or an archive.')
    front_matter = NulSafeJSONField(default=dict, blank=True)
    required_bins = NulSafeJSONField(default=list, blank=True)
    required_env = NulSafeJSONField(default=list, blank=True)
    primary_env = NulSafeCharField(max_length=200, blank=True)
    # sha256 over the files (path and content): an import of the same skill again is "unchanged".
    content_hash = NulSafeCharField(max_length=64)
    # Files of the folder that were not stored, each with why: [{"path", "reason"}] (too large, binary, a link).
    skipped_files = NulSafeJSONField(default=list, blank=True)
    # Why the last annotation attempt failed (it names the endpoint); blank once an annotation succeeded.
    annotation_error = NulSafeTextField(blank=True)
    # An admin's decision over the annotation's label: null follows the annotation.
    synthesizable_override = models.BooleanField(null=True, blank=True)
    override_reason = NulSafeTextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def latest_annotation(self):
        return self.annotations.order_by("-created_at", "-id").first()


class SkillFile(models.Model):
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="files")
    path = NulSafeCharField(max_length=500)
    blob = models.ForeignKey("tasks.Blob", on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["skill", "path"]
        constraints = [models.UniqueConstraint(fields=["skill", "path"], name="unique_skill_file")]

    def __str__(self):
        return f"{self.skill.name}/{self.path}"


class SkillAnnotation(models.Model):
    """An LLM's reading of a skill. Append-only: the latest is the one that counts."""

    class Risk(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="annotations")
    summary = NulSafeTextField()
    core_content = NulSafeTextField(blank=True)
    auth_required = models.BooleanField()
    required_env = NulSafeJSONField(default=list, blank=True)
    input_format = NulSafeTextField(blank=True)
    output_format = NulSafeTextField(blank=True)
    text_only_compatible = models.BooleanField()
    risk = NulSafeCharField(max_length=8, choices=Risk.choices, default=Risk.LOW)
    risk_reason = NulSafeTextField(blank=True)
    # The skill's required binaries that the sandbox runtime lacks (sandbox/runtime/packages.txt): any makes the
    # skill unusable in a task, so it is not synthesizable.
    missing_bins = NulSafeJSONField(default=list, blank=True)
    synthesizable = models.BooleanField(help_text="not auth_required, text-only compatible, no missing binaries")
    endpoint_name = NulSafeCharField(max_length=80, blank=True)
    prompt_version = NulSafeCharField(max_length=40, blank=True)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["skill", "-created_at", "-id"]

    def __str__(self):
        return f"annotation of {self.skill.name}"


# --- batches ----------------------------------------------------------------------------------------------------


class Route(models.TextChoices):
    PERSONA = "persona", "Persona-driven"
    SKILL = "skill", "Skill-grounded"


class Stage(models.TextChoices):
    """The pipeline's stages, in order (synthesis/stages/…). Each item goes through them one after another."""

    GENERATE = "generate", "Task generation"
    FILES = "files", "Resource preparation"
    VERIFY = "verify", "Verification design"
    RUBRIC = "rubric", "Rubric"
    QA = "qa", "Quality assessment"
    CATALOG = "catalog", "Into the catalog"


STAGE_ORDER = [s.value for s in Stage]


class SynthesisBatch(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"  # its budget was reached, or someone paused it: resumable
        COMPLETE = "complete", "Complete"  # every item is kept, rejected or failed
        FAILED = "failed", "Failed"  # the batch itself could not run (not one item: those are counted)
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.COMPLETE, Status.FAILED, Status.CANCELLED)

    name = NulSafeCharField(max_length=200, blank=True)
    route = NulSafeCharField(max_length=16, choices=Route.choices)
    requested = models.PositiveIntegerField(help_text="Tasks wanted: one item each.")
    preview = models.BooleanField(default=False, help_text="A preview batch: a few items through every stage.")
    generator = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="+")
    judge = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="+")
    seed = models.BigIntegerField(help_text="Draws the items' seeds: the same seed draws the same items.")
    prompt_versions = NulSafeJSONField(default=dict, blank=True, help_text="Stage -> prompt version used.")
    qa_thresholds = NulSafeJSONField(default=dict, blank=True, help_text="e.g. novelty 0.90, difficulty 2..5.")
    options = NulSafeJSONField(default=dict, blank=True, help_text="Route options (operations per task, …).")
    budget_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    budget_tokens = models.BigIntegerField(null=True, blank=True)
    # What it was started with, normalised; a resume with other settings is refused or reruns the stages affected.
    config = NulSafeJSONField(default=dict)
    config_hash = NulSafeCharField(max_length=64, db_index=True)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    status_reason = NulSafeCharField(max_length=500, blank=True, help_text="Why it is paused or failed.")
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Kept up to date as items' model calls are recorded (synthesis services add each call's usage).
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "synthesis batches"

    def __str__(self):
        return self.name or f"{self.route} batch #{self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class SynthesisItem(models.Model):
    """One task being made: its seed, the stage it reached, what each stage produced, and how it ended."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # waiting for its next stage
        RUNNING = "running", "Running"
        KEPT = "kept", "Kept"  # in the catalog (task)
        REJECTED = "rejected", "Rejected"  # a stage judged it not good enough (rejected_stage, reason)
        FAILED = "failed", "Failed"  # a stage could not run on it after its retries (failed_stage, reason)

    FINISHED = (Status.KEPT, Status.REJECTED, Status.FAILED)

    batch = models.ForeignKey(SynthesisBatch, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    # The draw: persona route {persona, subcategory, operations}; skill route {main, supporting}. Ids and names.
    seed = NulSafeJSONField(default=dict)
    stage = NulSafeCharField(
        max_length=16,
        choices=Stage.choices,
        default=Stage.GENERATE,
        help_text="The next stage to run (the last one reached when finished).",
    )
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    # The task as it stands: instruction, scenario, expected_behavior, operations, file spec, files, checker,
    # solution, rubric, difficulty, … (each stage adds its part).
    draft = NulSafeJSONField(default=dict, blank=True)
    # stage -> {"verdict": "pass"|"fail"|"error"|"skipped", "reason", "rounds", …}: what each stage decided.
    stage_results = NulSafeJSONField(default=dict, blank=True)
    attempts = NulSafeJSONField(default=dict, blank=True, help_text="stage -> attempts started.")
    reason = NulSafeTextField(blank=True, help_text="Why it was rejected or failed.")
    task = models.ForeignKey("tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    worker = NulSafeCharField(max_length=200, blank=True)
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["batch", "index"]
        constraints = [models.UniqueConstraint(fields=["batch", "index"], name="unique_item_index")]
        indexes = [models.Index(fields=["batch", "status", "stage"], name="item_funnel")]

    def __str__(self):
        return f"item {self.index} of batch {self.batch_id} ({self.status} at {self.stage})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def subject(self) -> str:
        """The ModelCall subject of every call made for this item."""
        return f"synthesis-item:{self.pk}"


# --- quality assessment -----------------------------------------------------------------------------------------


class QAStage(models.TextChoices):
    NOVELTY = "novelty", "Novelty"
    PLAUSIBILITY = "plausibility", "Plausibility"
    DIFFICULTY = "difficulty", "Difficulty"
    LEAK = "leak", "Answer leak"
    ALIGNMENT = "alignment", "Checker–task alignment"
    RUBRIC = "rubric", "Rubric complementarity"


class QualityAssessment(models.Model):
    """One QA stage's verdict on one task revision (synthesized or not). Append-only: the latest counts."""

    class Verdict(models.TextChoices):
        PASS = "pass", "Pass"
        FAIL = "fail", "Fail"
        ERROR = "error", "Error"  # the stage could not judge (model failed, no endpoint): not the task's fault

    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.CASCADE, related_name="quality_assessments")
    stage = NulSafeCharField(max_length=16, choices=QAStage.choices)
    verdict = NulSafeCharField(max_length=8, choices=Verdict.choices)
    reason = NulSafeTextField(blank=True)
    # Stage-specific: novelty {"nearest", "similarity"}, difficulty {"level"}, alignment {"coverage", …}.
    details = NulSafeJSONField(default=dict, blank=True)
    endpoint_name = NulSafeCharField(max_length=80, blank=True)
    prompt_version = NulSafeCharField(max_length=40, blank=True)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    item = models.ForeignKey(SynthesisItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["revision", "stage", "-created_at", "-id"]
        indexes = [models.Index(fields=["revision", "stage", "-created_at"], name="qa_latest")]

    def __str__(self):
        return f"{self.stage} of {self.revision_id}: {self.verdict}"


class InstructionEmbedding(models.Model):
    """A cached sentence embedding of an instruction (novelty), keyed by the text's sha256 and the model."""

    text_hash = NulSafeCharField(max_length=64)
    model = NulSafeCharField(max_length=100)
    dimensions = models.PositiveSmallIntegerField()
    vector = models.BinaryField(help_text="float32, L2-normalised, little-endian.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["text_hash", "model"], name="unique_embedding")]

    def __str__(self):
        return f"{self.model}:{self.text_hash[:12]}"
