"""The review over the API. Reads need the viewer role; review actions (diagnosing a candidate again among them) the
reviewer role; freezing and sanity overrides the admin role.

    GET  /api/benchmarks/[{id}/]                POST (admin) creates one
    POST /api/benchmarks/{id}/freeze/           admin: a new immutable version pinning the accepted revisions
    POST /api/benchmarks/{id}/lazy-tolerance/   admin: {"lazy_tolerance": x}: the lazy score the accept gate allows
    POST /api/benchmarks/{name or id}/difficulty-filter/      admin: {"strong", "small", "n", "candidates", "harness"}:
                                                              start a difficulty filter: 202 + the filter
    POST /api/benchmarks/{name or id}/difficulty-thresholds/  admin: {"strong_min", "small_max", "margin"}
    GET  /api/benchmarks/{name or id}/team/       the team settings; POST (admin) {"reviewers", "decisions_needed",
                                                  "overlap_share"} sets them (review.team)
    GET  /api/benchmarks/{name or id}/progress/   candidates by state, category and reviewer, decisions per day, the
                                                  median time from claim to decision, what is left
    GET  /api/benchmarks/{name or id}/agreement/  kappa, alpha and agreement with adjudications (review.agreement)
    GET  /api/difficulty-filters/[{id}/]        ?benchmark=&status=; one filter with its verdicts and results
    (GET /api/benchmark-versions/: benchmarks.api)
    GET  /api/candidates/[{id}/]                ?benchmark=&status=&category=&severity=&mine=&lazy_above=&difficulty=
    POST /api/candidates/{id}/claim/            reviewer: 409 when another reviewer holds it
    POST /api/candidates/{id}/release/
    POST /api/candidates/{id}/verdict/          reviewer: {"verdicts": {issue id: valid|not_valid|fixed}}
    POST /api/candidates/{id}/apply-fix/        reviewer: {"issue", "base_revision"}: 409 on a stale revision
    POST /api/candidates/{id}/decide/           reviewer: accept|fix|reject; override_reason needs admin
    POST /api/candidates/bulk-decide/           reviewer: {"candidates": [ids], "decision": accept|reject, "reason"}:
                                                each through decide (no override); 200 + what was decided and what
                                                was refused, with each reason
    POST /api/candidates/{id}/diagnose/         reviewer: (re-)diagnose it, as the page's button: 202 + the job run (the
                                                one under way, if any); 409 when no endpoint serves the diagnosis role
    GET  /api/candidates/{id}/history/
    POST /api/candidates/next/                  reviewer: {"benchmark"?}: claim the candidate the routing rule offers
                                                (review.team): 200 + it; 404 when nothing is left for you
    GET  /api/candidates/{id}/sides/            lead: each reviewer's side of a disagreement; 403 while the
                                                review is blind to the lead (review.team.is_blind)
    POST /api/candidates/{id}/adjudicate/       lead: {"decision": accept|reject, "reason", "verdicts"?}
A candidate's decisions, verdicts and history are those the caller may see: a blind second reviewer sees only
their own until they have decided (review.team).
    GET  /api/diagnoses/[{id}/]                 ?candidate=ID
"""

from django.db.models import Count
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from accounts.roles import ADMIN, LEAD, REVIEWER, has_role
from benchmarks.models import Benchmark
from benchmarks.serializers import BenchmarkSerializer, BenchmarkVersionSerializer
from benchmarks.services import BenchmarkError, get_or_create_benchmark
from jobs.api_actions import validated
from jobs.engine import JobEngineError
from jobs.serializers import JobRunSerializer
from lib.api_filters import QueryFilterMixin
from lib.bounds import parse_id
from tasks.services import StaleRevisionError

from . import adjudication, bulk, edits, rediagnosis, services, team
from .agreement import benchmark_agreement
from .difficulty import DifficultyError, set_difficulty_thresholds, start_difficulty_filter
from .measures_api import DecisionRevealSerializer, decision_body
from .models import BenchmarkCandidate, DiagnosisIssue, DifficultyFilter, LLMDiagnosis
from .serializers import (
    AdjudicateSerializer,
    ApplyFixSerializer,
    BulkDecideSerializer,
    BulkDecisionSerializer,
    CandidateDetailSerializer,
    CandidateEventSerializer,
    CandidateFilterSerializer,
    CandidateListSerializer,
    ClaimSerializer,
    DecideSerializer,
    DecisionSerializer,
    DiagnosisFilterSerializer,
    DiagnosisSerializer,
    DifficultyFilterDetailSerializer,
    DifficultyFilterFilterSerializer,
    DifficultyFilterSerializer,
    DifficultyStartSerializer,
    DifficultyThresholdsSerializer,
    FreezeSerializer,
    LazyToleranceSerializer,
    NextCandidateSerializer,
    TeamSettingsSerializer,
    TeamSideSerializer,
    VerdictSerializer,
)


