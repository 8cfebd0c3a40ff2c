"""The candidates proposed for benchmarks (benchmarks.models), LLM diagnoses, reviewers' decisions, quality samples
and difficulty filtering (a strong and a small agent's scores on each candidate, and the verdict they give).

Every change goes through review.services. Decisions and diagnoses are append-only; freezing a benchmark version
(review.services.freeze_version) pins the revisions the reviewers accepted.
"""

from typing import NamedTuple

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField


class DifficultyVerdict(models.TextChoices):
    """What difficulty filtering says of a candidate (review.difficulty.verdict_for: the rule and its precedence)."""

    KEEP = "keep", "Keep"
    TOO_HARD = "too_hard", "Too hard"
    TOO_EASY = "too_easy", "Too easy"
    NOT_DISCRIMINATIVE = "not_discriminative", "Not discriminative"
    INCOMPLETE = "incomplete", "Incomplete"


class BenchmarkCandidate(models.Model):
    class Status(models.TextChoices):
        AWAITING_DIAGNOSIS = "awaiting_diagnosis", "Awaiting diagnosis"
        AWAITING_REVIEW = "awaiting_review", "Awaiting review"
        IN_REVIEW = "in_review", "In review"
        ACCEPTED = "accepted", "Accepted"
        REJECTED = "rejected", "Rejected"
        # The independent decisions disagree: a lead decides (review.team.adjudicate). Not open to reviewers.
        AWAITING_ADJUDICATION = "awaiting_adjudication", "Awaiting adjudication"

    OPEN = (Status.AWAITING_DIAGNOSIS, Status.AWAITING_REVIEW, Status.IN_REVIEW)

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="benchmark_candidates")
    benchmark = models.ForeignKey("benchmarks.Benchmark", on_delete=models.CASCADE, related_name="candidates")
    status = NulSafeCharField(max_length=24, choices=Status.choices, default=Status.AWAITING_DIAGNOSIS)
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="claimed_candidates"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    # Why the last diagnosis attempt failed (blank after a stored diagnosis).
    diagnosis_error = NulSafeTextField(blank=True)
    # Difficulty statistics: mean scores of the strong and the small agent (filled by difficulty filtering).
    strong_mean = models.FloatField(null=True, blank=True)
    small_mean = models.FloatField(null=True, blank=True)
    # The verdict of the latest difficulty filter that covered the candidate (DifficultyVerdict, blank: never
    # filtered), kept here like worst_rank so that the queue filters on an indexed column; strong_mean and
    # small_mean are that result's means. review.difficulty keeps all three in step with the DifficultyResult rows.
    difficulty_verdict = NulSafeCharField(
        max_length=24, blank=True, db_index=True, editable=False, choices=DifficultyVerdict.choices
    )
    # SEVERITY_RANK of the worst issue of the latest diagnosis; null: no issues, or not diagnosed. Kept here, not
    # computed per request, so the queue filters and sorts on an indexed column (bench/review_bench.py).
    worst_rank = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["task", "benchmark"], name="unique_candidate_task")]
        indexes = [
            models.Index(fields=["benchmark", "status", "-updated_at"], name="candidate_queue"),
            models.Index(fields=["worst_rank", "-updated_at"], name="candidate_worst"),
        ]

    def __str__(self):
        return f"{self.task.external_id} → {self.benchmark.name} ({self.status})"

    @classmethod
    def refresh_worst_rank(cls, queryset) -> int:
        """Recompute `worst_rank` of the candidates in `queryset` from their latest diagnoses (for bulk loads;
        review.diagnosis.store_diagnosis sets it for each diagnosis it stores)."""
        latest = LLMDiagnosis.objects.filter(candidate=models.OuterRef(models.OuterRef("pk"))).order_by(
            "-created_at", "-id"
        )
        worst = DiagnosisIssue.objects.filter(diagnosis=models.Subquery(latest.values("pk")[:1])).order_by(
            "severity_rank"
        )
        return queryset.update(worst_rank=models.Subquery(worst.values("severity_rank")[:1]))

    def held_by(self, now=None):
        """The user whose claim is still running, or None."""
        if self.claimed_by_id and self.claim_expires_at and self.claim_expires_at > (now or timezone.now()):
            return self.claimed_by
        return None

    def latest_diagnosis(self):
        return self.diagnoses.order_by("-created_at", "-id").first()

    @classmethod
    def refresh_difficulty(cls, queryset) -> int:
        """Copy the latest finished difficulty result of each candidate in `queryset` (the result of the filter
        started last) into difficulty_verdict, strong_mean and small_mean; a candidate with none gets blanks."""
        latest = DifficultyResult.objects.filter(
            candidate=models.OuterRef("pk"), filter__status=DifficultyFilter.Status.FINISHED
        ).order_by("-filter__created_at", "-filter_id")
        return queryset.update(
            difficulty_verdict=Coalesce(
                models.Subquery(latest.values("verdict")[:1]), models.Value(""), output_field=models.CharField()
            ),
            strong_mean=models.Subquery(latest.values("strong_mean")[:1]),
            small_mean=models.Subquery(latest.values("small_mean")[:1]),
        )

    def latest_difficulty(self):
        """The latest finished DifficultyResult (the one difficulty_verdict shows), or None."""
        return (
            self.difficulty_results.filter(filter__status=DifficultyFilter.Status.FINISHED)
            .select_related("filter__strong_endpoint", "filter__small_endpoint", "filter__created_by", "revision")
            .order_by("-filter__created_at", "-filter_id")
            .first()
        )


