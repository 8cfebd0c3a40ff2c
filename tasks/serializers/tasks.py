"""Tasks, revisions and files as the API shows and accepts them.

Serializers only validate and present; every change goes through tasks.services.
"""

import base64
import binascii
from urllib.parse import urlencode

from django.db.models import Count, F
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.reverse import reverse
from rest_framework.settings import api_settings

from jobs.serializers import JobRunFilterSerializer
from lib.bounds import MAX_ID, TextRefused, check_json, check_text

from ..formats import FORMATS
from ..models import RevisionFile, SanityReport, Task, TaskRevision
from ..package import (
    DEFAULT_CHECKER_ENTRY,
    DEFAULT_CODE_WEIGHT,
    ROLES,
    PackageError,
    PackageFile,
    TaskPackage,
    validate_rubric,
)
from ..paths import TaskFileError, normalize_path
from ..services import validate_package
from .sanity import SanityReportSerializer

ENCODINGS = [("text", "UTF-8 text"), ("base64", "base64 (any bytes)")]
OUTCOMES = [("updated", "A new revision was made"), ("unchanged", "Content identical: no new revision")]


def _absolute(request, url: str) -> str:
    return request.build_absolute_uri(url) if request is not None else url


def revision_url(request, external_id: str, number: int) -> str:
    return reverse("task-revision-detail", kwargs={"task_external_id": external_id, "number": number}, request=request)


def file_content_url(request, external_id: str, number: int, role: str, path: str) -> str:
    url = reverse("task-revision-file-content", kwargs={"task_external_id": external_id, "number": number})
    return _absolute(request, f"{url}?{urlencode({'role': role, 'path': path})}")


# --- reading ---------------------------------------------------------------------------------------------


class RevisionFileSerializer(serializers.ModelSerializer):
    """One file of a revision; `content_url` downloads its bytes."""

    # Needs `size` annotated (see revision_files) and the revision in the context.

    size = serializers.IntegerField(read_only=True)
    sha256 = serializers.CharField(source="blob_id", read_only=True)
    content_url = serializers.SerializerMethodField(help_text="Raw content of this file.")

    class Meta:
        model = RevisionFile
        fields = ["role", "path", "size", "sha256", "content_url"]

    @extend_schema_field(OpenApiTypes.URI)
    def get_content_url(self, obj) -> str:
        revision = self.context["revision"]
        return file_content_url(
            self.context.get("request"), revision.task.external_id, revision.number, obj.role, obj.path
        )


class RevisionSummarySerializer(serializers.ModelSerializer):
    """A revision without its content."""

    # Needs `file_count` annotated.

    url = serializers.SerializerMethodField()
    parent = serializers.IntegerField(
        source="parent.number", read_only=True, allow_null=True, help_text="Parent revision number."
    )
    author = serializers.CharField(read_only=True, help_text="The person, or else the pipeline stage, that wrote it.")
    file_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = TaskRevision
        fields = ["number", "url", "parent", "author", "message", "content_hash", "file_count", "created_at"]

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj) -> str:
        return revision_url(self.context.get("request"), obj.task.external_id, obj.number)


class RevisionDetailSerializer(RevisionSummarySerializer):
    files = serializers.SerializerMethodField()
    sanity = serializers.SerializerMethodField()

    class Meta(RevisionSummarySerializer.Meta):
        fields = RevisionSummarySerializer.Meta.fields + [
            "instruction",
            "metadata",
            "entry_extra",
            "rubric",
            "code_weight",
            "checker_entry",
            "files",
            "sanity",
        ]

    @extend_schema_field(RevisionFileSerializer(many=True))
    def get_files(self, obj):
        files = revision_files(obj)
        return RevisionFileSerializer(files, many=True, context={**self.context, "revision": obj}).data

    @extend_schema_field(SanityReportSerializer(allow_null=True))
    def get_sanity(self, obj):
        report = SanityReport.latest_for(obj).first()
        return SanityReportSerializer(report, context=self.context).data if report else None


def revision_files(revision: TaskRevision):
    # The blob's size without loading its bytes: lists must not read megabytes of content.
    return revision.files.annotate(size=F("blob__size")).order_by("role", "path")


class RevisionChangeSerializer(RevisionDetailSerializer):
    """The revision a change produced (or the unchanged current one) and which of the two happened."""

    outcome = serializers.SerializerMethodField()

    class Meta(RevisionDetailSerializer.Meta):
        fields = ["outcome"] + RevisionDetailSerializer.Meta.fields

    @extend_schema_field(serializers.ChoiceField(choices=OUTCOMES))
    def get_outcome(self, obj) -> str:
        return self.context["outcome"]


