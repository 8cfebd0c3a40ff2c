"""What the review API shows and accepts. Serializers validate; review.services does the work."""

from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from evaluation.harnesses import HARNESS_CHOICES
from evaluation.services.rollouts import MAX_REPEATS
from lib.bounds import MAX_ID
from llm.models import ModelEndpoint
from tasks.models import SanityReport

from . import team
from .bulk import MAX_BULK
from .difficulty import verdict_counts
from .models import (
    SEVERITY_RANK,
    BenchmarkCandidate,
    DiagnosisIssue,
    DifficultyFilter,
    DifficultyResult,
    DifficultyVerdict,
    LLMDiagnosis,
    ReviewDecision,
    Severity,
)
from .services import current_verdicts
from .solvability import solvability


class FreezeSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class LazyToleranceSerializer(serializers.Serializer):
    lazy_tolerance = serializers.FloatField(
        min_value=0.0, max_value=1.0, help_text="Accepting is blocked while a lazy agent earns more than this."
    )


class DiagnosisIssueSerializer(serializers.ModelSerializer):
    class Meta:
        model = DiagnosisIssue
        fields = [
            "id",
            "component",
            "path",
            "path_missing",
            "severity",
            "problem",
            "evidence",
            "suggested_fix",
            "replacement",
        ]


class DiagnosisSerializer(serializers.ModelSerializer):
    issues = DiagnosisIssueSerializer(many=True, read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True)

    class Meta:
        model = LLMDiagnosis
        fields = [
            "id",
            "candidate",
            "revision",
            "endpoint_name",
            "prompt_version",
            "model_call",
            "overall",
            "job_run",
            "created_at",
            "issues",
        ]


class DecisionSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True, default=None)

    class Meta:
        model = ReviewDecision
        fields = [
            "id",
            "reviewer",
            "decision",
            "reason",
            "verdicts",
            "revision",
            "override_reason",
            "adjudication",
            "created_at",
        ]


def _worst(rank) -> str | None:
    return next((str(s) for s, r in SEVERITY_RANK.items() if r == rank), None)


class CandidateListSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task.external_id", read_only=True)
    title = serializers.CharField(source="task.title", read_only=True)
    category = serializers.CharField(source="task.benchmark_category.slug", read_only=True, default=None)
    benchmark = serializers.CharField(source="benchmark.name", read_only=True)
    claimed_by = serializers.SerializerMethodField()
    worst_severity = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkCandidate
        fields = [
            "id",
            "task",
            "title",
            "category",
            "benchmark",
            "status",
            "claimed_by",
            "claim_expires_at",
            "worst_severity",
            "diagnosis_error",
            "strong_mean",
            "small_mean",
            "difficulty_verdict",
            "updated_at",
        ]

    difficulty_verdict = serializers.ChoiceField(
        choices=DifficultyVerdict.choices,
        allow_blank=True,
        read_only=True,
        help_text="the latest difficulty filter's verdict (blank: never filtered)",
    )

    def get_claimed_by(self, candidate) -> str | None:
        holder = candidate.held_by()
        return holder.get_username() if holder else None

    def get_worst_severity(self, candidate) -> str | None:
        return _worst(candidate.worst_rank)


class CandidateEventSerializer(serializers.Serializer):
    """One event of a candidate's timeline (services.history): a decision, a revision of its task, a sanity check,
    a diagnosis or a claim."""

    kind = serializers.CharField(help_text="decision, revision, sanity, diagnosis or claim")
    at = serializers.DateTimeField()
    who = serializers.CharField()
    what = serializers.CharField()
    reason = serializers.CharField(required=False)
    revision = serializers.IntegerField(required=False, allow_null=True)
    override_reason = serializers.CharField(required=False, help_text="decisions")
    verdicts = serializers.DictField(required=False, help_text="decisions: the issue verdicts")