class LLMDiagnosis(models.Model):
    """One diagnosis of one revision of a candidate's task. Append-only: the latest is the one reviewed."""

    candidate = models.ForeignKey(BenchmarkCandidate, on_delete=models.CASCADE, related_name="diagnoses")
    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey("llm.ModelEndpoint", null=True, on_delete=models.SET_NULL, related_name="+")
    endpoint_name = NulSafeCharField(max_length=80, help_text="Kept when the endpoint is deleted.")
    prompt_version = NulSafeCharField(max_length=40)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    overall = NulSafeTextField(help_text="The model's overall assessment.")
    job_run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "LLM diagnoses"

    def __str__(self):
        return f"diagnosis of {self.candidate_id} ({self.revision_id})"


class Severity(models.TextChoices):
    BLOCKER = "blocker", "Blocker"
    MAJOR = "major", "Major"
    MINOR = "minor", "Minor"


# Lower is worse: the candidate queue sorts and filters by the worst severity of the latest diagnosis.
SEVERITY_RANK = {Severity.BLOCKER: 0, Severity.MAJOR: 1, Severity.MINOR: 2}


class DiagnosisIssue(models.Model):
    class Component(models.TextChoices):
        INSTRUCTION = "instruction", "Instruction"
        INPUT_FILE = "input_file", "Input file"
        CHECKER = "checker", "Checker"
        RUBRIC = "rubric", "Rubric"

    diagnosis = models.ForeignKey(LLMDiagnosis, on_delete=models.CASCADE, related_name="issues")
    component = NulSafeCharField(max_length=16, choices=Component.choices)
    path = NulSafeCharField(max_length=500, blank=True, help_text="The file concerned (input file or checker file).")
    path_missing = models.BooleanField(default=False, help_text="The path names no file of the diagnosed revision.")
    severity = NulSafeCharField(max_length=8, choices=Severity.choices)
    severity_rank = models.PositiveSmallIntegerField()
    problem = NulSafeTextField()
    evidence = NulSafeTextField(blank=True)
    suggested_fix = NulSafeTextField(blank=True)
    # Concrete content replacing the whole field or file (for the rubric: its JSON), or null when none was given.
    replacement = NulSafeTextField(null=True, blank=True)

    class Meta:
        ordering = ["severity_rank", "id"]

    def __str__(self):
        return f"{self.severity} {self.component}{':' + self.path if self.path else ''}"


