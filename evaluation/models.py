"""Rollouts (one agent run on one task revision, scored), their final workspaces, trajectories, and sandbox slots."""

from django.conf import settings
from django.db import models

from lib.money import cost_text
from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField

from .harnesses import HARNESS_CHOICES, ExitReason


class Outcome(models.TextChoices):
    """What one finished rollout of an evaluation run counts as (Rollout.outcome; blank until it finishes)."""

    SCORED = "scored", "Scored"  # the agent finished on its own and its workspace was scored
    AGENT_LIMIT = "agent_limit", "Agent limit"  # time, turns or tokens ran out: scored as the checker finds it
    AGENT_ERROR = "agent_error", "Agent error"  # the agent crashed or erred by itself: scored as found
    JUDGE_INCOMPLETE = "judge_incomplete", "Judging incomplete"  # a rubric rule has no judgement: no task score yet
    INFRA = "infra", "Infrastructure failure"  # sandbox, harness start, worker, proxy or upstream: never a 0

    @classmethod
    def counts_zero(cls) -> dict:
        return {value: 0 for value in cls.values}


# The outcomes that carry a task score (the model's: what the checker and the judge gave).
SCORED_OUTCOMES = (Outcome.SCORED, Outcome.AGENT_LIMIT, Outcome.AGENT_ERROR)


