"""The task catalog over the API. Reads need the viewer role; see each view for writes.

    GET    /api/tasks/                     ?category=&status=&source=&search=&ordering=&page=
    POST   /api/tasks/                     admin: a new task (source manual) from instruction, metadata, files
    GET    /api/tasks/{id}/                with a summary of the current revision
    PATCH  /api/tasks/{id}/                reviewer: content changes make a new revision (message required;
                                           base_revision guards against concurrent edits: 409), status too
    DELETE /api/tasks/{id}/                admin
    POST   /api/tasks/{id}/sanity/         reviewer: sanity-check the current revision's checker: 202 + the job run
    GET    /api/tasks/{id}/revisions/[{n}/]   the detail includes the revision's latest sanity report
    GET    /api/tasks/{id}/revisions/{n}/files/
    GET    /api/tasks/{id}/revisions/{n}/files/content/?role=&path=    raw bytes
    PUT    (same)                          reviewer: new content (JSON: content, encoding, message) → new revision
    DELETE (same)                          reviewer: remove the file → new revision
    GET    /api/imports/[{id}/]            import job runs; POST (admin, multipart) starts one: 202
    GET    /api/category-proposals/[{id}/] ?status=&task=&category=   what a model proposed per task
    POST   /api/category-proposals/accept/        admin: {ids: [...]} each a new revision (stale ones rejected)
    POST   /api/category-proposals/{id}/edit/     admin: {category: slug} another category: a new revision
    POST   /api/category-proposals/{id}/reject/   admin: {note}
    POST   /api/category-proposals/categorize/    admin: {tasks?: [ids], endpoint?}: 202 + the job run

A file is named by query parameters rather than path segments because its path holds slashes. Changes to
files are accepted only against the current revision (n), so a stale view gets 409 instead of overwriting.
"""

from django.db import transaction
from django.db.models import Count, F, ProtectedError
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import filters, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from accounts.roles import ADMIN, REVIEWER
from jobs.api import JobRunReadViewSet
from jobs.engine import JobEngineError
from jobs.models import JobRun
from jobs.serializers import JobRunListSerializer, JobRunSerializer
from lib.api_filters import QueryFilterMixin, UnknownParametersFilter

from .categorizing import (
    CategorizingError,
    ProposalError,
    accept_proposals,
    edit_proposal,
    reject_proposal,
    start_categorization,
)
from .formats import FormatError
from .importing import start_upload_import
from .job_kinds import IMPORT_JOB
from .models import CategoryProposal, Task, TaskRevision
from .package import PackageError
from .paths import TaskFileError
from .sanity import start_sanity_check
from .serializers.categories import (
    CategorizeSerializer,
    CategoryProposalFilterSerializer,
    CategoryProposalSerializer,
    DecisionsSerializer,
    ProposalEditSerializer,
    ProposalIdsSerializer,
    ProposalRejectSerializer,
)
from .serializers.tasks import (
    ConflictSerializer,
    FilePutSerializer,
    FileRefSerializer,
    ImportFilterSerializer,
    ImportUploadSerializer,
    RevisionChangeSerializer,
    RevisionDetailSerializer,
    RevisionFileSerializer,
    RevisionSummarySerializer,
    TaskChangeSerializer,
    TaskCreateSerializer,
    TaskDetailSerializer,
    TaskEditSerializer,
    TaskFilterSerializer,
    TaskListSerializer,
    as_validation_error,
    decode_content,
    revision_files,
)
from .services import (
    SaveOutcome,
    StaleRevisionError,
    TaskExistsError,
    create_task,
    delete_task,
    revise_task,
    set_task_status,
)

# The same character set services accept for task ids ('.' included, so ids need the trailing slash).
EXTERNAL_ID_REGEX = r"[A-Za-z0-9][A-Za-z0-9._-]*"

CONFLICT = OpenApiResponse(ConflictSerializer, description="Made against a revision that is no longer current.")
DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField()})