class ReviewDecision(models.Model):
    """One reviewer action on a candidate. Append-only: a later decision supersedes, never edits."""

    class Decision(models.TextChoices):
        ACCEPT = "accept", "Accept"
        FIX = "fix", "Fix"
        REJECT = "reject", "Reject"
        VERDICT = "verdict", "Issue verdict"

    class Verdict(models.TextChoices):
        VALID = "valid", "Valid"
        NOT_VALID = "not_valid", "Not valid"
        FIXED = "fixed", "Fixed"

    candidate = models.ForeignKey(BenchmarkCandidate, on_delete=models.CASCADE, related_name="decisions")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decision = NulSafeCharField(max_length=8, choices=Decision.choices)
    reason = NulSafeTextField(blank=True)
    # {issue id (string): valid | not_valid | fixed}
    verdicts = NulSafeJSONField(default=dict, blank=True)
    revision = models.ForeignKey(
        "tasks.TaskRevision",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The revision this decision produced (fix) or accepted.",
    )
    override_reason = NulSafeTextField(
        blank=True, help_text="An admin's reason to accept despite a failed sanity check."
    )
    # A lead's decision settling disagreeing reviewers (review.team.adjudicate); the decisions it settles stay.
    adjudication = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.decision} of {self.candidate_id} by {self.reviewer_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("review decisions are append-only: record a new decision instead")
        super().save(*args, **kwargs)


class SavedSolve(models.Model):
    """A reviewer's in-browser solve saved as the task's reference solution (review.solving.save_solution): who
    solved it, the revision it was saved as and the run that scored full marks. Append-only. The proof of
    solvability names it while a revision keeps that solution (review.solvability); the proof itself stays the
    revision's own sanity check, which re-runs the solution in the sandbox."""

    candidate = models.ForeignKey(BenchmarkCandidate, on_delete=models.CASCADE, related_name="saved_solves")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    revision = models.ForeignKey(
        "tasks.TaskRevision", on_delete=models.CASCADE, related_name="+", help_text="The revision it was saved as."
    )
    run = models.ForeignKey(
        "jobs.JobRun", null=True, on_delete=models.SET_NULL, related_name="+", help_text="The run scoring full marks."
    )
    score = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"solve of candidate {self.candidate_id} saved as revision {self.revision_id}"


class ClaimEvent(models.Model):
    """Who claimed or released a candidate when: the history timeline shows it."""

    class Action(models.TextChoices):
        CLAIM = "claim", "Claimed"
        RELEASE = "release", "Released"
        EXPIRE = "expire", "Claim expired"

    candidate = models.ForeignKey(BenchmarkCandidate, on_delete=models.CASCADE, related_name="claim_events")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = NulSafeCharField(max_length=8, choices=Action.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


# --- quality sampling ------------------------------------------------------------------------------------------


class QualityDimension(NamedTuple):
    field: str  # the QualityRating field holding its score
    label: str
    help: str  # one line shown to raters: what a 5 means


# What raters score in a quality sample, each from 1 to 5 (the human study of synthesized tasks in ClawGym).
QUALITY_DIMENSIONS = [
    QualityDimension(
        "reasonableness",
        "Task reasonableness",
        "The instruction is clear, realistic and something a user would really ask.",
    ),
    QualityDimension(
        "feasibility",
        "Execution feasibility",
        "An agent with the workspace tools can complete it: nothing it needs is missing.",
    ),
    QualityDimension(
        "resource_consistency",
        "Resource consistency",
        "The input files match what the instruction says about them and are enough for it.",
    ),
    QualityDimension(
        "verification",
        "Verification quality",
        "The checker and rubric pass every good result and fail bad ones: strict, not over-strict.",
    ),
]
QUALITY_SCALE = {1: "unusable", 2: "major problems", 3: "acceptable", 4: "good", 5: "excellent"}


class QualitySample(models.Model):
    """A random draw of tasks for a human quality study. The pool filter, its size and the seed are kept, so the
    draw can be repeated and checked: the same seed over the same pool draws the same tasks in the same order."""

    name = NulSafeCharField(max_length=200)
    # {"benchmark", "candidate_status", "task_status", "category", "source"}: only the filters that were set.
    pool = NulSafeJSONField(default=dict, blank=True)
    pool_description = NulSafeCharField(max_length=500)
    pool_size = models.PositiveIntegerField(help_text="Tasks in the pool at drawing time.")
    requested_size = models.PositiveIntegerField(help_text="N asked for; the whole pool was taken when it was smaller.")
    seed = models.BigIntegerField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(seed__gte=0), name="quality_seed_non_negative")]

    def __str__(self):
        return self.name

    @property
    def whole_pool(self) -> bool:
        return self.requested_size >= self.pool_size

    @property
    def drawn_size(self) -> int:
        """How many were drawn: N, or the whole pool when it held fewer."""
        return min(self.requested_size, self.pool_size)


