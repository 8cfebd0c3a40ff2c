"""Training: immutable datasets of trajectories, base models, training runs with their metrics and checkpoints, and
the servers that serve a checkpoint as a model endpoint.

torch, transformers and TRL are never imported here (nor anywhere the web process loads): training code imports them
inside the subprocess a GPU worker launches (training/trainers/…).
"""

from django.conf import settings
from django.db import models

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField


class TrainingDataset(models.Model):
    """A frozen selection of trajectories for SFT: which ones it holds, why the others were left out, its split.

    Immutable once built (a new selection is a new dataset); `sha256` is over its samples in order, so the same
    content always has the same hash."""

    class Status(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        EMPTY = "empty", "Empty"  # built, and every trajectory was left out (datasets.empty_reason says why)
        FAILED = "failed", "Failed"

    name = NulSafeCharField(max_length=200)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.BUILDING, db_index=True)
    error = NulSafeTextField(blank=True)
    # What was asked: {"eval_runs": [...], "groups": [...], "endpoints": [...], "harnesses": [...], "sources": [...],
    # "since", "until"} and the filters {"min_reward", "max_tokens", "complete_only", "dedup", "seed",
    # "validation_share"}.
    selection = NulSafeJSONField(default=dict)
    filters = NulSafeJSONField(default=dict)
    # The contamination guard: tasks of any benchmark version are never included unless an admin overrode it (why).
    allow_benchmark_tasks = models.BooleanField(default=False)
    override_reason = NulSafeTextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The history guard: a trajectory with an assistant turn no recorded call answered (history the agent wrote) is
    # never included unless an admin overrode it (why, and who).
    allow_unverified_history = models.BooleanField(default=False)
    unverified_history_reason = NulSafeTextField(blank=True)
    unverified_history_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The tokenizer its samples' tokens were counted with (a base model's folder): the tokenized sample, as training
    # sees it. Blank: the tokens are the usage estimate (the last model call's prompt and answer as reported).
    base_model = models.ForeignKey("BaseModel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tokenizer_path = NulSafeCharField(max_length=1000, blank=True)
    tokenizer_sha256 = NulSafeCharField(max_length=64, blank=True, help_text="Over the tokenizer's files.")
    sha256 = NulSafeCharField(max_length=64, blank=True, db_index=True)
    trajectories_count = models.PositiveIntegerField(default=0)
    excluded = NulSafeJSONField(default=dict, blank=True, help_text="reason -> trajectories left out.")
    stats = NulSafeJSONField(default=dict, blank=True, help_text="turns, tokens, tool calls, … (the statistics page).")
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return self.name or f"dataset #{self.pk}"

    @property
    def tokenized(self) -> bool:
        """Its tokens were counted with a tokenizer (not the usage estimate)."""
        return bool(self.tokenizer_sha256)


class DatasetSample(models.Model):
    """One trajectory in a dataset, in order, with its split."""

    class Split(models.TextChoices):
        TRAIN = "train", "Train"
        VALIDATION = "validation", "Validation"

    dataset = models.ForeignKey(TrainingDataset, on_delete=models.CASCADE, related_name="samples")
    position = models.PositiveIntegerField()
    # PROTECT: a trajectory a dataset holds cannot be deleted out from under it (the dataset is immutable).
    trajectory = models.ForeignKey("evaluation.Trajectory", on_delete=models.PROTECT, related_name="+")
    split = NulSafeCharField(max_length=12, choices=Split.choices, default=Split.TRAIN)
    task_external_id = NulSafeCharField(max_length=200)
    reward = models.FloatField(null=True, blank=True)
    # Counted with the dataset's tokenizer when it has one (else the usage estimate, and no spans).
    tokens = models.PositiveIntegerField(default=0)
    assistant_spans = NulSafeJSONField(
        default=list, blank=True, help_text="[start, end) of each run of assistant (trained) tokens."
    )

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "position"], name="unique_sample_position"),
            models.UniqueConstraint(fields=["dataset", "trajectory"], name="unique_sample_trajectory"),
        ]

    def __str__(self):
        return f"{self.dataset_id}#{self.position}"


class BaseModel(models.Model):
    """A model to train from: a local folder (weights, config, tokenizer). Nothing is downloaded at run time."""

    name = models.SlugField(max_length=120, unique=True)
    path = NulSafeCharField(max_length=1000, help_text="A folder on the GPU workers (and here, for CPU runs).")
    architecture = NulSafeCharField(max_length=100, blank=True, help_text="e.g. Qwen3ForCausalLM (from config.json).")
    chat_template = NulSafeCharField(
        max_length=200,
        blank=True,
        help_text="The training chat template to use (with generation markers); blank: its own.",
    )
    context_length = models.PositiveIntegerField(null=True, blank=True)
    notes = NulSafeTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


# Where a trainer also reports its metrics (TRL's report_to), besides ClawGym's own curves.
REPORT_TO_CHOICES = [("none", "ClawGym's curves only"), ("tensorboard", "TensorBoard too")]
REPORT_TO = tuple(value for value, _ in REPORT_TO_CHOICES)


