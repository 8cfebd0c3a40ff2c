"""A rollout's folders on disk: where its attempt runs (held, so a killed worker's is found and removed), and its
final workspace rebuilt from its task's input files and the stored diff."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobs import scratch
from tasks.models import RevisionFile

from .models import Rollout, RolloutFile


@contextmanager
def attempt_folder(rollout: Rollout) -> Iterator[Path]:
    """A held scratch folder for one attempt's workspace and run dir, named after the rollout (jobs.scratch): when
    the worker dies inside, whoever finds the rollout lost removes it (remove_orphaned_folders)."""
    with scratch.scratch_folder(_label(rollout)) as folder:
        yield folder


def remove_orphaned_folders(rollout: Rollout) -> list[Path]:
    """Remove the rollout's attempt folders on this machine whose process is gone; a live one's are kept.

    Called before a lost attempt is marked failed, so that a rollout seen failed has no workspace left here.
    """
    return scratch.sweep(f"{_label(rollout)}-")


def attempt_folders(rollout: Rollout) -> list[Path]:
    """The rollout's attempt folders on this machine (held by a live attempt, or not yet swept)."""
    return scratch.folders(f"{_label(rollout)}-")


def _label(rollout: Rollout) -> str:
    return f"rollout-{rollout.pk}"


def final_workspace(rollout: Rollout) -> tuple[dict[str, bytes], dict[str, str], list[RolloutFile]]:
    """The final workspace rebuilt from the revision's input files and the stored diff:
    ({path: contents} of regular files, {path: link target} of symbolic links, [entries whose contents were not
    kept: too large or special files])."""
    files = {f.path: f.blob.content for f in rollout.revision.files_by_role(RevisionFile.Role.INPUT)}
    links: dict[str, str] = {}
    skipped: list[RolloutFile] = []
    for entry in rollout.files.select_related("blob"):
        files.pop(entry.path, None)
        links.pop(entry.path, None)
        if entry.change == RolloutFile.Change.DELETED or entry.kind == RolloutFile.Kind.DIR:
            continue
        if entry.kind == RolloutFile.Kind.FILE:
            files[entry.path] = entry.blob.content
        elif entry.kind == RolloutFile.Kind.SYMLINK:
            links[entry.path] = entry.target
        else:
            skipped.append(entry)
    return files, links, skipped


def write_final_workspace(rollout: Rollout, target) -> tuple[int, list[RolloutFile]]:
    """Write the final workspace under `target` (created); returns (files written, entries not written).

    Paths come from snapshots that never follow links, so none leads out of `target`; links are made last, so
    no file is ever written through one.
    """
    root = Path(target)
    root.mkdir(parents=True, exist_ok=True)
    files, links, skipped = final_workspace(rollout)
    for path, data in sorted(files.items()):
        destination = root / _relative(path)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
    for path, link_target in sorted(links.items()):
        destination = root / _relative(path)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.symlink_to(link_target)
    return len(files), skipped


def _relative(path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or "\0" in path or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"unsafe workspace path {path!r}")  # snapshots never produce one; refuse, never guess
    return path