class QualitySampleItem(models.Model):
    """One drawn task, pinned to the revision that was current at drawing time: ratings are about that revision."""

    sample = models.ForeignKey(QualitySample, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField(help_text="1-based order of the draw; raters go through items in it.")
    # PROTECT: a task whose revision a quality sample rated cannot be deleted out from under its ratings.
    revision = models.ForeignKey("tasks.TaskRevision", on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["sample", "position"]
        constraints = [
            models.UniqueConstraint(fields=["sample", "position"], name="unique_quality_item_position"),
            models.UniqueConstraint(fields=["sample", "revision"], name="unique_quality_item_revision"),
        ]

    def __str__(self):
        return f"{self.sample_id} #{self.position}"


def _score_field(field: str):
    dimension = next(d for d in QUALITY_DIMENSIONS if d.field == field)
    return models.PositiveSmallIntegerField(
        dimension.label, validators=[MinValueValidator(1), MaxValueValidator(5)], help_text=dimension.help
    )


class QualityRating(models.Model):
    """One reviewer's scores of one item. One row per reviewer and item: revising a rating updates it in place
    (updated_at tells when); the statistics count each reviewer's current scores once."""

    item = models.ForeignKey(QualitySampleItem, on_delete=models.CASCADE, related_name="ratings")
    # SET_NULL: a deleted account's ratings stay in the study's numbers.
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="quality_ratings"
    )
    reasonableness = _score_field("reasonableness")
    feasibility = _score_field("feasibility")
    resource_consistency = _score_field("resource_consistency")
    verification = _score_field("verification")
    comment = NulSafeTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["item", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "reviewer"], name="unique_quality_rating"),
            *(
                models.CheckConstraint(
                    condition=models.Q(**{f"{d.field}__gte": 1, f"{d.field}__lte": 5}), name=f"quality_{d.field}_1_to_5"
                )
                for d in QUALITY_DIMENSIONS
            ),
        ]

    def __str__(self):
        return f"rating of {self.item} by {self.reviewer_id}"

    def scores(self) -> dict[str, int]:
        return {d.field: getattr(self, d.field) for d in QUALITY_DIMENSIONS}


# --- difficulty filtering --------------------------------------------------------------------------------------