class Rollout(models.Model):
    """One run of an agent harness with one model on one task revision, and its score.

    A retry is a new attempt on the same row (attempt + 1): the row's results are replaced, never added to, so a
    rollout counts once however often it was retried. Each attempt has its own proxy session; earlier attempts'
    model calls stay in the call log under the same subject ("rollout:<id>").
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SCORED = "scored", "Scored"  # the agent ran to an end (any exit reason) and its workspace was scored
        # The checker scored it, but a rubric rule has no judgement (no judge endpoint, or the judge failed): no
        # task score until it is judged again (rejudge_rollout); the agent's run stands.
        INCOMPLETE = "incomplete", "Judging incomplete"
        # No score: the sandbox, the harness, the worker, the proxy or the model's server failed; retryable.
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.SCORED, Status.INCOMPLETE, Status.FAILED, Status.CANCELLED)
    RETRYABLE = (Status.FAILED, Status.CANCELLED)

    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.PROTECT, related_name="rollouts")
    endpoint = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="rollouts")
    harness = NulSafeCharField(max_length=40, choices=HARNESS_CHOICES)
    harness_options = NulSafeJSONField(default=dict, blank=True)
    repeat_index = models.PositiveIntegerField(default=0, help_text="Which of the repeats started together (0-based).")
    seed = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The seed its model calls were sampled with: its own, derived from the run's seed (its endpoint's "
        "sampling), its task and its repeat (llm.sampling.derived_seed); none when the run names no seed.",
    )
    group = NulSafeCharField(max_length=32, blank=True, db_index=True, help_text="Rollouts started together.")
    eval_run = models.ForeignKey(
        "EvalRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rollouts",
        help_text="The evaluation run it belongs to, if any.",
    )
    # Which outcome class a finished rollout falls in (Outcome; blank while unfinished or cancelled).
    outcome = NulSafeCharField(max_length=20, choices=Outcome.choices, blank=True, db_index=True)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    exit_reason = NulSafeCharField(max_length=32, choices=ExitReason.CHOICES, blank=True)
    error = NulSafeTextField(blank=True, help_text="Why the agent stopped or the rollout failed, when not cleanly.")
    attempt = models.PositiveIntegerField(default=0, help_text="Attempts started; a retry is the next attempt.")
    previous_attempts = NulSafeJSONField(
        default=list, blank=True, help_text="How each earlier attempt ended: attempt, status, exit_reason, error."
    )
    worker = NulSafeCharField(max_length=200, blank=True, help_text="The process running the current attempt.")
    runtime = NulSafeCharField(
        max_length=100, blank=True, help_text="The sandbox runtime the agent ran in (its version, or docker's image)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="rollouts"
    )
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    proxy_session = models.ForeignKey(
        "llm.ProxySession", null=True, blank=True, on_delete=models.SET_NULL, related_name="rollouts"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    agent_seconds = models.FloatField(null=True, blank=True)
    checker_seconds = models.FloatField(null=True, blank=True)
    # What the agent did, from the proxy's record of its model calls (evaluation.proxy_record) ...
    final_message = NulSafeTextField(blank=True)
    turns = models.PositiveIntegerField(null=True, blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    tools_used = NulSafeJSONField(default=dict, blank=True, help_text="Tool name -> calls.")
    transcript = NulSafeJSONField(default=list, blank=True)
    # ... what the agent said about itself (its output files: anything in the sandbox may have written them), kept
    # apart and shown as its own account, never used for a score ...
    agent_account = NulSafeJSONField(
        default=dict,
        blank=True,
        help_text="What the agent reported about itself: exit_reason, detail, final_message, turns, tool_calls, "
        "tools_used, transcript (harnesses.base.AgentAccount).",
    )
    harness_usage = NulSafeJSONField(default=dict, blank=True, help_text="Token usage as the harness reported it.")
    log_tail = NulSafeTextField(blank=True)
    # ... what the sandbox saw ...
    max_rss_bytes = models.BigIntegerField(null=True, blank=True)
    # ... what the proxy recorded (authoritative) ...
    model_calls = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0, help_text="What its model calls cost.")
    # ... and how the final workspace scored.
    score = models.FloatField(null=True, blank=True, help_text="The task score: code, or λ·code + (1−λ)·rubric.")
    score_reason = NulSafeCharField(max_length=600, blank=True, help_text="Why there is no score, or what to know.")
    code_score = models.FloatField(null=True, blank=True)
    rubric_score = models.FloatField(null=True, blank=True)
    sub_scores = NulSafeJSONField(default=dict, blank=True)
    check_status = NulSafeCharField(max_length=32, blank=True)
    check_reason = NulSafeCharField(max_length=400, blank=True)
    rubric_judgements = NulSafeJSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["revision", "endpoint", "harness"], name="rollout_revision_model"),
            models.Index(fields=["-created_at", "-id"], name="rollout_recent"),
            models.Index(fields=["eval_run", "revision", "repeat_index"], name="rollout_eval_run"),
            models.Index(fields=["eval_run", "status"], name="rollout_eval_run_status"),
        ]

    def __str__(self):
        return f"rollout #{self.pk} of {self.revision_id} ({self.status})"

    @property
    def task_external_id(self) -> str:
        return self.revision.task.external_id

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def retryable(self) -> bool:
        return self.status in self.RETRYABLE

    @property
    def rejudgeable(self) -> bool:
        """Its rubric can be judged (again) from the stored final workspace."""
        return self.status in (self.Status.SCORED, self.Status.INCOMPLETE) and self.revision.has_rubric

    @property
    def subject(self) -> str:
        """The proxy sessions' subject: every attempt's model calls carry it."""
        return f"rollout:{self.pk}"

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or self.started_at) - self.started_at

    def workspace_changes(self) -> list[dict]:
        """Changed paths other than folders (a folder shows through the files in it)."""
        return [f.as_change() for f in self.files.all() if f.kind != RolloutFile.Kind.DIR]

    def as_dict(self) -> dict:
        """The `rollout --json` shape (plus a few fields scripts find useful)."""
        return {
            "id": self.pk,
            "task": self.revision.task.external_id,
            "revision": self.revision.number,
            "endpoint": self.endpoint.name,
            "harness": self.harness,
            "runtime": self.runtime,
            "repeat": self.repeat_index,
            "seed": self.seed,
            "attempt": self.attempt,
            "status": self.status,
            "exit_reason": self.exit_reason,
            "error": self.error,
            "score": self.score,
            "score_reason": self.score_reason,
            "code_score": self.code_score,
            "rubric_score": self.rubric_score,
            "sub_scores": self.sub_scores,
            "check_status": self.check_status,
            "rubric_judgements": self.rubric_judgements,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": cost_text(self.cost),
            "eval_run": self.eval_run_id,
            "outcome": self.outcome,
            "agent_seconds": self.agent_seconds,
            "final_message": self.final_message,
            "workspace_changes": self.workspace_changes(),
        }


class RolloutFile(models.Model):
    """One path of the final workspace that differs from the initial one (the diff, not the whole workspace)."""

    class Change(models.TextChoices):
        ADDED = "added", "Added"
        MODIFIED = "modified", "Modified"
        DELETED = "deleted", "Deleted"

    class Kind(models.TextChoices):
        FILE = "file", "File"
        DIR = "dir", "Folder"
        SYMLINK = "symlink", "Symbolic link"
        TOO_LARGE = "too_large", "File too large to keep"
        SPECIAL = "special", "Special file"

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="files")
    path = NulSafeCharField(max_length=1000)
    change = NulSafeCharField(max_length=16, choices=Change.choices)
    kind = NulSafeCharField(max_length=16, choices=Kind.choices, help_text="The final entry (deleted: the initial).")
    blob = models.ForeignKey("tasks.Blob", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    size = models.BigIntegerField(default=0)
    sha256 = NulSafeCharField(max_length=64, blank=True)
    executable = models.BooleanField(default=False)
    target = NulSafeCharField(max_length=1000, blank=True, help_text="Where a symbolic link points.")
    detail = NulSafeCharField(max_length=100, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["rollout", "path"], name="rolloutfile_unique_path")]

    def __str__(self):
        return f"{self.change} {self.path}"

    def as_change(self) -> dict:
        return {"path": self.path, "change": self.change, "size": self.size, "kind": self.kind}


class Trajectory(models.Model):
    """One multi-turn conversation rebuilt from a rollout's recorded model calls (evaluation.trajectories)."""

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="trajectories")
    index = models.PositiveIntegerField(default=0)
    messages = NulSafeJSONField(help_text="OpenAI chat messages, tool calls included.")
    tools = NulSafeJSONField(default=list, blank=True, help_text="The tools offered (chat format).")
    reward = models.FloatField(null=True, blank=True, help_text="The rollout's score.")
    stats = NulSafeJSONField(default=dict, blank=True, help_text="turns, tokens, tool_calls, tool_types.")
    model_call_ids = NulSafeJSONField(default=list, blank=True, help_text="The ModelCall ids it was built from.")
    excluded = models.BooleanField(default=False)
    exclusion_reason = NulSafeCharField(max_length=300, blank=True)
    # Assistant turns (indices in `messages`) that no call of the session answered: history the agent sent of its own
    # (evaluation.trajectories). Such a trajectory is left out of training datasets unless an admin says why not.
    unverified_turns = NulSafeJSONField(
        default=list, blank=True, help_text="Indices of assistant turns that are no recorded answer (forged history)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rollout", "index"]
        verbose_name_plural = "trajectories"  # not Django's "Trajectorys"
        constraints = [models.UniqueConstraint(fields=["rollout", "index"], name="trajectory_unique_index")]

    def __str__(self):
        return f"trajectory {self.index} of rollout #{self.rollout_id}"

    @property
    def verified(self) -> bool:
        """Every assistant turn is an answer the proxy recorded."""
        return not self.unverified_turns