class TaskListSerializer(serializers.ModelSerializer):
    """A task in a list: `current_revision` is its revision number."""

    # Needs `current_revision_number` annotated, so that a list never loads instructions.

    url = serializers.HyperlinkedIdentityField(view_name="task-detail", lookup_field="external_id")
    benchmark_category = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    current_revision = serializers.IntegerField(source="current_revision_number", read_only=True, allow_null=True)

    class Meta:
        model = Task
        fields = [
            "external_id",
            "url",
            "title",
            "status",
            "source",
            "benchmark_category",
            "current_revision",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class TaskDetailSerializer(TaskListSerializer):
    """A task with its current instruction and a summary of its current revision."""

    scenario_category = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    scenario_subcategory = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    instruction = serializers.SerializerMethodField(help_text="The current revision's instruction (null: none yet).")
    current_revision = serializers.SerializerMethodField()
    revisions_url = serializers.SerializerMethodField()

    class Meta(TaskListSerializer.Meta):
        fields = TaskListSerializer.Meta.fields + [
            "instruction",
            "scenario_category",
            "scenario_subcategory",
            "revisions_url",
        ]
        read_only_fields = fields

    def _current(self, obj) -> TaskRevision | None:
        if obj.current_revision_id is None:
            return None
        cache = self.context.setdefault("_current_revisions", {})
        if obj.current_revision_id not in cache:
            cache[obj.current_revision_id] = (
                TaskRevision.objects.filter(pk=obj.current_revision_id)
                .select_related("task", "parent", "author_user")
                .annotate(file_count=Count("files"))
                .get()
            )
        return cache[obj.current_revision_id]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_instruction(self, obj) -> str | None:
        revision = self._current(obj)
        return revision.instruction if revision else None

    @extend_schema_field(RevisionSummarySerializer(allow_null=True))
    def get_current_revision(self, obj):
        revision = self._current(obj)
        return RevisionSummarySerializer(revision, context=self.context).data if revision else None

    @extend_schema_field(OpenApiTypes.URI)
    def get_revisions_url(self, obj) -> str:
        return reverse(
            "task-revision-list", kwargs={"task_external_id": obj.external_id}, request=self.context.get("request")
        )


class TaskChangeSerializer(TaskDetailSerializer):
    """The task after a change, and whether its content changed (a new revision) or not."""

    outcome = serializers.SerializerMethodField()

    class Meta(TaskDetailSerializer.Meta):
        fields = ["outcome"] + TaskDetailSerializer.Meta.fields
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=OUTCOMES))
    def get_outcome(self, obj) -> str:
        return self.context["outcome"]


class ConflictSerializer(serializers.Serializer):
    """409: the change was made against a revision that is no longer current."""

    detail = serializers.CharField()
    base_revision = serializers.IntegerField(help_text="The revision the change was made against.")
    current_revision = serializers.IntegerField(help_text="The task's current revision.")


# --- writing ---------------------------------------------------------------------------------------------


def _validate_path(value: str) -> str:
    try:
        return normalize_path(value)
    except TaskFileError as exc:
        raise serializers.ValidationError(str(exc)) from None


def decode_content(content: str, encoding: str, path: str) -> bytes:
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError({"content": f"{path!r}: content is not valid base64"}) from None
    return content.encode("utf-8")


class FileContentSerializer(serializers.Serializer):
    """A file's content: UTF-8 text as is, or any bytes as base64."""

    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    encoding = serializers.ChoiceField(choices=ENCODINGS, default="text")


class FileInputSerializer(FileContentSerializer):
    role = serializers.ChoiceField(choices=ROLES, default="input", help_text="input: s0; reward: reward/ (checker).")
    path = serializers.CharField(trim_whitespace=False, help_text="Relative POSIX path inside the role's folder.")

    def validate_path(self, value):
        return _validate_path(value)

    def validate(self, attrs):
        data = decode_content(attrs["content"], attrs["encoding"], attrs["path"])
        return {"role": attrs["role"], "path": attrs["path"], "data": data}


class FilePutSerializer(FileContentSerializer):
    message = serializers.CharField(max_length=500, required=False, help_text="Defaults to 'Put ROLE/PATH'.")


class FileRefSerializer(serializers.Serializer):
    """Query parameters naming one file of a revision (paths hold slashes, so they are not path segments)."""

    role = serializers.ChoiceField(choices=ROLES)
    path = serializers.CharField(trim_whitespace=False, help_text="e.g. data/report.csv")
    message = serializers.CharField(
        max_length=500, required=False, help_text="DELETE only: the new revision's message."
    )

    def validate_path(self, value):
        return _validate_path(value)


def _bounded(check, value, what: str, setting: str):
    """A field's value within its size bound (lib.bounds), else a 400 on that field saying by how much."""
    try:
        return check(value, what, setting=setting)
    except TextRefused as exc:
        raise serializers.ValidationError(str(exc)) from None


def as_validation_error(exc: Exception) -> serializers.ValidationError:
    key = "files" if isinstance(exc, TaskFileError) else api_settings.NON_FIELD_ERRORS_KEY
    return serializers.ValidationError({key: [str(exc)]})