class DifficultyFilter(models.Model):
    """One pass of difficulty filtering over some of a benchmark's candidates: a strong and a small agent, each an
    evaluation run of n rollouts per candidate over the candidates' task revisions; once both runs have finished,
    one DifficultyResult per candidate (review.difficulty). The thresholds are copied from the benchmark at start,
    so a result always says what it was judged against."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    benchmark = models.ForeignKey("benchmarks.Benchmark", on_delete=models.CASCADE, related_name="difficulty_filters")
    strong_endpoint = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="+")
    small_endpoint = models.ForeignKey("llm.ModelEndpoint", on_delete=models.PROTECT, related_name="+")
    n = models.PositiveSmallIntegerField(default=4, help_text="Rollouts of each agent per candidate.")
    strong_min = models.FloatField()
    small_max = models.FloatField()
    margin = models.FloatField(default=0.0)
    harness = NulSafeCharField(max_length=40)
    strong_run = models.ForeignKey(
        "evaluation.EvalRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    small_run = models.ForeignKey(
        "evaluation.EvalRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    candidates = models.ManyToManyField(BenchmarkCandidate, related_name="difficulty_filters")
    status = NulSafeCharField(max_length=16, choices=Status.choices, default=Status.RUNNING, db_index=True)
    error = NulSafeTextField(blank=True, help_text="Why it failed.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"difficulty filter #{self.pk} of {self.benchmark.name}"

    @property
    def runs(self) -> list:
        return [run for run in (self.strong_run, self.small_run) if run is not None]


class DifficultyResult(models.Model):
    """One candidate's verdict in one difficulty filter: each agent's mean over its scored repeats (None: none
    scored) and how many repeats that is."""

    filter = models.ForeignKey(DifficultyFilter, on_delete=models.CASCADE, related_name="results")
    candidate = models.ForeignKey(BenchmarkCandidate, on_delete=models.CASCADE, related_name="difficulty_results")
    revision = models.ForeignKey(
        "tasks.TaskRevision", on_delete=models.CASCADE, related_name="+", help_text="The revision both agents ran on."
    )
    strong_mean = models.FloatField(null=True, blank=True)
    small_mean = models.FloatField(null=True, blank=True)
    strong_n = models.PositiveSmallIntegerField(default=0, help_text="Strong agent repeats that have a score.")
    small_n = models.PositiveSmallIntegerField(default=0, help_text="Small agent repeats that have a score.")
    verdict = NulSafeCharField(max_length=24, choices=DifficultyVerdict.choices)

    class Meta:
        ordering = ["filter", "candidate__task__external_id"]
        constraints = [models.UniqueConstraint(fields=["filter", "candidate"], name="unique_difficulty_result")]

    def __str__(self):
        return f"{self.candidate_id} in filter {self.filter_id}: {self.verdict}"


# --- planted flaws ---------------------------------------------------------------------------------------------


class PlantedFlaw(models.Model):
    """A known flaw an admin planted into a copy of an accepted candidate (review.planting): the copy is a new task
    whose revision carries the flaw, proposed to the same benchmark and mixed into the queue unmarked. It measures
    the review: did the LLM diagnosis name an issue on the affected component, did the reviewers reject or fix it.
    A planted copy is never accepted into a benchmark (an accept closes it as missed) nor used for training."""

    class Kind(models.TextChoices):
        CHECK_REMOVED = "check_removed", "Check removed or inverted"
        INSTRUCTION_CUT = "instruction_cut", "Instruction detail cut"
        INPUT_REMOVED = "input_removed", "Input file removed or emptied"
        RUBRIC_CONTRADICTS = "rubric_contradicts", "Rubric contradicts the checker"

    benchmark = models.ForeignKey("benchmarks.Benchmark", on_delete=models.CASCADE, related_name="planted_flaws")
    # The planted copy: its candidate (and through it its task) carries the flaw.
    candidate = models.OneToOneField(BenchmarkCandidate, on_delete=models.CASCADE, related_name="plant")
    source_candidate = models.ForeignKey(
        BenchmarkCandidate, null=True, on_delete=models.SET_NULL, related_name="+", help_text="The accepted original."
    )
    source_revision = models.ForeignKey(
        "tasks.TaskRevision", null=True, on_delete=models.SET_NULL, related_name="+", help_text="The copied revision."
    )
    kind = NulSafeCharField(max_length=24, choices=Kind.choices, db_index=True)
    # The component a diagnosis must name to count as having found the flaw (DiagnosisIssue.Component).
    component = NulSafeCharField(max_length=16, choices=DiagnosisIssue.Component.choices)
    path = NulSafeCharField(max_length=500, blank=True, help_text="The file changed, for a file's flaw.")
    change = NulSafeTextField(help_text="What was changed, in words.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.kind} planted in candidate {self.candidate_id}"