class TrainingRun(models.Model):
    """One SFT or RL run: its whole config, where it runs, its metrics and checkpoints."""

    class Kind(models.TextChoices):
        SFT = "sft", "Supervised fine-tuning"
        RL = "rl", "Reinforcement learning (GRPO)"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"  # the trainer failed, or its worker was lost: resumable from the last checkpoint
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    name = NulSafeCharField(max_length=200)
    kind = NulSafeCharField(max_length=8, choices=Kind.choices, default=Kind.SFT)
    dataset = models.ForeignKey(TrainingDataset, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    base_model = models.ForeignKey(BaseModel, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    base_model_path = NulSafeCharField(
        max_length=1000, help_text="The folder trained from (the base model's, or given)."
    )
    # Everything the trainer is given (hyper-parameters, LoRA, YaRN, DeepSpeed/FSDP, GPUs, seed, …), stored whole.
    config = NulSafeJSONField(default=dict)
    preset = NulSafeCharField(max_length=40, blank=True)
    cpu = models.BooleanField(default=False, help_text="Train on CPU (tiny models and tests).")
    # Besides ClawGym's own curves: TensorBoard event files the trainer writes under the run's folder (tensorboard/).
    report_to = NulSafeCharField(
        max_length=16,
        choices=REPORT_TO_CHOICES,
        default="none",
        help_text="Where the trainer also reports its metrics (TensorBoard event files under the run's folder).",
    )
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = NulSafeTextField(blank=True)
    output_dir = NulSafeCharField(max_length=1000, blank=True)
    resumed_from = models.ForeignKey(
        "Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The checkpoint the current attempt resumed from.",
    )
    attempt = models.PositiveIntegerField(default=0)
    steps = models.PositiveIntegerField(default=0, help_text="Optimizer steps done (the last metric's step).")
    total_steps = models.PositiveIntegerField(null=True, blank=True)
    log_tail = NulSafeTextField(blank=True)
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones")
    # The base model's own evaluation on the benchmark version its checkpoints are evaluated on (the baseline).
    base_eval_run = models.ForeignKey(
        "evaluation.EvalRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return self.name or f"{self.kind} run #{self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class TrainingMetric(models.Model):
    """One logged step of a run: loss, learning rate, grad norm, tokens/s, GPU memory, … (what the trainer logs)."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    epoch = models.FloatField(null=True, blank=True)
    values = NulSafeJSONField(default=dict, help_text="name -> number, as the trainer logged it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "step", "id"]
        indexes = [models.Index(fields=["run", "step"], name="metric_run_step")]

    def __str__(self):
        return f"{self.run_id} step {self.step}"


class Checkpoint(models.Model):
    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.PositiveIntegerField()
    path = NulSafeCharField(max_length=1000)
    sha256 = NulSafeCharField(max_length=64, blank=True, help_text="Over the checkpoint's files (names and contents).")
    size_bytes = models.BigIntegerField(default=0)
    metrics = NulSafeJSONField(default=dict, blank=True, help_text="The metrics logged at or before its step.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="unique_checkpoint_step")]

    def __str__(self):
        return f"{self.run} step {self.step}"


class ModelServer(models.Model):
    """A checkpoint or a base model served as an OpenAI-compatible endpoint (vLLM on a GPU worker, `transformers
    serve` without one), registered as a ModelEndpoint with the agent role."""

    class Status(models.TextChoices):
        STARTING = "starting", "Starting"
        READY = "ready", "Ready"
        STOPPED = "stopped", "Stopped"
        FAILED = "failed", "Failed"

    # A checkpoint's server, or a base model's (checkpoint empty, model_path the base model's folder): both are
    # health-checked, registered as endpoints and stopped when idle the same way. A registered base model's
    # (endpoint base-NAME) names it; a run's own base (base-RUN, evaluate_checkpoints) names neither.
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="servers")
    # SET_NULL: a server outlives its base model's registration until it is stopped (by name, or when idle).
    base_model = models.ForeignKey(BaseModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="servers")
    model_path = NulSafeCharField(max_length=1000, blank=True, help_text="The folder served (merged, for LoRA).")
    backend = NulSafeCharField(max_length=20, help_text='"vllm", "transformers" or "batched".')
    endpoint = models.ForeignKey(
        "llm.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    host = NulSafeCharField(max_length=200, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    command = NulSafeJSONField(default=list, blank=True, help_text="The start command, as run.")
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.STARTING)
    error = NulSafeTextField(blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.backend} server of {self.checkpoint or self.model_path}"


class CheckpointEvaluation(models.Model):
    """A checkpoint's evaluation run on a benchmark version ("evaluate every checkpoint on V")."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="evaluations")
    eval_run = models.ForeignKey("evaluation.EvalRun", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["checkpoint", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["checkpoint", "eval_run"], name="unique_checkpoint_eval")]


class RLRollout(models.Model):
    """One rollout an RL run's rollout_func started: which step and group (prompt) it belongs to, the reward it got
    (None: infra failure or no sample, left out of the group's baseline), its samples and whether its group was
    dropped for having too few survivors."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="rl_rollouts")
    step = models.PositiveIntegerField()
    group_index = models.PositiveIntegerField(help_text="Which prompt of the step (0-based).")
    rollout = models.ForeignKey("evaluation.Rollout", on_delete=models.CASCADE, related_name="+")
    reward = models.FloatField(null=True, blank=True)
    samples = models.PositiveIntegerField(default=0)
    inexact_samples = models.PositiveIntegerField(default=0)
    dropped = models.BooleanField(default=False)
    wall_seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "step", "group_index", "id"]
        indexes = [models.Index(fields=["run", "step"], name="rlrollout_run_step")]

    def __str__(self):
        return f"{self.run_id} step {self.step} group {self.group_index}: rollout {self.rollout_id}"