class CandidateDetailSerializer(CandidateListSerializer):
    """One candidate. Its decisions and verdicts are those the requesting user may see: while the review is blind
    (review.team.visible_decisions), a reviewer who has not decided sees only their own; with no request, none."""

    current_revision = serializers.IntegerField(source="task.current_revision.number", read_only=True, default=None)
    diagnosis = serializers.SerializerMethodField()
    decisions = serializers.SerializerMethodField()
    verdicts = serializers.SerializerMethodField()
    solvability = serializers.SerializerMethodField(
        help_text="the proof that the current revision can score full marks (review.solvability): proven, kind "
        "(solution, rollout or null), score, description, link; without proof, missing and how to give it"
    )

    class Meta(CandidateListSerializer.Meta):
        fields = CandidateListSerializer.Meta.fields + [
            "current_revision",
            "diagnosis",
            "decisions",
            "verdicts",
            "solvability",
        ]

    def get_diagnosis(self, candidate) -> dict | None:
        latest = candidate.latest_diagnosis()
        return DiagnosisSerializer(latest).data if latest else None

    def _viewer(self):
        request = self.context.get("request")
        return request.user if request is not None else AnonymousUser()

    @extend_schema_field(DecisionSerializer(many=True))
    def get_decisions(self, candidate) -> list:
        return DecisionSerializer(
            team.visible_decisions(candidate, self._viewer()).select_related("reviewer", "revision"), many=True
        ).data

    def get_verdicts(self, candidate) -> dict:
        return current_verdicts(candidate, self._viewer())

    def get_solvability(self, candidate) -> dict:
        return solvability(candidate.task.current_revision)


class CandidateFilterSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, help_text="benchmark name")
    status = serializers.ChoiceField(choices=BenchmarkCandidate.Status.choices, required=False)
    category = serializers.CharField(required=False, help_text="benchmark category slug")
    severity = serializers.ChoiceField(
        choices=Severity.choices + [("none", "No issues")],
        required=False,
        help_text="the worst severity of the latest diagnosis",
    )
    mine = serializers.BooleanField(required=False, help_text="only candidates you hold")
    diagnosis_failed = serializers.BooleanField(
        required=False, help_text="only candidates whose last diagnosis attempt failed (true) or did not (false)"
    )
    lazy_above = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="only candidates whose checker pays a lazy agent more than this (the latest sanity report of the "
        "task's current revision)",
    )

    difficulty = serializers.ChoiceField(
        choices=DifficultyVerdict.choices + [("none", "Not filtered")],
        required=False,
        help_text="the verdict of the latest difficulty filter (none: never filtered)",
    )

    def filter(self, queryset):
        data = self.validated_data
        user = self.context["request"].user
        if "difficulty" in data:
            queryset = queryset.filter(difficulty_verdict="" if data["difficulty"] == "none" else data["difficulty"])
        if "benchmark" in data:
            queryset = queryset.filter(benchmark__name=data["benchmark"])
        if "status" in data:
            queryset = queryset.filter(status=data["status"])
        if "category" in data:
            queryset = queryset.filter(task__benchmark_category__slug=data["category"])
        if "severity" in data:
            if data["severity"] == "none":
                queryset = queryset.filter(worst_rank__isnull=True)
            else:
                queryset = queryset.filter(worst_rank=SEVERITY_RANK[data["severity"]])
        if data.get("mine"):
            queryset = queryset.filter(claimed_by=user, claim_expires_at__gt=timezone.now())
        if "diagnosis_failed" in data:
            failed = ~Q(diagnosis_error="")
            queryset = queryset.filter(failed if data["diagnosis_failed"] else ~failed)
        if "lazy_above" in data:
            queryset = SanityReport.filter_lazy_above(queryset, data["lazy_above"], "task__current_revision")
        return queryset


class DiagnosisFilterSerializer(serializers.Serializer):
    candidate = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="a candidate id")

    def filter(self, queryset):
        candidate = self.validated_data.get("candidate")
        return queryset if candidate is None else queryset.filter(candidate_id=candidate)


class ClaimSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(required=False, min_value=1, max_value=24 * 60)


class VerdictSerializer(serializers.Serializer):
    verdicts = serializers.DictField(child=serializers.ChoiceField(choices=ReviewDecision.Verdict.choices))
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class DecideSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["accept", "fix", "reject"])
    reason = serializers.CharField(required=False, allow_blank=True, default="")
    verdicts = serializers.DictField(
        child=serializers.ChoiceField(choices=ReviewDecision.Verdict.choices), required=False, default=dict
    )
    override_reason = serializers.CharField(required=False, allow_blank=True, default="")


class BulkDecideSerializer(serializers.Serializer):
    candidates = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        allow_empty=False,
        max_length=MAX_BULK,
        help_text=f"candidate ids, at most {MAX_BULK}: each is decided alone, through the same accept gate",
    )
    decision = serializers.ChoiceField(choices=["accept", "reject"])
    reason = serializers.CharField(required=False, allow_blank=True, default="", help_text="required to reject")


class BulkDecidedSerializer(serializers.Serializer):
    candidate = serializers.IntegerField()
    task = serializers.CharField()
    decision = DecisionSerializer()
    planted = serializers.DictField(
        required=False, help_text="only for a planted flaw: what it was (as the decide endpoint's `planted`)"
    )


class BulkRefusedSerializer(serializers.Serializer):
    candidate = serializers.IntegerField()
    task = serializers.CharField(help_text="empty when there is no such candidate")
    reason = serializers.CharField(help_text="why services.decide refused it")
    status = serializers.IntegerField(help_text="the status deciding it alone would have had (403, 404, 409 or 400)")


class BulkDecisionSerializer(serializers.Serializer):
    """What a bulk decision did, one entry per candidate asked for."""

    decision = serializers.CharField()
    summary = serializers.CharField()
    decided = BulkDecidedSerializer(many=True)
    refused = BulkRefusedSerializer(many=True)

    def to_representation(self, result):
        return {
            "decision": result.decision,
            "summary": result.summary(),
            "decided": [
                {"candidate": i.candidate_id, "task": i.task, "decision": DecisionSerializer(i.decision).data}
                | ({"planted": i.planted} if i.planted else {})
                for i in result.decided
            ],
            "refused": [
                {"candidate": i.candidate_id, "task": i.task, "reason": i.refused, "status": i.status}
                for i in result.refused
            ],
        }


class ApplyFixSerializer(serializers.Serializer):
    issue = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="the DiagnosisIssue whose replacement to apply"
    )
    base_revision = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="the revision number you saw: a stale one gets 409"
    )
    reason = serializers.CharField(required=False, allow_blank=True, default="")


# --- difficulty filtering --------------------------------------------------------------------------------------


class DifficultyResultSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="candidate.task.external_id", read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True)

    class Meta:
        model = DifficultyResult
        fields = ["candidate", "task", "revision", "strong_mean", "small_mean", "strong_n", "small_n", "verdict"]


