"""Every state change of the catalog. Views, the API, commands and jobs call these; nothing else writes."""

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from lib.bounds import TextRefused, check_chars, check_json, check_text

from .models import BenchmarkCategory, Blob, RevisionFile, ScenarioCategory, ScenarioSubcategory, Task, TaskRevision
from .package import (
    LAYOUT_KEY,
    ROLES,
    PackageError,
    PackageFile,
    TaskPackage,
    validate_code_weight,
    validate_rubric,
)
from .paths import TaskFileError, normalize_path, validate_files

CHECKER_ENTRY_CHARS = TaskRevision._meta.get_field("checker_entry").max_length
# Task ids become folder names on export: keep them to a portable character set.
_EXTERNAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class SaveOutcome(str, Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass
class SaveResult:
    task: Task
    revision: TaskRevision
    outcome: SaveOutcome


def validate_package(package: TaskPackage) -> TaskPackage:
    """Check a package completely before anything is written. Raises PackageError / TaskFileError."""
    if not isinstance(package.external_id, str) or not _EXTERNAL_ID.match(package.external_id):
        raise PackageError(
            f"task id {package.external_id!r} must be 1-200 characters of letters, digits, '.', '_' or '-'"
            " and start with a letter or digit"
        )
    if not isinstance(package.instruction, str) or not package.instruction.strip():
        raise PackageError("the instruction (user_query) is empty")
    if not isinstance(package.metadata, dict):
        raise PackageError("metadata must be an object")
    if not isinstance(package.entry_extra, dict):
        raise PackageError("extra entry fields must be an object")
    if not isinstance(package.checker_entry, str) or not package.checker_entry.strip():
        raise PackageError("the checker entry command is empty")
    try:
        check_text(package.instruction, "the instruction", setting="CLAWGYM_MAX_INSTRUCTION_BYTES")
        check_json(package.metadata, "the metadata", setting="CLAWGYM_MAX_METADATA_BYTES")
        check_json(package.entry_extra, "the extra entry data", setting="CLAWGYM_MAX_METADATA_BYTES")
        check_json(package.rubric, "the rubric", setting="CLAWGYM_MAX_RUBRIC_BYTES")
        check_chars(package.checker_entry, "the checker entry command", CHECKER_ENTRY_CHARS)
        check_text(package.checker_entry, "the checker entry command", setting="CLAWGYM_MAX_NOTE_BYTES")
    except TextRefused as exc:
        raise PackageError(str(exc)) from None
    for f in package.files:
        if f.role not in ROLES:
            raise TaskFileError(f.path, f"unknown file role {f.role!r}")
    validate_files((f.role, f.path, f.data) for f in package.files)
    package.rubric = validate_rubric(package.rubric)
    package.code_weight = validate_code_weight(package.code_weight)
    return package


def _lookup(model, value, **extra):
    if not value or not isinstance(value, str):
        return None
    return model.objects.filter(Q(slug__iexact=value) | Q(name__iexact=value), **extra).first()


def _categories(metadata: dict) -> dict:
    benchmark = _lookup(BenchmarkCategory, metadata.get("category"))
    scenario = _lookup(ScenarioCategory, metadata.get("scenario_category"))
    sub = _lookup(ScenarioSubcategory, metadata.get("scenario_subcategory"), category=scenario) if scenario else None
    return {"benchmark_category": benchmark, "scenario_category": scenario, "scenario_subcategory": sub}


def _title(instruction: str) -> str:
    first = instruction.strip().splitlines()[0] if instruction.strip() else ""
    return first[:197] + "…" if len(first) > 200 else first


def store_blobs(datas: list[bytes]) -> dict[str, Blob]:
    """Store contents once each (content-addressed) and return {sha256: Blob}."""
    by_key = {Blob.digest(d): d for d in datas}
    existing = set(Blob.objects.filter(sha256__in=by_key).values_list("sha256", flat=True))
    missing = [Blob(sha256=k, size=len(d), data=d) for k, d in by_key.items() if k not in existing]
    if missing:
        Blob.objects.bulk_create(missing, ignore_conflicts=True)
    return {k: Blob(sha256=k, size=len(d)) for k, d in by_key.items()}


def _write_revision(
    task: Task, package: TaskPackage, content_hash: str, *, user, stage: str, message: str
) -> TaskRevision:
    parent = task.current_revision
    last = task.revisions.order_by("-number").values_list("number", flat=True).first() or 0
    revision = TaskRevision.objects.create(
        task=task,
        number=last + 1,
        instruction=package.instruction,
        metadata=package.metadata,
        entry_extra=package.entry_extra,
        checker_entry=package.checker_entry,
        rubric=package.rubric,
        code_weight=package.code_weight,
        parent=parent,
        author_user=user if user is not None and user.is_authenticated else None,
        author_stage=stage,
        message=message[:500],
        content_hash=content_hash,
    )
    blobs = store_blobs([f.data for f in package.files])
    RevisionFile.objects.bulk_create(
        RevisionFile(revision=revision, path=f.path, role=f.role, blob=blobs[Blob.digest(f.data)])
        for f in package.files
    )
    task.current_revision = revision
    task.title = _title(package.instruction)
    for name, value in _categories(package.metadata).items():
        setattr(task, name, value)
    task.updated_at = timezone.now()
    task.save()
    return revision


def save_package(
    package: TaskPackage,
    *,
    user=None,
    stage: str = "",
    message: str = "",
    source: str = Task.Source.IMPORTED,
    status: str = Task.Status.READY,
) -> SaveResult:
    """Create the task or add a revision to it; identical content creates nothing.

    Atomic: on any error nothing of this task is written. `source`/`status` apply to new tasks only.
    """
    validate_package(package)
    content_hash = package.content_hash()
    for attempt in range(2):
        try:
            with transaction.atomic():
                task = (
                    Task.objects.select_for_update(of=("self",))
                    .select_related("current_revision")
                    .filter(external_id=package.external_id)
                    .first()
                )
                if task is None:
                    task = Task.objects.create(external_id=package.external_id, source=source, status=status)
                    outcome = SaveOutcome.CREATED
                else:
                    kept = _with_other_layouts(package, task.current_revision)
                    if kept is not package:  # hashed again only when it took records over
                        package, content_hash = kept, kept.content_hash()
                    if task.current_revision and task.current_revision.content_hash == content_hash:
                        return SaveResult(task, task.current_revision, SaveOutcome.UNCHANGED)
                    outcome = SaveOutcome.UPDATED
                parent = task.current_revision
                revision = _write_revision(task, package, content_hash, user=user, stage=stage, message=message)
                if parent is not None and _checker_change_hook and checker_state(parent) != checker_state(revision):
                    _checker_change_hook(revision, user=user)
                return SaveResult(task, revision, outcome)
        except IntegrityError:
            # Two importers created the same new task at once: the second retries as an update.
            if attempt:
                raise
    raise AssertionError("unreachable")


# --- after a checker change ------------------------------------------------------------------------------------

_checker_change_hook: Callable[..., None] | None = None


def register_checker_change(hook: Callable[..., None]) -> None:
    """Name the function save_package calls, inside its transaction, with every new revision whose checker differs
    from its parent's (`hook(revision, user=...)`), whatever path made it: the review's editors, the task API, an
    import. review.rediagnosis.after_checker_change, registered by review's AppConfig (tasks may not import review),
    sanity-checks and re-diagnoses the task's open candidates once the transaction commits."""
    global _checker_change_hook
    _checker_change_hook = hook


def checker_state(revision: TaskRevision) -> tuple:
    """What makes a revision's checker: its entry command and its reward files' contents (comparable)."""
    return revision.checker_entry, sorted(revision.files.filter(role="reward").values_list("path", "blob_id"))


def _with_other_layouts(package: TaskPackage, revision: TaskRevision | None) -> TaskPackage:
    """The package with the layout records (LAYOUT_KEY) the current revision keeps that the package has none of. A
    record is how one format's source spelled the task; reading the task in another format says nothing of it. So
    a task exported as JSONL and imported back, unchanged, stays the revision it was (its folder's spelling kept).
    A record no longer describing the task is harmless: a writer uses one only while it does."""
    kept = (revision.entry_extra or {}).get(LAYOUT_KEY) if revision is not None else None
    if not isinstance(kept, dict) or not kept:
        return package
    incoming = package.entry_extra.get(LAYOUT_KEY)
    incoming = incoming if isinstance(incoming, dict) else {}
    merged = {**kept, **incoming}
    if merged == incoming:
        return package
    return replace(package, entry_extra={**package.entry_extra, LAYOUT_KEY: merged})


def package_from_revision(revision: TaskRevision) -> TaskPackage:
    files = [
        PackageFile(path=f.path, data=f.blob.content, role=f.role)
        for f in revision.files.select_related("blob").order_by("role", "path")
    ]
    return TaskPackage(
        external_id=revision.task.external_id,
        instruction=revision.instruction,
        metadata=dict(revision.metadata),
        files=files,
        rubric=list(revision.rubric),
        code_weight=revision.code_weight,
        checker_entry=revision.checker_entry,
        entry_extra=dict(revision.entry_extra),
    )


_UNSET = object()


def revise_task(
    task: Task,
    *,
    user,
    message: str,
    instruction=_UNSET,
    metadata=_UNSET,
    rubric=_UNSET,
    code_weight=_UNSET,
    checker_entry=_UNSET,
    file_changes: dict[tuple[str, str], bytes | None] | None = None,
    base_revision: TaskRevision | None = None,
) -> SaveResult:
    """Make a new revision from the current one with the given changes.

    `file_changes` maps (role, path) to new bytes, or to None to delete the file. When `base_revision` is
    given and is no longer current, the edit was made against a stale view and is refused.
    """
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        current = task.current_revision
        if current is None:
            raise PackageError("the task has no revision to change")
        if base_revision is not None and base_revision.pk != current.pk:
            raise StaleRevisionError(task, base_revision, current)
        package = package_from_revision(current)
        if instruction is not _UNSET:
            package.instruction = instruction
        if metadata is not _UNSET:
            package.metadata = metadata
        if rubric is not _UNSET:
            package.rubric = rubric
        if code_weight is not _UNSET:
            package.code_weight = code_weight
        if checker_entry is not _UNSET:
            package.checker_entry = checker_entry
        if file_changes:
            files = {(f.role, f.path): f for f in package.files}
            for (role, path), data in file_changes.items():
                path = normalize_path(path)
                if data is None:
                    if (role, path) not in files:
                        raise TaskFileError(path, f"no {role} file with this path to delete")
                    del files[(role, path)]
                else:
                    files[(role, path)] = PackageFile(path=path, data=bytes(data), role=role)
            package.files = list(files.values())
        return save_package(package, user=user, message=message, stage="" if user else "api")


class StaleRevisionError(Exception):
    def __init__(self, task, base, current):
        self.task, self.base, self.current = task, base, current
        super().__init__(
            f"{task.external_id} changed since you loaded it (you edited r{base.number}, current is r{current.number})"
        )


def set_task_status(task: Task, status: str, *, user) -> Task:
    if status not in Task.Status.values:
        raise ValueError(f"unknown status {status!r}")
    Task.objects.filter(pk=task.pk).update(status=status, updated_at=timezone.now())
    task.refresh_from_db()
    return task


class TaskExistsError(Exception):
    def __init__(self, external_id: str):
        self.external_id = external_id
        super().__init__(f"a task with the id {external_id!r} already exists")


def create_task(
    package: TaskPackage,
    *,
    user,
    message: str = "",
    stage: str = "",
    source: str = Task.Source.MANUAL,
    status: str = Task.Status.DRAFT,
) -> SaveResult:
    """Create a new task with its first revision. An id already in use raises TaskExistsError.

    Unlike save_package (made for imports, where the same id means "a new revision of that task"),
    creating by hand must never quietly revise someone else's task.
    """
    with transaction.atomic():
        result = save_package(package, user=user, stage=stage, message=message, source=source, status=status)
        if result.outcome != SaveOutcome.CREATED:
            # Rolls back the revision save_package may just have added to the existing task.
            raise TaskExistsError(package.external_id)
        return result


def delete_task(task: Task, *, user) -> None:
    """Delete a task with all its revisions. Blobs stay (other revisions and snapshots may share them).

    Raises django.db.models.ProtectedError when something still pins one of its revisions.
    """
    task.delete()
