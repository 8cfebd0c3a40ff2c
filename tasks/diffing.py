"""What changed between two revisions of a task: instruction, settings, rubric and files.

Pure functions over two TaskRevisions (they read the revisions' files, nothing else). The diff page renders
the result; nothing here knows about requests or templates.
"""

import difflib
import json
from dataclasses import dataclass, field

from .models import Blob, RevisionFile, TaskRevision
from .viewers import decode_text, is_binary

# A diff longer than this is cut (with a note): a regenerated 10 MB CSV would otherwise make the page unusable.
MAX_DIFF_LINES = 2000
# Files above this size are compared by size and hash only.
MAX_DIFF_FILE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "add", "del", "ctx", "head"
    text: str


@dataclass
class FieldChange:
    name: str
    old: str | None  # None: the field did not exist before
    new: str | None  # None: the field was removed


@dataclass
class FileChange:
    role: str
    path: str
    status: str  # "added", "removed", "modified"
    old_size: int | None
    new_size: int | None
    lines: list[DiffLine] = field(default_factory=list)
    note: str = ""


@dataclass
class RevisionDiff:
    old: TaskRevision
    new: TaskRevision
    instruction: list[DiffLine]
    fields: list[FieldChange]
    files: list[FileChange]
    unchanged_files: int

    @property
    def is_empty(self) -> bool:
        return not (self.instruction or self.fields or self.files)


def diff_lines(old: str, new: str, old_name: str = "old", new_name: str = "new", context: int = 3) -> list[DiffLine]:
    """A unified diff of two texts as classified lines; empty when the texts are equal."""
    out = []
    raw = difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=context, lineterm="")
    for line in raw:
        if len(out) >= MAX_DIFF_LINES:
            out.append(DiffLine("hunk", f"… diff cut at {MAX_DIFF_LINES} lines"))
            break
        if line.startswith(("---", "+++")) and len(out) < 2:
            out.append(DiffLine("head", line))
        elif line.startswith("@@"):
            out.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            out.append(DiffLine("add", line))
        elif line.startswith("-"):
            out.append(DiffLine("del", line))
        else:
            out.append(DiffLine("ctx", line))
    return out


def _show(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_mapping(old: dict, new: dict, prefix: str) -> list[FieldChange]:
    """Changes key by key, named `prefix.key`, in key order."""
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if key in old and key in new and before == after:
            continue
        changes.append(
            FieldChange(
                f"{prefix}.{key}",
                _show(before) if key in old else None,
                _show(after) if key in new else None,
            )
        )
    return changes


def diff_rubric(old: list[dict], new: list[dict]) -> list[FieldChange]:
    """Rubric changes rule by rule (matched by name, in the new rubric's order, then the removed ones)."""
    before = {rule["name"]: rule for rule in old}
    after = {rule["name"]: rule for rule in new}
    changes = []
    for name, rule in after.items():
        if name not in before:
            changes.append(FieldChange(f"rubric rule “{name}”", None, _show(rule)))
        elif before[name] != rule:
            changes.append(FieldChange(f"rubric rule “{name}”", _show(before[name]), _show(rule)))
    for name, rule in before.items():
        if name not in after:
            changes.append(FieldChange(f"rubric rule “{name}”", _show(rule), None))
    if [r["name"] for r in old if r["name"] in after] != [r["name"] for r in new if r["name"] in before]:
        changes.append(FieldChange("rubric order", ", ".join(before), ", ".join(after)))
    return changes


def diff_fields(old: TaskRevision, new: TaskRevision) -> list[FieldChange]:
    changes = []
    if old.code_weight != new.code_weight:
        changes.append(FieldChange("λ (code weight)", _show(old.code_weight), _show(new.code_weight)))
    if old.checker_entry != new.checker_entry:
        changes.append(FieldChange("checker entry", old.checker_entry, new.checker_entry))
    changes += diff_mapping(old.metadata or {}, new.metadata or {}, "metadata")
    changes += diff_mapping(old.entry_extra or {}, new.entry_extra or {}, "entry")
    changes += diff_rubric(old.rubric or [], new.rubric or [])
    return changes


def _file_index(revision: TaskRevision) -> dict[tuple[str, str], RevisionFile]:
    # Sizes and hashes only: contents are loaded for the modified files alone.
    rows = revision.files.select_related("blob").only("role", "path", "blob__sha256", "blob__size")
    return {(f.role, f.path): f for f in rows}


def _contents(files: list[RevisionFile]) -> dict[str, bytes]:
    keys = {f.blob_id for f in files if f.blob.size <= MAX_DIFF_FILE_BYTES}
    return {b.sha256: b.content for b in Blob.objects.filter(sha256__in=keys)}


def diff_files(old: TaskRevision, new: TaskRevision) -> tuple[list[FileChange], int]:
    """Added, removed and modified files (role, then path order), and how many are unchanged."""
    before, after = _file_index(old), _file_index(new)
    changes = []
    modified = []
    unchanged = 0
    for key in sorted(set(before) | set(after)):
        role, path = key
        a, b = before.get(key), after.get(key)
        if a is None:
            changes.append(FileChange(role, path, "added", None, b.blob.size))
        elif b is None:
            changes.append(FileChange(role, path, "removed", a.blob.size, None))
        elif a.blob_id == b.blob_id:
            unchanged += 1
        else:
            change = FileChange(role, path, "modified", a.blob.size, b.blob.size)
            changes.append(change)
            modified.append((change, a, b))
    contents = _contents([f for _, a, b in modified for f in (a, b)])
    for change, a, b in modified:
        old_data, new_data = contents.get(a.blob_id), contents.get(b.blob_id)
        if old_data is None or new_data is None:
            change.note = "too large to compare line by line"
        elif is_binary(old_data) or is_binary(new_data):
            change.note = "binary file changed"
        else:
            name = f"{role_folder(change.role)}{change.path}"
            change.lines = diff_lines(
                decode_text(old_data), decode_text(new_data), f"r{old.number}/{name}", f"r{new.number}/{name}"
            )
            if not change.lines:
                change.note = "only the encoding or line endings changed"
    return changes, unchanged


def role_folder(role: str) -> str:
    return {"reward": "reward/", "solution": "solution/"}.get(role, "")


def diff_revisions(old: TaskRevision, new: TaskRevision) -> RevisionDiff:
    instruction = diff_lines(
        old.instruction, new.instruction, f"r{old.number}/instruction", f"r{new.number}/instruction"
    )
    files, unchanged = diff_files(old, new)
    return RevisionDiff(old, new, instruction, diff_fields(old, new), files, unchanged)