class SandboxSlot(models.Model):
    """One of a machine's rollout slots: a rollout's agent runs only while it holds one (claimed by a conditional UPDATE).

    A slot frees itself when its holder's process is gone (same host) or its lease expires.
    """

    host = NulSafeCharField(max_length=200)
    slot = models.PositiveSmallIntegerField()
    holder = NulSafeCharField(max_length=200, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "slot"], name="sandboxslot_unique")]

    def __str__(self):
        return f"{self.host} slot {self.slot}: {self.holder or 'free'}"


# --- evaluation runs ------------------------------------------------------------------------------------------


class EvalRun(models.Model):
    """One model (endpoint) with one harness over a frozen benchmark version (or an explicit list of task
    revisions), each revision `repeats` times. Its rollouts are ordinary Rollout rows (eval_run set); the figures are
    kept in EvalRunTask rows, one per revision, updated as each rollout finishes (evaluation.services.runs)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        COMPLETE = "complete", "Complete"  # every rollout has an outcome that carries a score
        INCOMPLETE = "incomplete", "Incomplete"  # finished, but some repeats have no score (infra, judge)
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.COMPLETE, Status.INCOMPLETE, Status.CANCELLED)

    name = NulSafeCharField(max_length=200)
    benchmark_version = models.ForeignKey(
        "benchmarks.BenchmarkVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="eval_runs"
    )
    endpoint = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="eval_runs")
    harness = NulSafeCharField(max_length=40, choices=HARNESS_CHOICES)
    harness_options = NulSafeJSONField(default=dict, blank=True, help_text="Harness options other than the limits.")
    repeats = models.PositiveIntegerField(default=1)
    limits = NulSafeJSONField(
        default=dict, blank=True, help_text="Per rollout: timeout (s), max_turns, token_limit (input + output tokens)."
    )
    pass_threshold = models.FloatField(default=1.0, help_text="A repeat passes (pass@k, pass^k) at this score.")
    max_attempts = models.PositiveSmallIntegerField(
        default=3, help_text="Attempts per rollout when the infrastructure fails (retried with backoff)."
    )
    # What it was started with, normalised; a resume with other settings is refused (services.runs.run_config).
    config = NulSafeJSONField(default=dict)
    config_hash = NulSafeCharField(max_length=64, db_index=True)
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # Run by a command's own process (`evaluate --here`), not by the workers: retries are not queued as jobs.
    inline = models.BooleanField(default=False)
    # Each resume: {"at", "by"}. Every start (the first and each resume) grants max_attempts more attempts.
    resumes = NulSafeJSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A job to queue once the run has finished (e.g. the difficulty filter's verdicts), with its params.
    on_finish = NulSafeCharField(max_length=100, blank=True)
    on_finish_params = NulSafeJSONField(default=dict, blank=True)
    # Kept up to date as rollouts finish (one small update each), recomputed exactly by run_progress.recompute_run.
    rollouts_total = models.PositiveIntegerField(default=0)
    rollouts_finished = models.PositiveIntegerField(default=0)
    outcome_counts = NulSafeJSONField(default=dict, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    agent_seconds = models.FloatField(default=0.0)
    # The figures (evaluation.figures.run_figures), stored when the run finishes or is recomputed.
    summary = NulSafeJSONField(default=dict, blank=True)
    overall_mean = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["benchmark_version", "endpoint", "status", "-created_at"], name="evalrun_board"),
            models.Index(fields=["-created_at", "-id"], name="evalrun_recent"),
        ]

    def __str__(self):
        return f"{self.name} (#{self.pk})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def is_resumable(self) -> bool:
        """Finished with something left to run: repeats without a score (incomplete) or cancelled. A running run
        needs no resume: its infrastructure failures are retried as they happen and the jobs of lost workers are
        queued again by the periodic jobs.recover_lost."""
        return self.status in (self.Status.INCOMPLETE, self.Status.CANCELLED)

    @property
    def progress_percent(self) -> int:
        return int(100 * self.rollouts_finished / self.rollouts_total) if self.rollouts_total else 0


class EvalRunTask(models.Model):
    """A run's figures for one task revision, over its repeats: updated as each of its rollouts finishes."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="task_results")
    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.PROTECT, related_name="+")
    task = models.ForeignKey("tasks.Task", on_delete=models.PROTECT, related_name="+")
    hybrid = models.BooleanField(default=False, help_text="Graded by code and rubric (else by code only).")
    # One entry per repeat, by repeat index: the score, or null while it has none (running, infra, judge).
    scores = NulSafeJSONField(default=list, blank=True)
    n = models.PositiveIntegerField(default=0, help_text="Repeats that have a score.")
    mean = models.FloatField(null=True, blank=True)
    std = models.FloatField(null=True, blank=True)
    min = models.FloatField(null=True, blank=True)
    max = models.FloatField(null=True, blank=True)
    passes = models.PositiveIntegerField(default=0, help_text="Repeats scoring at least the run's pass threshold.")
    outcome_counts = NulSafeJSONField(default=dict, blank=True)
    finished = models.PositiveIntegerField(default=0, help_text="Repeats that finished (any outcome).")
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    agent_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["run", "task__external_id"]
        constraints = [models.UniqueConstraint(fields=["run", "revision"], name="evalruntask_unique")]

    def __str__(self):
        return f"{self.run_id}: {self.revision_id} ({self.mean})"

    @property
    def has_score(self) -> bool:
        return self.n > 0


