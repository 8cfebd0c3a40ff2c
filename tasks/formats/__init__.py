"""Task exchange formats, by name. See base.TaskFormat for the interface.

get_format("clawgym")        # ClawGym task folders (import and export)
get_format("clawgym-jsonl")  # ClawGym JSONL, one task a line (import and export)
get_format("pinchbench")     # PinchBench task markdown (import only)
detect_format(path)          # the format of a folder or file when none was named
"""

from pathlib import Path

from .base import FormatError, ReadFailure, TaskFormat
from .clawgym import ClawGymFolder
from .jsonl import ClawGymJsonl
from .pinchbench import PinchBench

FORMATS: dict[str, TaskFormat] = {f.name: f for f in (ClawGymFolder(), ClawGymJsonl(), PinchBench())}
EXPORT_FORMATS = tuple(name for name, f in FORMATS.items() if f.can_export)


def get_format(name: str) -> TaskFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise FormatError(f"unknown task format {name!r}; choose one of {', '.join(FORMATS)}") from None


def detect_format(path: Path) -> TaskFormat:
    """The format of `path` (a folder or a .jsonl file), or FormatError saying what was expected."""
    path = Path(path)
    # A task folder (or a folder of them) is the most specific shape; a PinchBench folder may hold
    # other files too; a folder holding .jsonl files comes last.
    for name in ("clawgym", "pinchbench", "clawgym-jsonl"):
        if FORMATS[name].sniff(path):
            return FORMATS[name]
    raise FormatError(
        f"cannot tell the task format of {path.name!r}: expected a ClawGym task folder (with data_entry.json), "
        "a folder of them, a .jsonl file, or a PinchBench folder with tasks/*.md; name the format to be sure"
    )


def locate_tasks(path: Path, fmt: TaskFormat | None = None) -> tuple[Path, TaskFormat]:
    """The folder (or file) to read and its format: `fmt` when given, else the detected one.

    Archives and hand-made folders often wrap everything in one top folder (`tar czf x.tgz batch/`):
    while `path` is not recognised and holds a single folder, look inside it.
    """
    path = Path(path)
    while True:
        if fmt is not None and fmt.sniff(path):
            return path, fmt
        if fmt is None:
            try:
                return path, detect_format(path)
            except FormatError:
                pass
        inner = _single_folder(path)
        if inner is None:
            return path, fmt or detect_format(path)
        path = inner


def _single_folder(path: Path) -> Path | None:
    if not path.is_dir():
        return None
    entries = [e for e in path.iterdir() if not e.name.startswith(".") and e.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return None


__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "FormatError",
    "ReadFailure",
    "TaskFormat",
    "detect_format",
    "get_format",
    "locate_tasks",
]