class DifficultyFilterSerializer(serializers.ModelSerializer):
    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True)
    strong = serializers.CharField(source="strong_endpoint.name", read_only=True)
    small = serializers.CharField(source="small_endpoint.name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    thresholds = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()
    candidates = serializers.SerializerMethodField()

    class Meta:
        model = DifficultyFilter
        fields = [
            "id",
            "benchmark",
            "strong",
            "small",
            "n",
            "thresholds",
            "harness",
            "status",
            "error",
            "candidates",
            "runs",
            "created_by",
            "created_at",
            "finished_at",
        ]

    def get_thresholds(self, flt) -> dict:
        return {"strong_min": flt.strong_min, "small_max": flt.small_max, "margin": flt.margin}

    def get_runs(self, flt) -> dict:
        """{"strong"|"small": {"id", "status", "rollouts_finished", "rollouts_total"} or null}"""
        return {
            side: None
            if run is None
            else {
                "id": run.pk,
                "status": run.status,
                "rollouts_finished": run.rollouts_finished,
                "rollouts_total": run.rollouts_total,
            }
            for side, run in (("strong", flt.strong_run), ("small", flt.small_run))
        }

    def get_candidates(self, flt) -> int:
        covered = getattr(flt, "covered", None)  # annotated by the viewset's queryset
        return covered if covered is not None else flt.candidates.count()


class DifficultyFilterDetailSerializer(DifficultyFilterSerializer):
    verdicts = serializers.SerializerMethodField()
    results = serializers.SerializerMethodField()

    class Meta(DifficultyFilterSerializer.Meta):
        fields = DifficultyFilterSerializer.Meta.fields + ["verdicts", "results"]

    def get_verdicts(self, flt) -> dict[str, int]:
        return verdict_counts(flt)

    def get_results(self, flt) -> list[dict]:
        rows = flt.results.select_related("candidate__task", "revision").order_by("candidate__task__external_id")
        return DifficultyResultSerializer(rows, many=True).data


class DifficultyFilterFilterSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, help_text="benchmark name")
    status = serializers.ChoiceField(choices=DifficultyFilter.Status.choices, required=False)

    def filter(self, queryset):
        data = self.validated_data
        if "benchmark" in data:
            queryset = queryset.filter(benchmark__name=data["benchmark"])
        if "status" in data:
            queryset = queryset.filter(status=data["status"])
        return queryset


class DifficultyStartSerializer(serializers.Serializer):
    strong = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelEndpoint.objects.all(), help_text="the strong agent's model endpoint"
    )
    small = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelEndpoint.objects.all(), help_text="the small agent's model endpoint"
    )
    n = serializers.IntegerField(
        min_value=1, max_value=MAX_REPEATS, default=4, help_text="rollouts of each agent per candidate"
    )
    candidates = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        allow_empty=False,
        max_length=20_000,
        help_text="task ids of the benchmark's candidates (default: its open and accepted candidates)",
    )
    harness = serializers.ChoiceField(choices=HARNESS_CHOICES, required=False, help_text="default: the site's")


class DifficultyThresholdsSerializer(serializers.Serializer):
    strong_min = serializers.FloatField(min_value=0.0, max_value=1.0, help_text="too hard below this strong mean")
    small_max = serializers.FloatField(min_value=0.0, max_value=1.0, help_text="too easy above this small mean")
    margin = serializers.FloatField(
        min_value=0.0,
        max_value=1.0,
        default=0.0,
        help_text="the strong mean must exceed the small one by more than this",
    )


# --- review as a team (review.team) ----------------------------------------------------------------------------


class TeamSettingsSerializer(serializers.Serializer):
    reviewers = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        max_length=1000,
        help_text="usernames of reviewers the queue routes this benchmark to ([]: every reviewer)",
    )
    decisions_needed = serializers.IntegerField(
        min_value=1, max_value=team.MAX_DECISIONS, required=False, help_text="independent decisions a candidate needs"
    )
    overlap_share = serializers.FloatField(
        min_value=0.0, max_value=1.0, required=False, help_text="share of candidates that get one more decision"
    )


class NextCandidateSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, max_length=120, help_text="only this benchmark's candidates")


class AdjudicateSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=[("accept", "Accept"), ("reject", "Reject")])
    reason = serializers.CharField(allow_blank=True, required=False, default="", help_text="needed")
    verdicts = serializers.DictField(required=False, default=dict, help_text="{issue id: valid|not_valid|fixed}")


class TeamSideSerializer(serializers.Serializer):
    reviewer = serializers.CharField()
    decision = serializers.CharField()
    reason = serializers.CharField()
    revision = serializers.IntegerField(allow_null=True)
    verdicts = serializers.DictField(help_text="{issue id: valid|not_valid} (fixed counts as valid)")
    at = serializers.DateTimeField()