class RolloutScore(models.Model):
    """One scoring of a rollout's final workspace: the first when it ran, then one per regrade (the old kept).
    The rollout's own score fields always hold the latest."""

    class Kind(models.TextChoices):
        RUN = "run", "When it ran"
        REGRADE = "regrade", "Regrade"
        REJUDGE = "rejudge", "Rubric judged again"

    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="scorings")
    revision = models.ForeignKey(
        "tasks.TaskRevision",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Whose checker and rubric scored it.",
    )
    kind = NulSafeCharField(max_length=16, choices=Kind.choices, default=Kind.RUN)
    status = NulSafeCharField(max_length=16, help_text="scored | incomplete | failed (the checker could not run)")
    score = models.FloatField(null=True, blank=True)
    code_score = models.FloatField(null=True, blank=True)
    rubric_score = models.FloatField(null=True, blank=True)
    sub_scores = NulSafeJSONField(default=dict, blank=True)
    check_status = NulSafeCharField(max_length=32, blank=True)
    reason = NulSafeCharField(max_length=600, blank=True)
    rubric_judgements = NulSafeJSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rollout", "created_at", "id"]

    def __str__(self):
        return f"{self.kind} of rollout #{self.rollout_id}: {self.score}"


# --- transcript scanners ----------------------------------------------------------------------------------------