class TaskCreateSerializer(serializers.Serializer):
    external_id = serializers.CharField(max_length=200, help_text="Letters, digits, '.', '_', '-'.")
    instruction = serializers.CharField(trim_whitespace=False)
    metadata = serializers.DictField(required=False, default=dict)
    rubric = serializers.JSONField(
        required=False, default=list, help_text="List of rules: name, target_file, scores, weight."
    )
    code_weight = serializers.FloatField(
        min_value=0.0, max_value=1.0, default=DEFAULT_CODE_WEIGHT, help_text="λ: weight of the code score."
    )
    checker_entry = serializers.CharField(max_length=500, default=DEFAULT_CHECKER_ENTRY)
    status = serializers.ChoiceField(choices=Task.Status.choices, default=Task.Status.DRAFT)
    message = serializers.CharField(max_length=500, default="Created through the API")
    files = FileInputSerializer(many=True, required=False, default=list)

    def validate_instruction(self, value):
        return _bounded(check_text, value, "the instruction", "CLAWGYM_MAX_INSTRUCTION_BYTES")

    def validate_metadata(self, value):
        return _bounded(check_json, value, "the metadata", "CLAWGYM_MAX_METADATA_BYTES")

    def validate_rubric(self, value):
        _bounded(check_json, value, "the rubric", "CLAWGYM_MAX_RUBRIC_BYTES")
        try:
            return validate_rubric(value)
        except PackageError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        package = TaskPackage(
            external_id=attrs["external_id"],
            instruction=attrs["instruction"],
            metadata=attrs["metadata"],
            files=[PackageFile(path=f["path"], data=f["data"], role=f["role"]) for f in attrs["files"]],
            rubric=attrs["rubric"],
            code_weight=attrs["code_weight"],
            checker_entry=attrs["checker_entry"],
        )
        try:
            validate_package(package)
        except (PackageError, TaskFileError) as exc:
            raise as_validation_error(exc) from None
        return {"package": package, "status": attrs["status"], "message": attrs["message"]}


CONTENT_FIELDS = ("instruction", "metadata", "rubric", "code_weight", "checker_entry")


class TaskEditSerializer(serializers.Serializer):
    """PATCH body. Content fields make a new revision (and need `message`); `status` does not."""

    message = serializers.CharField(max_length=500, required=False, help_text="Required when content changes.")
    base_revision = serializers.IntegerField(
        min_value=1,
        max_value=MAX_ID,
        required=False,
        help_text="The revision you edited; 409 if it is no longer current.",
    )
    instruction = serializers.CharField(required=False, trim_whitespace=False)
    metadata = serializers.DictField(required=False)
    rubric = serializers.JSONField(required=False)
    code_weight = serializers.FloatField(min_value=0.0, max_value=1.0, required=False, help_text="λ")
    checker_entry = serializers.CharField(max_length=500, required=False)
    status = serializers.ChoiceField(choices=Task.Status.choices, required=False)

    def validate_instruction(self, value):
        return _bounded(check_text, value, "the instruction", "CLAWGYM_MAX_INSTRUCTION_BYTES")

    def validate_metadata(self, value):
        return _bounded(check_json, value, "the metadata", "CLAWGYM_MAX_METADATA_BYTES")

    def validate_rubric(self, value):
        _bounded(check_json, value, "the rubric", "CLAWGYM_MAX_RUBRIC_BYTES")
        try:
            return validate_rubric(value)
        except PackageError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        changes = [name for name in CONTENT_FIELDS if name in attrs]
        if not changes and "status" not in attrs:
            raise serializers.ValidationError(f"nothing to change: give status or any of {', '.join(CONTENT_FIELDS)}")
        if changes and not attrs.get("message", "").strip():
            raise serializers.ValidationError({"message": "say why: a message is required when content changes"})
        return attrs

    @property
    def content_changes(self) -> dict:
        return {name: self.validated_data[name] for name in CONTENT_FIELDS if name in self.validated_data}


class ImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="An archive of ClawGym task folders, or a ClawGym JSONL file.")
    format = serializers.ChoiceField(
        choices=sorted(FORMATS), required=False, help_text="Task format; detected from the file when omitted."
    )


class TaskFilterSerializer(serializers.Serializer):
    """Query parameters of the task list; wrong values are a 400, not an empty page."""

    category = serializers.SlugField(required=False, help_text="Benchmark category slug.")
    status = serializers.ChoiceField(choices=Task.Status.choices, required=False)
    source = serializers.ChoiceField(choices=Task.Source.choices, required=False)
    sanity = serializers.ChoiceField(
        choices=list(SanityReport.FILTERS.items()),
        required=False,
        help_text="By the latest sanity report of the current revision.",
    )
    lazy_above = serializers.FloatField(
        min_value=0.0,
        max_value=1.0,
        required=False,
        help_text="Tasks whose latest sanity report pays a lazy agent (empty, initial or scaffold workspace) more "
        "than this.",
    )

    def filter(self, queryset):
        data = self.validated_data
        if "category" in data:
            queryset = queryset.filter(benchmark_category__slug=data["category"])
        if "status" in data:
            queryset = queryset.filter(status=data["status"])
        if "source" in data:
            queryset = queryset.filter(source=data["source"])
        if "sanity" in data:
            queryset = SanityReport.filter_tasks(queryset, data["sanity"])
        if "lazy_above" in data:
            queryset = SanityReport.filter_lazy_above(queryset, data["lazy_above"])
        return queryset


class ImportFilterSerializer(JobRunFilterSerializer):
    kind = None  # the import list holds one kind only
