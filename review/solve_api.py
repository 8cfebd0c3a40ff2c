"""A reviewer's in-browser solve over the API (review.solving does the work): the same scratch workspace the candidate
page shows, so a script can open it, write files, run the checker and save a full-marks workspace as the solution.

    GET  /api/candidates/{id}/solve/          your workspace: its files, the latest run and whether it can be saved
    POST /api/candidates/{id}/solve/          {"source": "initial"|"solution"}: start (or start over) the workspace
    POST /api/candidates/{id}/solve/files/    {"path", "content"} writes a text file; {"path", "delete": true} deletes
    POST /api/candidates/{id}/solve/run/      run the current checker on it: 202 + the job (GET the state to see it)
    POST /api/candidates/{id}/solve/save/     {"base_revision", "reason"?}: 201 + the new revision's number and its
                                              sanity job; 400 until the latest run of these files scored full marks
    POST /api/candidates/{id}/solve/discard/  throw it away

Each needs the reviewer role; a workspace is its reviewer's own. Refusals are {detail} with the services' status.
"""

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.roles import REVIEWER
from jobs.api_actions import validated
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.serializers import JobRunSerializer
from lib.api_filters import list_query
from lib.bounds import parse_id
from tasks.models import TaskRevision
from tasks.services import StaleRevisionError

from . import services, solving
from .models import BenchmarkCandidate


class SolveOpenSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=solving.SOURCES, default="initial")


class SolveFileSerializer(serializers.Serializer):
    path = serializers.CharField(max_length=500)
    content = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    delete = serializers.BooleanField(default=False)

    def validate(self, data):
        if not data["delete"] and "content" not in data:
            raise serializers.ValidationError({"content": "give the file's content, or delete: true"})
        return data


class SolveSaveSerializer(serializers.Serializer):
    base_revision = serializers.IntegerField(min_value=1)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=400)


class SolveFileStateSerializer(serializers.Serializer):
    path = serializers.CharField()
    sha256 = serializers.CharField()
    change = serializers.CharField(allow_null=True, help_text="added | modified against the input files, or null")


@extend_schema_serializer(many=False)  # one object, though GET answers on the router's `list`
class SolveStateSerializer(serializers.Serializer):
    open = serializers.BooleanField()
    revision = serializers.IntegerField(allow_null=True, help_text="the revision the workspace started from")
    current_revision = serializers.IntegerField()
    source = serializers.CharField(allow_null=True)
    files = SolveFileStateSerializer(many=True)
    deleted_inputs = serializers.ListField(child=serializers.CharField())
    run = JobRunSerializer(allow_null=True, help_text="the latest run of the checker on it")
    result = serializers.DictField(
        allow_null=True, help_text="the latest finished run: score, status, reason, subscores, solved, stdout, stderr"
    )
    can_save = serializers.BooleanField()
    why_not = serializers.CharField(help_text="why it cannot be saved as the solution yet ('' when it can)")


class SolveSavedSerializer(serializers.Serializer):
    revision = serializers.IntegerField()
    sanity_job = JobRunSerializer()


def _error(exc: Exception) -> Response:
    body = {"detail": str(exc)}
    if isinstance(exc, StaleRevisionError):
        body |= {"base_revision": exc.base.number, "current_revision": exc.current.number}
    return Response(body, status=services.http_status(exc))