class RunScan(models.Model):
    """One pass of transcript scanners (evaluation.scanners) over a run's finished rollouts. A scan replaces the
    run's findings of the scanners it ran; earlier scans stay listed, so the page can say what was scanned when."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="scans")
    scanners = NulSafeJSONField(default=list, help_text="The scanners it ran, by name.")
    judge = NulSafeCharField(max_length=200, blank=True, help_text="The endpoint an LLM-judged scanner asked.")
    rollouts = models.PositiveIntegerField(default=0, help_text="Rollouts scanned.")
    findings = models.PositiveIntegerField(default=0)
    # A scanner that could not scan a rollout (the judge's endpoint failed): {"rollout", "scanner", "error"}.
    errors = NulSafeJSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"scan of run #{self.run_id}: {', '.join(self.scanners)}"


class ScanFinding(models.Model):
    """What one scanner found in one rollout: where (the transcript step, the model call that answered it, the tool
    it called) and the evidence (a bounded excerpt of what the proxy and the sandbox recorded)."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="findings")
    scan = models.ForeignKey(RunScan, on_delete=models.CASCADE, related_name="found")
    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="findings")
    scanner = NulSafeCharField(max_length=40, db_index=True)
    summary = NulSafeCharField(max_length=300)
    evidence = NulSafeTextField(blank=True)
    step = models.PositiveIntegerField(null=True, blank=True, help_text="The index of the message in the transcript.")
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    tool = NulSafeCharField(max_length=100, blank=True, help_text="The tool called at that step, if any.")
    path = NulSafeCharField(max_length=1000, blank=True, help_text="The workspace path it is about, if any.")

    class Meta:
        ordering = ["rollout", "scanner", "step", "id"]
        indexes = [models.Index(fields=["run", "scanner"], name="scanfinding_run_scanner")]

    def __str__(self):
        return f"{self.scanner} in rollout #{self.rollout_id}: {self.summary}"

    def as_dict(self) -> dict:
        return {
            "rollout": self.rollout_id,
            "scanner": self.scanner,
            "summary": self.summary,
            "step": self.step,
            "model_call": self.model_call_id,
            "tool": self.tool,
            "path": self.path,
            "evidence": self.evidence,
        }
