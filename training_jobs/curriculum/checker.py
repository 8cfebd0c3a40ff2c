#!/usr/bin/env python3
"""Checker of a ClawGym curriculum task: does the workspace hold the answer reward/expected.json describes?

Shipped unchanged as every curriculum task's reward/check.py (one blob in the catalog); the task is in
reward/expected.json beside it ({"kind": ..., the answer}). Prints one JSON object of named sub-scores in [0, 1]
that reward.sh averages: each kind has two checks or more, so a near miss (the right text with a full stop, the
right lines in the wrong order) earns part, and only the right answer earns 1.0. A missing or unreadable output
scores 0 on the checks that need it; nothing the agent left in the workspace makes this script raise. What a lazy
agent leaves (nothing, the untouched inputs, empty placeholders at the output paths) scores 0 on every check.

Standard library only: it runs under the sandbox's python3, outside the project.
"""

import json
import string
import sys
from pathlib import Path

NOISE = string.whitespace + string.punctuation.replace("_", "").replace("/", "")


def read(workspace: Path, path: str) -> str | None:
    """The file's text, or None when it is missing, a folder, a link out or unreadable."""
    target = workspace / path
    try:
        if target.is_symlink() or not target.is_file():
            return None
        return target.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
    except OSError:
        return None


def lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def exact(text: str | None, wanted: str) -> float:
    """1.0 when the file holds just `wanted` (surrounding whitespace and a final newline allowed)."""
    return float(text is not None and text.strip() == wanted.strip())


def close(text: str | None, wanted: str) -> float:
    """1.0 when the file holds `wanted` up to case, spacing, quotes and punctuation at either end."""
    if text is None:
        return 0.0
    return float(" ".join(text.split()).strip(NOISE).casefold() == " ".join(wanted.split()).casefold())


def tokens(text: str | None) -> list[str]:
    return [word.strip(NOISE).casefold() for word in (text or "").split()]


def check_write(ws, task):
    text = read(ws, task["path"])
    return {"text_close": close(text, task["text"]), "text_exact": exact(text, task["text"])}


def check_append(ws, task):
    found = lines(read(ws, task["path"]))
    added = bool(found) and found[-1] == task["new"]
    return {"line_added_last": float(added), "other_lines_kept": float(added and found[:-1] == task["lines"])}


def check_copy(ws, task):
    copied = exact(read(ws, task["target"]), task["text"])
    return {"copy_made": copied, "original_kept": copied * exact(read(ws, task["source"]), task["text"])}


def check_count(ws, task):
    text, number = read(ws, task["path"]), str(task["number"])
    return {"number_given": float(number in tokens(text)), "only_the_number": exact(text, number)}


def check_extract(ws, task):
    text, value = read(ws, task["path"]), task["value"]
    found = tokens(text)
    # The value among the words, and no other field's value: a copy of the whole input file earns nothing.
    copied = any(other.casefold() in found for other in task.get("other_values", []))
    return {"value_given": float(value.casefold() in found and not copied), "only_the_value": exact(text, value)}


def check_sort(ws, task):
    found, wanted = lines(read(ws, task["path"])), task["lines"]
    copied = found == task.get("unsorted")  # the input as it was: nothing was sorted
    return {"same_lines": float(sorted(found) == wanted and not copied), "in_order": float(found == wanted)}


def check_replace(ws, task):
    text = read(ws, task["path"])
    words = tokens(text)
    # An emptied file has no old word either: the new text must still be there for the first check to pay.
    gone = bool(words) and task["old"] not in words and len(words) == len(task["text"].split())
    return {"old_word_gone": float(gone), "text_right": exact(text, task["text"])}


def check_folder(ws, task):
    scores = {}
    for path, word in task["files"].items():
        text = read(ws, path)
        scores[path] = (close(text, word) + exact(text, word)) / 2
    return scores


CHECKS = {
    "write": check_write,
    "append": check_append,
    "copy": check_copy,
    "count": check_count,
    "extract": check_extract,
    "sort": check_sort,
    "replace": check_replace,
    "folder": check_folder,
}


def scores(workspace: Path, task: dict) -> dict[str, float]:
    return CHECKS[task["kind"]](workspace, task)


def main() -> None:
    here = Path(__file__).resolve().parent
    task = json.loads((here / "expected.json").read_text(encoding="utf-8"))
    json.dump(scores(here.parent, task), sys.stdout)
    print()


if __name__ == "__main__":
    main()