def _conflict(exc: StaleRevisionError) -> Response:
    body = {"detail": str(exc), "base_revision": exc.base.number, "current_revision": exc.current.number}
    return Response(body, status=status.HTTP_409_CONFLICT)


def _outcome(result) -> str:
    return "unchanged" if result.outcome == SaveOutcome.UNCHANGED else "updated"


def _lock_current(task: Task, base: TaskRevision | None) -> None:
    """For changes that make no revision (status): refuse them too when made against a stale view."""
    locked = Task.objects.select_for_update().get(pk=task.pk)
    if base is not None and base.pk != locked.current_revision_id:
        raise StaleRevisionError(locked, base, locked.current_revision)


@extend_schema(tags=["tasks"])
class TaskViewSet(
    QueryFilterMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    lookup_field = "external_id"
    lookup_value_regex = EXTERNAL_ID_REGEX
    filter_backends = [UnknownParametersFilter, filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["external_id", "title"]
    filter_serializer_class = TaskFilterSerializer
    ordering_fields = ["external_id", "title", "status", "source", "created_at", "updated_at"]
    write_role = ADMIN
    write_roles = {"partial_update": REVIEWER, "sanity": REVIEWER}

    def get_queryset(self):
        return Task.objects.select_related("benchmark_category", "scenario_category", "scenario_subcategory").annotate(
            current_revision_number=F("current_revision__number")
        )

    def get_serializer_class(self):
        return TaskListSerializer if self.action == "list" else TaskDetailSerializer

    @extend_schema(parameters=[TaskFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=TaskCreateSerializer, responses={201: TaskDetailSerializer})
    def create(self, request, *args, **kwargs):
        """Create a task by hand (source `manual`): its first revision holds the given content."""
        form = TaskCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            result = create_task(data["package"], user=request.user, message=data["message"], status=data["status"])
        except TaskExistsError as exc:
            raise ValidationError({"external_id": [str(exc)]}) from None
        except (PackageError, TaskFileError) as exc:
            raise as_validation_error(exc) from None
        task = self.get_queryset().get(pk=result.task.pk)
        body = TaskDetailSerializer(task, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": body["url"]})

    @extend_schema(
        request=TaskEditSerializer,
        responses={200: TaskChangeSerializer, 409: CONFLICT},
        description="Content fields (instruction, metadata, rubric, code_weight, checker_entry) make a new "
        "revision whose parent is the current one; identical content makes none (outcome `unchanged`). "
        "`status` changes the task only. With `base_revision`, a task that moved on since is refused (409).",
    )
    def partial_update(self, request, *args, **kwargs):
        task = self.get_object()
        edit = TaskEditSerializer(data=request.data)
        edit.is_valid(raise_exception=True)
        base = self._base_revision(task, edit.validated_data.get("base_revision"))
        outcome = "unchanged"
        try:
            with transaction.atomic():
                if edit.content_changes:
                    result = revise_task(
                        task,
                        user=request.user,
                        message=edit.validated_data["message"],
                        base_revision=base,
                        **edit.content_changes,
                    )
                    outcome = _outcome(result)
                else:
                    _lock_current(task, base)
                if "status" in edit.validated_data:
                    set_task_status(task, edit.validated_data["status"], user=request.user)
        except StaleRevisionError as exc:
            return _conflict(exc)
        except (PackageError, TaskFileError) as exc:
            raise as_validation_error(exc) from None
        context = {**self.get_serializer_context(), "outcome": outcome}
        return Response(TaskChangeSerializer(self.get_object(), context=context).data)

    @extend_schema(responses={204: None, 409: OpenApiResponse(DETAIL, description="Something still uses the task.")})
    def destroy(self, request, *args, **kwargs):
        task = self.get_object()
        try:
            delete_task(task, user=request.user)
        except ProtectedError as exc:
            used_by = sorted({str(obj._meta.verbose_name) for obj in exc.protected_objects})
            return Response(
                {"detail": f"{task.external_id} cannot be deleted: still used by {', '.join(used_by)}"},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses={
            202: JobRunSerializer,
            409: OpenApiResponse(DETAIL, description="The task has no revision."),
            503: OpenApiResponse(DETAIL, description="The job engine refused it."),
        },
    )
    @action(detail=True, methods=["post"])
    def sanity(self, request, *args, **kwargs):
        """Sanity-check the current revision's checker in the background (sandbox queue): follow the job run.

        The report then shows as `sanity` in the revision's detail.
        """
        task = self.get_object()
        try:
            run = start_sanity_check(task, user=request.user)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        body = JobRunSerializer(run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @staticmethod
    def _base_revision(task: Task, number: int | None) -> TaskRevision | None:
        if number is None:
            return None
        base = task.revisions.filter(number=number).first()
        if base is None:
            current = task.current_revision.number if task.current_revision_id else None
            raise ValidationError(
                {"base_revision": [f"{task.external_id} has no revision r{number} (current is r{current})"]}
            )
        return base


class RawFileRenderer(BaseRenderer):
    """Lets clients ask for `Accept: application/octet-stream`. File bodies bypass renderers (plain
    HttpResponse); only error bodies reach this one, and they are sent as JSON."""

    media_type = "application/octet-stream"
    format = "raw"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data)


TASK_ID = OpenApiParameter(
    "task_external_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The task's external_id."
)
NUMBER = OpenApiParameter("number", OpenApiTypes.INT, OpenApiParameter.PATH, description="Revision number.")
FILE_REF = [
    OpenApiParameter("role", OpenApiTypes.STR, enum=["input", "reward", "solution"], required=True),
    OpenApiParameter(
        "path", OpenApiTypes.STR, required=True, description="Relative path, slashes allowed: data/report.csv"
    ),
]


@extend_schema(tags=["tasks"], parameters=[TASK_ID])
class RevisionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A task's immutable revisions, newest first, and their files."""

    lookup_field = "number"
    lookup_value_regex = r"[0-9]+"
    write_role = ADMIN
    write_roles = {"put_file_content": REVIEWER, "delete_file_content": REVIEWER}

    def get_task(self) -> Task:
        if not hasattr(self, "_task"):
            self._task = get_object_or_404(
                Task.objects.select_related("current_revision"), external_id=self.kwargs["task_external_id"]
            )
        return self._task

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no URL kwargs
            return TaskRevision.objects.none()
        queryset = (
            TaskRevision.objects.filter(task=self.get_task())
            .select_related("task", "parent", "author_user")
            .annotate(file_count=Count("files"))
            .order_by("-number")
        )
        if self.action == "list":
            queryset = queryset.defer("instruction", "metadata", "entry_extra", "rubric")
        return queryset

    def get_serializer_class(self):
        return RevisionSummarySerializer if self.action == "list" else RevisionDetailSerializer

    def get_renderers(self):
        if self.action == "file_content":
            return [JSONRenderer(), RawFileRenderer()]
        return super().get_renderers()

    @extend_schema(parameters=[NUMBER])
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(parameters=[NUMBER], responses=RevisionFileSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def files(self, request, *args, **kwargs):
        """Every file of the revision (role, path, size, sha256, content_url); never paginated (≤ 500)."""
        revision = self.get_object()
        context = {**self.get_serializer_context(), "revision": revision}
        return Response(RevisionFileSerializer(revision_files(revision), many=True, context=context).data)

    @extend_schema(
        parameters=[NUMBER, *FILE_REF],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The raw bytes."),
            (404, "application/json"): DETAIL,
        },
    )
    @action(detail=True, methods=["get"], url_path="files/content")
    def file_content(self, request, *args, **kwargs):
        """Download one file's raw bytes (always as an attachment: task files are untrusted)."""
        revision = self.get_object()
        ref = self._file_ref(request)
        found = revision.files.select_related("blob").filter(role=ref["role"], path=ref["path"]).first()
        if found is None:
            raise NotFound(self._missing(revision, ref))
        response = HttpResponse(found.blob.content, content_type="application/octet-stream")
        # Task files are untrusted (HTML, SVG...): a download, never rendered on this origin.
        # The name quoted (RFC 6266), or RFC 5987-encoded when it is not ASCII: a name is data, never header syntax.
        response["Content-Disposition"] = content_disposition_header(True, found.path.rsplit("/", 1)[-1])
        response["ETag"] = f'"{found.blob_id}"'
        return response

    @extend_schema(
        parameters=[NUMBER, *FILE_REF],
        request=FilePutSerializer,
        responses={200: RevisionChangeSerializer, 409: CONFLICT},
    )
    @file_content.mapping.put
    def put_file_content(self, request, *args, **kwargs):
        """Replace (or add) one file of the current revision: makes a new revision, or none if identical."""
        revision = self.get_object()
        ref = self._file_ref(request)
        body = FilePutSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = decode_content(body.validated_data["content"], body.validated_data["encoding"], ref["path"])
        message = body.validated_data.get("message") or f"Put {ref['role']}/{ref['path']}"
        return self._change_file(request, revision, ref, data, message)

    @extend_schema(
        parameters=[NUMBER, *FILE_REF, OpenApiParameter("message", OpenApiTypes.STR)],
        responses={200: RevisionChangeSerializer, 404: DETAIL, 409: CONFLICT},
    )
    @file_content.mapping.delete
    def delete_file_content(self, request, *args, **kwargs):
        """Remove one file of the current revision: makes a new revision."""
        revision = self.get_object()
        ref = self._file_ref(request)
        if not revision.files.filter(role=ref["role"], path=ref["path"]).exists():
            raise NotFound(self._missing(revision, ref))
        message = ref.get("message") or f"Deleted {ref['role']}/{ref['path']}"
        return self._change_file(request, revision, ref, None, message)

    def _change_file(self, request, revision, ref, data: bytes | None, message: str) -> Response:
        task = self.get_task()
        try:
            if revision.pk != task.current_revision_id:
                raise StaleRevisionError(task, revision, task.current_revision)
            result = revise_task(
                task,
                user=request.user,
                message=message,
                file_changes={(ref["role"], ref["path"]): data},
                base_revision=revision,
            )
        except StaleRevisionError as exc:
            return _conflict(exc)
        except (PackageError, TaskFileError) as exc:
            raise as_validation_error(exc) from None
        new = self.get_queryset().get(pk=result.revision.pk)
        context = {**self.get_serializer_context(), "outcome": _outcome(result)}
        return Response(RevisionChangeSerializer(new, context=context).data)

    @staticmethod
    def _file_ref(request) -> dict:
        ref = FileRefSerializer(data=request.query_params)
        ref.is_valid(raise_exception=True)
        return ref.validated_data

    @staticmethod
    def _missing(revision, ref) -> str:
        return f"r{revision.number} of {revision.task.external_id} has no {ref['role']} file {ref['path']!r}"


@extend_schema(tags=["imports"])
class ImportViewSet(JobRunReadViewSet):
    """Import job runs (kind tasks.import_upload). The finished run's `result` is the import report."""

    queryset = JobRun.objects.filter(kind=IMPORT_JOB).select_related("created_by")
    filter_serializer_class = ImportFilterSerializer
    parser_classes = [MultiPartParser, FormParser]
    write_role = ADMIN

    @extend_schema(parameters=[ImportFilterSerializer], responses=JobRunListSerializer(many=True))
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request={"multipart/form-data": ImportUploadSerializer},
        responses={202: JobRunSerializer, 503: OpenApiResponse(DETAIL, description="The job engine refused it.")},
    )
    def create(self, request, *args, **kwargs):
        """Upload tasks to import. The import runs in the background: follow the returned job run."""
        form = ImportUploadSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            run = start_upload_import(
                form.validated_data["file"], fmt=form.validated_data.get("format") or None, user=request.user
            )
        except FormatError as exc:
            raise ValidationError({"format": [str(exc)]}) from None
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        body = JobRunSerializer(run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


@extend_schema(tags=["tasks"])
class CategoryProposalViewSet(
    QueryFilterMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Benchmark categories a model proposed for tasks (tasks.categorizing), newest first, and the decisions on them.

    Deciding needs the admin role: accepting or editing sets the task's category as a new revision.
    """

    queryset = CategoryProposal.objects.select_related(
        "task", "revision", "category", "category_before", "decided_category", "decided_revision", "decided_by"
    )
    serializer_class = CategoryProposalSerializer
    filter_backends = [UnknownParametersFilter]
    filter_serializer_class = CategoryProposalFilterSerializer
    write_role = ADMIN

    @extend_schema(parameters=[CategoryProposalFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=ProposalIdsSerializer, responses={200: DecisionsSerializer})
    @action(detail=False, methods=["post"])
    def accept(self, request, *args, **kwargs):
        """Accept these proposals: each task gets a new revision with the proposed category. A proposal whose task's
        category changed since it was made is rejected instead (`rejected`, with the reason); decided or failed ones
        are left as they are (`skipped`)."""
        body = ProposalIdsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ids = list(dict.fromkeys(body.validated_data["ids"]))
        found = list(CategoryProposal.objects.filter(pk__in=ids).order_by("pk"))
        missing = sorted(set(ids) - {p.pk for p in found})
        if missing:
            raise ValidationError({"ids": [f"no such proposal: {', '.join(map(str, missing))}"]})
        return Response(accept_proposals(found, user=request.user).as_dict())

    @extend_schema(request=ProposalEditSerializer, responses={200: CategoryProposalSerializer, 409: DETAIL})
    @action(detail=True, methods=["post"])
    def edit(self, request, *args, **kwargs):
        """Set another category than the proposed one (or one for a failed proposal): a new revision; 409 when the
        proposal was decided already or went stale (the task's category changed since)."""
        proposal = self.get_object()
        body = ProposalEditSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            edit_proposal(proposal, body.validated_data["category"], user=request.user)
        except ProposalError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=ProposalRejectSerializer, responses={200: CategoryProposalSerializer, 409: DETAIL})
    @action(detail=True, methods=["post"])
    def reject(self, request, *args, **kwargs):
        """Decline the proposal; the task keeps its category. 409 when it was decided already."""
        proposal = self.get_object()
        body = ProposalRejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            reject_proposal(proposal, user=request.user, note=body.validated_data.get("note", ""))
        except ProposalError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        request=CategorizeSerializer,
        responses={
            202: JobRunSerializer,
            409: OpenApiResponse(DETAIL, description="No endpoint to ask, or nothing to categorize."),
            503: OpenApiResponse(DETAIL, description="The job engine refused it."),
        },
    )
    @action(detail=False, methods=["post"])
    def categorize(self, request, *args, **kwargs):
        """Ask a model for proposals in the background (one call per task): follow the returned job run."""
        body = CategorizeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            run = start_categorization(
                user=request.user, endpoint_name=data.get("endpoint"), task_ids=data.get("tasks")
            )
        except CategorizingError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except JobEngineError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        body = JobRunSerializer(run, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


def register(router):
    router.register("tasks", TaskViewSet, basename="task")
    router.register(
        rf"tasks/(?P<task_external_id>{EXTERNAL_ID_REGEX})/revisions", RevisionViewSet, basename="task-revision"
    )
    router.register("imports", ImportViewSet, basename="import")
    router.register("category-proposals", CategoryProposalViewSet, basename="category-proposal")
