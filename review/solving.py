"""A reviewer's own solve of a candidate, in the browser: a scratch workspace, the checker run on it, and a workspace
that scores full marks saved as the task's reference solution. Also what the editors need: several parts saved as
one revision, Python's syntax checked before a save, and a check's name traced to the checker lines that set it (a
save that changes the checker starts a diagnosis, as every path that changes it does: review.rediagnosis).

A scratch workspace belongs to one reviewer and one candidate. It is no model: it lives on disk, under the scratch
root (jobs.scratch) in `solve-workspaces/c<candidate>-u<user>/`, as `manifest.json` ({"revision": the revision it
started from, "source", "files": {path: sha256}}) beside the contents, stored once each under `blobs/`. Every
change rewrites the manifest atomically under a lock, so two tabs never leave half a change. Bounded: MAX_FILES
files, MAX_BYTES in all, MAX_WORKSPACES per reviewer (opening one more is refused, naming those to discard).

Running the checker stores the files as Blobs and queues SOLVE_JOB on the sandbox queue with the manifest; the worker
builds the workspace from the blobs in a held scratch folder (so a worker on another host runs it too) and runs the
current revision's checker on it (tasks.verification.run_checker, as the sanity check does). The run's result is the
job's result. "Save as solution" needs the latest run of this very workspace, on the current revision, to have
scored full marks; it writes the files that differ from the input files as the solution files (and removes the old
ones) in one new revision, through the same path as an edit: a FIX decision and a new sanity check.
"""

from __future__ import annotations

import ast
import fcntl
import io
import json
import os
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

import jobs
from accounts.roles import REVIEWER, has_role
from jobs.models import JobRun
from jobs.scratch import ScratchError, remove_tree, scratch_folder, scratch_root
from sandbox import Workspace
from tasks.job_kinds import SANITY_JOB
from tasks.models import Blob, Task, TaskRevision
from tasks.package import PackageError
from tasks.paths import TaskFileError, normalize_path
from tasks.sanity import SOLVED_SCORE  # full marks, up to float noise, as a sanity check counts a solution
from tasks.services import SaveOutcome, revise_task
from tasks.verification import CheckerSpec, run_checker

from . import edits, services
from .job_kinds import SOLVE_JOB
from .models import BenchmarkCandidate, SavedSolve

FOLDER = "solve-workspaces"
MAX_FILES = 200
MAX_BYTES = 8 * 1024 * 1024  # all files of one workspace together
MAX_WORKSPACES = 10  # per reviewer
SOURCES = ("initial", "solution")


class SolveError(services.ReviewError):
    """The solve action is refused; the message says why."""


# --- the scratch workspace -------------------------------------------------------------------------------------


@dataclass
class SolveWorkspace:
    """One reviewer's scratch workspace of one candidate, on disk."""

    root: Path
    revision: int  # the number of the revision whose files it started from
    source: str
    files: dict[str, str]  # path -> sha256

    @property
    def size(self) -> int:
        return sum((self.root / "blobs" / sha).stat().st_size for sha in set(self.files.values()))

    def read(self, path: str) -> bytes:
        sha = self.files.get(path)
        if sha is None:
            raise SolveError(f"the workspace has no file {path}")
        return (self.root / "blobs" / sha).read_bytes()

    def contents(self) -> dict[str, bytes]:
        return {path: self.read(path) for path in sorted(self.files)}


def _folder(candidate, user) -> Path:
    try:
        root = scratch_root()
    except (ScratchError, OSError) as exc:
        raise SolveError(f"scratch workspaces are unavailable on this server: {exc}") from None
    return root / FOLDER / f"c{candidate.pk}-u{user.pk}"


def _load(root: Path) -> SolveWorkspace | None:
    try:
        data = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return SolveWorkspace(root, int(data["revision"]), data.get("source", "initial"), dict(data["files"]))


def workspace(candidate, user) -> SolveWorkspace | None:
    """The reviewer's workspace of this candidate, or None when they have none open."""
    if not getattr(user, "pk", None):
        return None
    try:
        return _load(_folder(candidate, user))
    except SolveError:
        return None  # the page still shows; opening one says why it cannot