class SolveViewSet(viewsets.ViewSet):
    write_role = REVIEWER

    def _candidate(self) -> BenchmarkCandidate:
        pk = parse_id(self.kwargs["candidate_pk"])
        found = pk and BenchmarkCandidate.objects.select_related("task", "benchmark").filter(pk=pk).first()
        if found is None:
            raise Http404(f"no candidate {self.kwargs['candidate_pk']}")
        return found

    def _state(self, candidate, code=status.HTTP_200_OK) -> Response:
        user = self.request.user
        found = solving.workspace(candidate, user)
        revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
        latest = solving.runs(candidate, user).first() if found else None
        proof, why = solving.proof_run(candidate, user, found) if found else (None, "open a scratch workspace first")
        changes = solving.changes_against(found, revision) if found else {}
        finished = latest if latest and latest.status == JobRun.Status.SUCCEEDED else None
        body = {
            "open": found is not None,
            "revision": found.revision if found else None,
            "current_revision": revision.number,
            "source": found.source if found else None,
            "files": [
                {"path": path, "sha256": sha, "change": changes.get(path)}
                for path, sha in sorted((found.files if found else {}).items())
            ],
            "deleted_inputs": [p for p, change in changes.items() if change == "deleted"],
            "run": JobRunSerializer(latest, context={"request": self.request}).data if latest else None,
            "result": finished.result if finished else None,
            "can_save": proof is not None,
            "why_not": why,
        }
        return Response(body, status=code)

    @extend_schema(responses={200: SolveStateSerializer})
    def list(self, request, candidate_pk=None):
        """Your scratch workspace of the candidate: its files, the latest run of the checker on it, whether it can be saved as the solution."""
        list_query(request)
        return self._state(self._candidate())

    @extend_schema(request=SolveOpenSerializer, responses={201: SolveStateSerializer})
    def create(self, request, candidate_pk=None):
        """Start (or start over) your scratch workspace from the current revision's input files, or its reference solution."""
        data = validated(SolveOpenSerializer, request.data)
        candidate = self._candidate()
        try:
            solving.open_workspace(candidate, user=request.user, source=data["source"])
        except services.ReviewError as exc:
            return _error(exc)
        return self._state(candidate, status.HTTP_201_CREATED)

    @extend_schema(request=SolveFileSerializer, responses={200: SolveStateSerializer})
    @action(detail=False, methods=["post"])
    def files(self, request, candidate_pk=None):
        """Write a text file of your workspace, or delete one (delete: true)."""
        data = validated(SolveFileSerializer, request.data)
        candidate = self._candidate()
        try:
            if data["delete"]:
                solving.delete_file(candidate, user=request.user, path=data["path"])
            else:
                solving.write_file(candidate, user=request.user, path=data["path"], content=data["content"])
        except services.ReviewError as exc:
            return _error(exc)
        return self._state(candidate)

    @extend_schema(request=None, responses={202: JobRunSerializer})
    @action(detail=False, methods=["post"])
    def run(self, request, candidate_pk=None):
        """Run the current revision's checker on your workspace in the sandbox, as a review.solve job."""
        try:
            run = solving.start_run(self._candidate(), user=request.user)
        except services.ReviewError as exc:
            return _error(exc)
        except JobEngineError as exc:
            return Response({"detail": f"the run could not be started: {exc}"}, status=503)
        return Response(JobRunSerializer(run, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=SolveSaveSerializer, responses={201: SolveSavedSerializer})
    @action(detail=False, methods=["post"])
    def save(self, request, candidate_pk=None):
        """Save your workspace as the reference solution (a new revision, sanity-checked) once its latest run scored full marks."""
        data = validated(SolveSaveSerializer, request.data)
        candidate = self._candidate()
        base = candidate.task.revisions.filter(number=data["base_revision"]).first()
        if base is None:
            return Response({"detail": f"{candidate.task.external_id} has no revision {data['base_revision']}"}, 400)
        try:
            result = solving.save_solution(candidate, user=request.user, base_revision=base, reason=data["reason"])
        except (services.ReviewError, StaleRevisionError) as exc:
            return _error(exc)
        except JobEngineError as exc:
            return Response({"detail": f"saved, but its sanity check did not start: {exc}"}, status=503)
        body = {
            "revision": result.revision.number,
            "sanity_job": JobRunSerializer(result.sanity_run, context={"request": request}).data,
        }
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: SolveStateSerializer})
    @action(detail=False, methods=["post"])
    def discard(self, request, candidate_pk=None):
        """Throw your scratch workspace away."""
        candidate = self._candidate()
        try:
            solving.discard_workspace(candidate, user=request.user)
        except services.ReviewError as exc:
            return _error(exc)
        return self._state(candidate)


def register(router):
    router.register(r"candidates/(?P<candidate_pk>[0-9]+)/solve", SolveViewSet, basename="candidate-solve")