def _error(exc: Exception) -> Response:
    """A service's refusal as an HTTP answer (services.http_status); a stale revision also names both revisions."""
    body = {"detail": str(exc)}
    if isinstance(exc, StaleRevisionError):
        body |= {"base_revision": exc.base.number, "current_revision": exc.current.number}
    return Response(body, status=services.http_status(exc))


class BenchmarkViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Benchmark.objects.all()
    serializer_class = BenchmarkSerializer
    write_role = ADMIN

    def perform_create(self, serializer):
        """Through the service, like the pages: its bounds (name, description) and rules apply to the API too."""
        data = serializer.validated_data
        try:
            serializer.instance, _created = get_or_create_benchmark(
                data["name"],
                user=self.request.user,
                description=data.get("description", ""),
                lazy_tolerance=data.get("lazy_tolerance", 0.0),
            )
        except BenchmarkError as exc:
            raise ValidationError({"detail": [str(exc)]}) from None

    @extend_schema(request=FreezeSerializer, responses={201: BenchmarkVersionSerializer})
    @action(detail=True, methods=["post"])
    def freeze(self, request, pk=None):
        data = validated(FreezeSerializer, request.data)
        try:
            version = services.freeze_version(self.get_object(), user=request.user, note=data["note"])
        except services.ReviewError as exc:
            return _error(exc)
        body = BenchmarkVersionSerializer(version, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=LazyToleranceSerializer, responses={200: BenchmarkSerializer})
    @action(detail=True, methods=["post"], url_path="lazy-tolerance")
    def lazy_tolerance(self, request, pk=None):
        data = validated(LazyToleranceSerializer, request.data)
        try:
            benchmark = services.set_lazy_tolerance(self.get_object(), data["lazy_tolerance"], user=request.user)
        except services.ReviewError as exc:
            return _error(exc)
        return Response(BenchmarkSerializer(benchmark, context={"request": request}).data)

    @extend_schema(methods=["GET"], request=None, responses={200: TeamSettingsSerializer})
    @extend_schema(methods=["POST"], request=TeamSettingsSerializer, responses={200: TeamSettingsSerializer})
    @action(detail=True, methods=["get", "post"])
    def team(self, request, pk=None):
        """The benchmark's reviewers, decisions needed and overlap share; admins set them with POST."""
        benchmark = self._named(pk)
        if request.method == "POST":
            data = validated(TeamSettingsSerializer, request.data)
            try:
                team.set_team(benchmark, user=request.user, **data)
            except team.TeamNotAllowed as exc:
                return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
            except team.TeamError as exc:
                return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(team.team_settings(benchmark))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        """Candidates by state, category and reviewer, decisions per day, median claim-to-decision time, what is left."""
        return Response(team.progress(self._named(pk)))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def agreement(self, request, pk=None):
        """Cohen's kappa, Krippendorff's alpha and agreement with adjudications, each with n and a 95% interval."""
        return Response(benchmark_agreement(self._named(pk)))

    def _named(self, key: str) -> Benchmark:
        """The benchmark called `key`, else the one whose id it is (a name wins: names may be digits)."""
        found = Benchmark.objects.filter(name=key).first()
        if found is None and (pk := parse_id(key)):
            found = Benchmark.objects.filter(pk=pk).first()
        if found is None:
            raise Http404(f"no benchmark is named or numbered {key!r}")
        return found

    @extend_schema(request=DifficultyStartSerializer, responses={202: DifficultyFilterDetailSerializer})
    @action(detail=True, methods=["post"], url_path="difficulty-filter")
    def difficulty_filter(self, request, pk=None):
        """Start a difficulty filter (two evaluation runs on the job workers); poll GET /api/difficulty-filters/{id}/
        for its verdicts."""
        benchmark = self._named(pk)
        data = validated(DifficultyStartSerializer, request.data)
        candidates = None
        if "candidates" in data:
            wanted = list(dict.fromkeys(data["candidates"]))
            found = {
                c.task.external_id: c
                for c in benchmark.candidates.filter(task__external_id__in=wanted).select_related("task")
            }
            missing = [t for t in wanted if t not in found]
            if missing:
                raise ValidationError({"candidates": [f"not candidates of {benchmark.name}: {', '.join(missing)}"]})
            candidates = [found[t] for t in wanted]
        try:
            flt = start_difficulty_filter(
                benchmark,
                strong=data["strong"],
                small=data["small"],
                n=data["n"],
                candidates=candidates,
                harness=data.get("harness"),
                user=request.user,
            )
        except (DifficultyError, services.NotAllowed) as exc:
            return _error(exc)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        body = DifficultyFilterDetailSerializer(flt, context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=DifficultyThresholdsSerializer, responses={200: BenchmarkSerializer})
    @action(detail=True, methods=["post"], url_path="difficulty-thresholds")
    def difficulty_thresholds(self, request, pk=None):
        benchmark = self._named(pk)
        data = validated(DifficultyThresholdsSerializer, request.data)
        try:
            benchmark = set_difficulty_thresholds(benchmark, user=request.user, **data)
        except services.ReviewError as exc:
            return _error(exc)
        return Response(BenchmarkSerializer(benchmark, context={"request": request}).data)


class CandidateViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    filter_serializer_class = CandidateFilterSerializer
    write_role = REVIEWER  # the services check admin-only parts (overrides) themselves
    write_roles = {"adjudicate": LEAD}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        services.expire_claims()  # before anything reads a claim (not in get_queryset: the schema generator calls it)

    def get_queryset(self):
        candidates = BenchmarkCandidate.objects.select_related(
            "task__benchmark_category", "task__current_revision", "benchmark", "claimed_by"
        )
        return candidates

    def get_serializer_class(self):
        return CandidateListSerializer if self.action == "list" else CandidateDetailSerializer

    @extend_schema(parameters=[CandidateFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def _detail(self, candidate, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=candidate.pk)
        return Response(CandidateDetailSerializer(fresh, context={"request": self.request}).data, status=code)

    @extend_schema(request=ClaimSerializer, responses={200: CandidateDetailSerializer})
    @action(detail=True, methods=["post"])
    def claim(self, request, pk=None):
        data = validated(ClaimSerializer, request.data)
        try:
            candidate = services.claim(self.get_object(), user=request.user, minutes=data.get("minutes"))
        except services.ReviewError as exc:
            return _error(exc)
        return self._detail(candidate)

    @extend_schema(request=None, responses={200: CandidateDetailSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        try:
            candidate = services.release(self.get_object(), user=request.user)
        except services.ReviewError as exc:
            return _error(exc)
        return self._detail(candidate)

    @extend_schema(request=VerdictSerializer, responses={201: DecisionSerializer})
    @action(detail=True, methods=["post"])
    def verdict(self, request, pk=None):
        data = validated(VerdictSerializer, request.data)
        try:
            row = services.record_verdicts(
                self.get_object(), data["verdicts"], user=request.user, reason=data["reason"]
            )
        except services.ReviewError as exc:
            return _error(exc)
        return Response(DecisionSerializer(row).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ApplyFixSerializer, responses={201: DecisionSerializer})
    @action(detail=True, methods=["post"], url_path="apply-fix")
    def apply_fix(self, request, pk=None):
        data = validated(ApplyFixSerializer, request.data)
        candidate = self.get_object()
        issue = get_object_or_404(DiagnosisIssue, pk=data["issue"], diagnosis__candidate=candidate)
        base = candidate.task.revisions.filter(number=data["base_revision"]).first()
        if base is None:
            raise ValidationError(
                {"base_revision": f"{candidate.task.external_id} has no revision {data['base_revision']}"}
            )
        try:
            fix = edits.apply_suggested_fix(issue, user=request.user, base_revision=base, reason=data["reason"])
        except (services.ReviewError, StaleRevisionError) as exc:
            return _error(exc)
        except JobEngineError as exc:
            return Response({"detail": f"the fix was saved but its sanity check did not start: {exc}"}, status=503)
        body = DecisionSerializer(fix.decision).data | {
            "sanity_job": JobRunSerializer(fix.sanity_run, context={"request": request}).data
        }
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=DecideSerializer, responses={201: DecisionRevealSerializer})
    @action(detail=True, methods=["post"])
    def decide(self, request, pk=None):
        """Accept, fix or reject; after an accept or reject of a planted flaw, `planted` says what it was."""
        data = validated(DecideSerializer, request.data)
        try:
            row = services.decide(self.get_object(), user=request.user, **data)
        except services.ReviewError as exc:
            return _error(exc)
        return Response(decision_body(row, request.user), status=status.HTTP_201_CREATED)

    @extend_schema(request=BulkDecideSerializer, responses={200: BulkDecisionSerializer})
    @action(detail=False, methods=["post"], url_path="bulk-decide")
    def bulk_decide(self, request):
        """Accept or reject many candidates: each through decide, alone (its gate, its claim, its decision row); a
        refusal of one leaves the others decided and is listed with its reason."""
        data = validated(BulkDecideSerializer, request.data)
        try:
            result = bulk.decide_many(data["candidates"], data["decision"], user=request.user, reason=data["reason"])
        except services.ReviewError as exc:
            return _error(exc)
        return Response(BulkDecisionSerializer(result).data)

    @extend_schema(request=None, responses={202: JobRunSerializer})
    @action(detail=True, methods=["post"])
    def diagnose(self, request, pk=None):
        """Diagnose the candidate (again), as a reviewer may on its page (review.rediagnosis.diagnose_again)."""
        try:
            run = rediagnosis.diagnose_again(self.get_object(), user=request.user)
        except rediagnosis.DiagnosisUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except services.ReviewError as exc:
            return _error(exc)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(JobRunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: CandidateEventSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)
    def history(self, request, pk=None):
        return Response(services.history(self.get_object(), request.user))

    @extend_schema(request=NextCandidateSerializer, responses={200: CandidateDetailSerializer})
    @action(detail=False, methods=["post"])
    def next(self, request):
        """Claim the candidate the routing rule offers you next; 404 when nothing is left for you."""
        data = validated(NextCandidateSerializer, request.data)
        benchmark = None
        if data.get("benchmark"):
            benchmark = Benchmark.objects.filter(name=data["benchmark"]).first()
            if benchmark is None:
                raise ValidationError({"benchmark": [f"no benchmark is named {data['benchmark']!r}"]})
        for _attempt in range(5):
            candidate = team.next_candidate(request.user, benchmark)
            if candidate is None:
                break
            try:
                services.claim(candidate, user=request.user)
            except services.ClaimConflict:
                continue  # another reviewer took it first: route again
            except services.ReviewError as exc:
                return _error(exc)
            return self._detail(candidate)
        return Response({"detail": "nothing left for you to review"}, status=status.HTTP_404_NOT_FOUND)

    @extend_schema(request=None, responses={200: TeamSideSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)
    def sides(self, request, pk=None):
        """Each reviewer's decision, reason and issue verdicts, for leads (403 while the review is blind to them)."""
        if not has_role(request.user, LEAD):
            return Response({"detail": f"seeing both sides needs the {LEAD} role"}, status=status.HTTP_403_FORBIDDEN)
        try:
            found = team.sides(self.get_object(), request.user)
        except team.BlindSides as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
        return Response(TeamSideSerializer(found, many=True).data)

    @extend_schema(request=AdjudicateSerializer, responses={201: DecisionSerializer})
    @action(detail=True, methods=["post"])
    def adjudicate(self, request, pk=None):
        """A lead accepts or rejects a candidate whose reviewers disagree, with a reason."""
        data = validated(AdjudicateSerializer, request.data)
        try:
            row = adjudication.adjudicate(self.get_object(), user=request.user, **data)
        except services.ReviewError as exc:
            return _error(exc)
        return Response(DecisionSerializer(row).data, status=status.HTTP_201_CREATED)


class DiagnosisViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = DiagnosisSerializer
    filter_serializer_class = DiagnosisFilterSerializer

    def get_queryset(self):
        return LLMDiagnosis.objects.select_related("revision").prefetch_related("issues")

    @extend_schema(parameters=[DiagnosisFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class DifficultyFilterViewSet(QueryFilterMixin, viewsets.ReadOnlyModelViewSet):
    filter_serializer_class = DifficultyFilterFilterSerializer

    def get_queryset(self):
        return (
            DifficultyFilter.objects.select_related(
                "benchmark", "strong_endpoint", "small_endpoint", "strong_run", "small_run", "created_by"
            )
            .annotate(covered=Count("candidates", distinct=True))
            .order_by("-created_at", "-id")
        )

    def get_serializer_class(self):
        return DifficultyFilterSerializer if self.action == "list" else DifficultyFilterDetailSerializer

    @extend_schema(parameters=[DifficultyFilterFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


def register(router):
    router.register("benchmarks", BenchmarkViewSet, basename="benchmark")
    router.register("candidates", CandidateViewSet, basename="candidate")
    router.register("diagnoses", DiagnosisViewSet, basename="diagnosis")
    router.register("difficulty-filters", DifficultyFilterViewSet, basename="difficulty-filter")