class _Locked:
    """flock on the workspace folder's lock file while a change is written."""

    def __init__(self, root: Path):
        self.root = root

    def __enter__(self):
        self.root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # the workspace itself: only opening makes it
        self.fd = os.open(self.root.parent / f"{self.root.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_exc):
        os.close(self.fd)


def _save_manifest(root: Path, revision: int, source: str, files: dict[str, str]) -> SolveWorkspace:
    temporary = root / "manifest.json.new"
    temporary.write_text(json.dumps({"revision": revision, "source": source, "files": files}, sort_keys=True))
    os.replace(temporary, root / "manifest.json")
    # Blobs no file names any more go; the others stay (content-addressed, so a rename costs nothing).
    wanted = set(files.values())
    for blob in (root / "blobs").iterdir():
        if blob.name not in wanted:
            blob.unlink(missing_ok=True)
    return SolveWorkspace(root, revision, source, files)


def _put_blob(root: Path, data: bytes) -> str:
    sha = Blob.digest(data)
    target = root / "blobs" / sha
    if not target.exists():
        temporary = root / "blobs" / f".{sha}.new"
        temporary.write_bytes(data)
        os.replace(temporary, target)
    return sha


def _bounded(files: dict[str, bytes]) -> None:
    if len(files) > MAX_FILES:
        raise SolveError(f"a scratch workspace holds at most {MAX_FILES} files ({len(files)} asked)")
    total = sum(len(data) for data in files.values())
    if total > MAX_BYTES:
        raise SolveError(
            f"a scratch workspace holds at most {MAX_BYTES // (1024 * 1024)} MiB in all "
            f"({total / (1024 * 1024):.1f} MiB asked): remove or shorten files"
        )


def _check_paths(files) -> None:
    """A file where another file needs a folder cannot be materialised: refuse it, naming both."""
    names = set(files)
    for path in names:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in names:
                raise SolveError(f"{path} needs a folder {folder}/, but {folder} is a file in the workspace")


def _require_reviewer(user, candidate) -> None:
    if not has_role(user, REVIEWER):
        raise services.NotAllowed("solving a candidate in the browser needs the reviewer role")
    if candidate.status not in BenchmarkCandidate.OPEN:
        raise SolveError(f"the candidate is already {candidate.get_status_display().lower()}")


def open_workspace(candidate, *, user, source: str = "initial") -> SolveWorkspace:
    """Start (or start over) the reviewer's workspace from the current revision: its input files, and with
    source="solution" its reference solution applied over them."""
    _require_reviewer(user, candidate)
    if source not in SOURCES:
        raise SolveError(f"start from one of {', '.join(SOURCES)}, not {source!r}")
    root = _folder(candidate, user)
    if _load(root) is None:
        others = [p for p in root.parent.glob(f"c*-u{user.pk}") if p.is_dir() and _load(p)]
        if len(others) >= MAX_WORKSPACES:
            names = ", ".join(f"candidate #{p.name.split('-')[0][1:]}" for p in sorted(others))
            raise SolveError(
                f"you have {len(others)} scratch workspaces open, the most one reviewer may keep: discard one first "
                f"({names})"
            )
    revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    wanted = {"input": {}, "solution": {}}
    for f in revision.files.exclude(role="reward").select_related("blob"):
        wanted[f.role][f.path] = f.blob.content
    if source == "solution" and not wanted["solution"]:
        raise SolveError(f"r{revision.number} has no reference solution to start from")
    files = wanted["input"] | (wanted["solution"] if source == "solution" else {})
    _bounded(files)
    with _Locked(root):
        (root / "blobs").mkdir(parents=True, exist_ok=True, mode=0o700)
        shas = {path: _put_blob(root, data) for path, data in files.items()}
        return _save_manifest(root, revision.number, source, shas)


def _open(candidate, user) -> SolveWorkspace:
    found = workspace(candidate, user)
    if found is None:
        raise SolveError("open a scratch workspace first")
    return found


def clean_path(path: str) -> str:
    """A workspace path as task files have them (tasks.paths), or SolveError saying what is wrong with it."""
    try:
        return normalize_path((path or "").strip())
    except TaskFileError as exc:
        raise SolveError(f"bad file path {exc}") from None


def write_file(candidate, *, user, path: str, content, create: bool = False) -> SolveWorkspace:
    """Write one file of the workspace (text or bytes); `create` refuses to overwrite an existing one."""
    _require_reviewer(user, candidate)
    path = clean_path(path)
    data = content.encode() if isinstance(content, str) else bytes(content)
    root = _folder(candidate, user)
    with _Locked(root):
        found = _open(candidate, user)
        if create and path in found.files:
            raise SolveError(f"{path} exists already: edit it instead")
        files = {p: (data if p == path else None) for p in found.files} | {path: data}
        if len(files) > MAX_FILES:
            raise SolveError(f"a scratch workspace holds at most {MAX_FILES} files")
        sizes = {p: (len(data) if p == path else (root / "blobs" / found.files[p]).stat().st_size) for p in files}
        total = sum(sizes.values())
        if total > MAX_BYTES:
            raise SolveError(
                f"a scratch workspace holds at most {MAX_BYTES // (1024 * 1024)} MiB in all "
                f"({total / (1024 * 1024):.1f} MiB with this file)"
            )
        _check_paths(files)
        shas = dict(found.files) | {path: _put_blob(root, data)}
        return _save_manifest(root, found.revision, found.source, shas)


def delete_file(candidate, *, user, path: str) -> SolveWorkspace:
    _require_reviewer(user, candidate)
    root = _folder(candidate, user)
    with _Locked(root):
        found = _open(candidate, user)
        if path not in found.files:
            raise SolveError(f"the workspace has no file {path}")
        return _save_manifest(root, found.revision, found.source, {p: s for p, s in found.files.items() if p != path})


def discard_workspace(candidate, *, user) -> bool:
    """Remove the reviewer's workspace of this candidate; False when there was none."""
    root = _folder(candidate, user)
    if not root.exists():
        return False
    with _Locked(root):
        remove_tree(root)
    (root.parent / f"{root.name}.lock").unlink(missing_ok=True)
    return True


def changes_against(found: SolveWorkspace, revision: TaskRevision) -> dict[str, str]:
    """{path: "added" | "modified" | "deleted"}: the workspace against the revision's input files."""
    inputs = dict(revision.files.filter(role="input").values_list("path", "blob_id"))
    changes = {p: "deleted" for p in inputs if p not in found.files}
    for path, sha in found.files.items():
        if path not in inputs:
            changes[path] = "added"
        elif inputs[path] != sha:
            changes[path] = "modified"
    return dict(sorted(changes.items()))


# --- running the checker on it ---------------------------------------------------------------------------------


def runs(candidate, user):
    return JobRun.objects.filter(kind=SOLVE_JOB, params__candidate_id=candidate.pk, created_by=user).order_by("-id")


def start_run(candidate, *, user) -> JobRun:
    """Queue the current revision's checker on the reviewer's workspace (the sandbox queue); returns its JobRun.
    A run of the same files on the same revision already under way is returned instead of a second one."""
    _require_reviewer(user, candidate)
    found = _open(candidate, user)
    contents = found.contents()
    revision_id = candidate.task.current_revision_id
    active = runs(candidate, user).filter(status__in=JobRun.ACTIVE).first()
    if active is not None:
        if active.params.get("files") == found.files and active.params.get("revision_id") == revision_id:
            return active
        raise SolveError("a run of your workspace is under way: wait for it to finish, then run again")
    with transaction.atomic():
        for data in contents.values():
            Blob.store(data)
        return jobs.enqueue(
            SOLVE_JOB,
            created_by=user,
            queue="sandbox",
            candidate_id=candidate.pk,
            revision_id=revision_id,
            files=found.files,
        )


def run_solve(*, revision_id: int, files: dict[str, str]) -> dict:
    """The job's work: the checker of `revision_id` on a workspace of `files` ({path: blob sha}); its result."""
    revision = TaskRevision.objects.select_related("task").get(pk=revision_id)
    spec = CheckerSpec.from_revision(revision)
    blobs = {b.sha256: b.content for b in Blob.objects.filter(sha256__in=set(files.values()))}
    missing = sorted(p for p, sha in files.items() if sha not in blobs)
    if missing:
        raise SolveError(f"the workspace's files are gone from storage: {', '.join(missing[:5])}")
    with (
        scratch_folder("solve") as folder,
        Workspace.create({p: blobs[s] for p, s in files.items()}, base_dir=folder) as ws,
    ):
        result = run_checker(spec, ws, "", [])
    return {
        "revision": revision.number,
        "score": result.score,
        "status": str(result.status),
        "reason": result.reason,
        "subscores": result.subscores,
        "solved": result.ok and result.score >= SOLVED_SCORE,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "duration": round(result.duration, 3),
        "backend": result.backend,
        "isolated": result.isolated,
    }


def proof_run(candidate, user, found: SolveWorkspace | None = None) -> tuple[JobRun | None, str]:
    """(the run that lets this workspace be saved as the solution, "") or (None, why it cannot be saved yet)."""
    found = found or workspace(candidate, user)
    if found is None:
        return None, "open a scratch workspace first"
    latest = runs(candidate, user).first()
    current = candidate.task.current_revision_id
    if latest is None:
        return None, "run the checker on the workspace first"
    if latest.status in JobRun.ACTIVE:
        return None, "the checker is still running"
    if latest.status != JobRun.Status.SUCCEEDED or not latest.result:
        return None, "the last run failed: run the checker again"
    if latest.params.get("files") != found.files:
        return None, "the workspace changed since its last run: run the checker again"
    if latest.params.get("revision_id") != current:
        return None, "the task has a new revision since the last run: run the checker again"
    if not latest.result.get("solved"):
        return None, f"the last run scored {latest.result.get('score', 0):.2f}, not full marks"
    return latest, ""


def save_solution(candidate, *, user, base_revision: TaskRevision, reason: str = "") -> edits.EditResult:
    """Save the workspace as the task's reference solution: a new revision whose solution files are the files that
    differ from the input files (the old solution files not among them removed), with a FIX decision and a sanity
    check. Needs the latest run of this workspace, on the current revision, to have scored full marks."""
    _require_reviewer(user, candidate)
    found = _open(candidate, user)
    run, why = proof_run(candidate, user, found)
    if run is None:
        raise SolveError(f"cannot save it as the solution: {why}")
    revision = TaskRevision.objects.get(pk=candidate.task.current_revision_id)
    changes = changes_against(found, revision)
    deleted = [p for p, change in changes.items() if change == "deleted"]
    if deleted:
        raise SolveError(
            "a reference solution is laid over the input files and cannot delete any: restore " + ", ".join(deleted[:5])
        )
    wanted = {p for p, change in changes.items() if change != "deleted"}
    if not wanted:
        raise SolveError("the workspace is the initial workspace: there is no solution to save")
    existing = set(revision.files.filter(role="solution").values_list("path", flat=True))
    parts = [("solution", p, found.read(p)) for p in sorted(wanted)]
    parts += [("solution", p, None) for p in sorted(existing - wanted)]
    score = run.result["score"]
    message = f"review: reference solution from an in-browser solve ({len(wanted)} files, scored {score:.2f})"
    with transaction.atomic():
        result = save_parts(
            candidate, user=user, parts=parts, base_revision=base_revision, reason=reason, message=message
        )
        # So the proof of solvability names the reviewer's solve, not a solution of unknown origin.
        SavedSolve.objects.create(candidate=candidate, reviewer=user, revision=result.revision, run=run, score=score)
    return result


# --- several parts as one revision -----------------------------------------------------------------------------


def save_parts(
    candidate, *, user, parts, base_revision: TaskRevision, reason: str = "", message: str = ""
) -> edits.EditResult:
    """Several edits as one revision: `parts` is a list of (field, path, content) as edits.save_edit takes them
    (content None deletes a file). One FIX decision, one sanity check. A part that changed since `base_revision`
    raises StaleRevisionError; nothing is written then."""
    services._require(user, REVIEWER, "editing a candidate")
    services._note(reason, "the reason")
    if not parts:
        raise SolveError("nothing to save: no part was edited")
    keyed = {}
    for field, path, content in parts:
        path, changes, label = edits.edit_changes(field, path, content)
        if (field, path) in keyed:
            raise SolveError(f"{label} is given twice")
        keyed[(field, path)] = (changes, label)
    with transaction.atomic():
        edits.require_own_claim(candidate, user)
        task = Task.objects.select_for_update(of=("self",)).select_related("current_revision").get(pk=candidate.task_id)
        current = task.current_revision
        if base_revision.task_id != task.pk:
            raise SolveError("the base revision belongs to another task")
        base = current
        for field, path in keyed:
            if edits.base_for(current, base_revision, field, path).pk != current.pk:
                base = base_revision  # this part changed since: revise_task refuses, naming both revisions
        merged, labels = {"file_changes": {}}, []
        for changes, label in keyed.values():
            merged["file_changes"] |= changes.pop("file_changes", {})
            merged |= changes
            labels.append(label)
        if not merged["file_changes"]:
            del merged["file_changes"]
        if not message:
            message = "review: edit " + ", ".join(labels)
        if reason.strip():
            message += f": {reason.strip()}"
        try:
            result = revise_task(task, user=user, message=message[:2000], base_revision=base, **merged)
        except (PackageError, TaskFileError) as exc:
            raise SolveError(str(exc)) from None
        if result.outcome == SaveOutcome.UNCHANGED:
            raise SolveError(f"nothing to save: the parts are the same as in r{current.number}")
        decision = edits.record_fix(candidate, result.revision, user=user, reason=message)
        run = jobs.enqueue(SANITY_JOB, created_by=user, revision_id=result.revision.pk)
    return edits.EditResult(decision, result.revision, run)


# --- the editor's helpers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"


def check_syntax(path: str, text: str) -> SyntaxProblem | None:
    """Python's verdict on a .py file's text (None: it compiles, or it is not Python)."""
    if not path.endswith(".py"):
        return None
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return SyntaxProblem(exc.lineno or 1, exc.offset or 1, exc.msg or "invalid syntax")
    except ValueError as exc:  # e.g. a NUL byte
        return SyntaxProblem(1, 1, str(exc))
    return None


def _literal_lines(path: str, text: str, name: str) -> list[int]:
    """The lines of `text` where `name` appears as a whole string literal."""
    if path.endswith(".py"):
        found = []
        try:
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                if token.type == tokenize.STRING:
                    try:
                        value = ast.literal_eval(token.string)
                    except (ValueError, SyntaxError):
                        continue
                    if value == name:
                        found.append(token.start[0])
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass  # a file that does not tokenize: fall back to the plain search below
        else:
            return sorted(set(found))
    quoted = re.compile(r"""(["'])""" + re.escape(name) + r"\1")
    return [n for n, line in enumerate(text.splitlines(), 1) if quoted.search(line)]


def checker_texts(revision: TaskRevision) -> dict[str, str]:
    """The revision's checker files that are text, {path: text}, read in one query."""
    texts = {}
    for f in revision.files.filter(role="reward").select_related("blob").order_by("path"):
        data = f.blob.content
        if b"\0" not in data[:4096]:
            texts[f.path] = data.decode("utf-8", "replace")
    return texts


def check_lines(revision: TaskRevision, name: str, texts: dict[str, str] | None = None) -> list[tuple[str, list[int]]]:
    """Where the checker names the check `name` as a string literal: [(reward file path, [line numbers])].
    `texts`: the revision's checker_texts, when already read."""
    texts = checker_texts(revision) if texts is None else texts
    found = []
    for path, text in texts.items():
        lines = _literal_lines(path, text, name)
        if lines:
            found.append((path, lines))
    return found
