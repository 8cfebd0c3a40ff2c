#!/usr/bin/env python3
"""Checker for meeting-notes-action-items: scores the action list and follow-up email for the 11 Mar sync.

Prints one JSON object of named sub-scores in [0, 1]. Standard library only; a missing or garbled output file
scores 0 on the checks that need it instead of raising.
"""

import csv
import io
import json
import re
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
ACTIONS_CSV = WORKSPACE / "actions" / "2025-03-11_launch-sync.csv"
EMAIL_MD = WORKSPACE / "actions" / "2025-03-11_followup-email.md"

HANDLES = {"dana.kim", "priya.raman", "marcus.chen", "jonas.weber", "sam.lee", "samantha.ortiz", "elena.petrova"}

# Each open action from the meeting: words that identify its row, its owner and its resolved due date.
EXPECTED = {
    "android_ticket": (("android", "photo picker", "photo-picker", "crash"), "jonas.weber", "2025-03-11"),
    "screenshots": (("screenshot",), "marcus.chen", "2025-03-14"),
    "release_notes": (("release note",), "dana.kim", "2025-03-17"),
    "legal_privacy": (("legal", "privacy"), "sam.lee", "2025-03-12"),
    "flaky_test": (("flaky", "ui test"), "marcus.chen", "2025-03-19"),
    "retro_room": (("retro",), "samantha.ortiz", "2025-03-18"),
}

# Items that were done in the meeting, done earlier, cancelled, or have no owner: none belongs in the list.
NOT_ACTIONS = (
    "survey",
    "push notification",
    "push-notification",
    "dashboard",
    "merged pr",
    "onboarding copy",
    "launch date",
    "consent screen",
)

OWNER_NAMES = ("Jonas Weber", "Marcus Chen", "Dana Kim", "Sam Lee", "Samantha Ortiz")
OWNER_HANDLES = ("jonas.weber", "marcus.chen", "dana.kim", "sam.lee", "samantha.ortiz")


def read_text(path):
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None


def read_rows():
    """The action rows as dicts with lower-cased, stripped keys; None if the file is missing or unusable."""
    text = read_text(ACTIONS_CSV)
    if text is None:
        return None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        return None
    header = [(name or "").strip().lower() for name in reader.fieldnames]
    # Exactly the columns the instruction asks for: last week's previous_actions.csv (it has a status column too)
    # copied into place is no action list.
    if sorted(header) != ["due", "id", "owner", "task"]:
        return None
    rows = []
    for raw in reader:
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if isinstance(v, str)}
        if any(row.values()):
            rows.append(row)
    return rows


def find_row(rows, words):
    for row in rows:
        task = row.get("task", "").lower()
        if any(w in task for w in words):
            return row
    return None


def owner_of(row):
    return row.get("owner", "").strip().lower().lstrip("@")


def check_csv_readable():
    # Readable means it holds actions: a header alone is not an action list. One row with an owner and a task
    # is enough here; whether they are the right ones is for the other checks.
    rows = read_rows()
    return bool(rows) and any(r.get("owner") and r.get("task") for r in rows)


def check_exactly_six_items():
    rows = read_rows()
    return rows is not None and len(rows) == 6


def check_owners_are_handles():
    rows = read_rows()
    return bool(rows) and all(owner_of(r) in HANDLES for r in rows)


def check_screenshots_reassigned():
    rows = read_rows() or []
    row = find_row(rows, EXPECTED["screenshots"][0])
    return row is not None and owner_of(row) == "marcus.chen" and row.get("due") == "2025-03-14"


def check_sams_disambiguated():
    rows = read_rows() or []
    legal = find_row(rows, EXPECTED["legal_privacy"][0])
    retro = find_row(rows, EXPECTED["retro_room"][0])
    return (
        legal is not None and owner_of(legal) == "sam.lee" and retro is not None and owner_of(retro) == "samantha.ortiz"
    )


def check_due_dates_resolved():
    rows = read_rows() or []
    right = 0
    for words, _owner, due in EXPECTED.values():
        row = find_row(rows, words)
        if row is not None and row.get("due") == due:
            right += 1
    return right / len(EXPECTED)


def check_carried_over_kept():
    rows = read_rows() or []
    row = find_row(rows, EXPECTED["flaky_test"][0])
    return row is not None and owner_of(row) == "marcus.chen" and row.get("due") == "2025-03-19"


def check_done_and_cancelled_excluded():
    rows = read_rows()
    if not rows:
        return 0.0
    return not any(any(word in r.get("task", "").lower() for word in NOT_ACTIONS) for r in rows)


def check_email_covers_owners():
    text = read_text(EMAIL_MD)
    if not text or not re.search(r"^\s*\**subject\**\s*:", text, re.IGNORECASE | re.MULTILINE):
        return 0.0
    lower = text.lower()
    named = sum(1 for name, handle in zip(OWNER_NAMES, OWNER_HANDLES) if name.lower() in lower or handle in lower)
    return named / len(OWNER_NAMES)


CHECKS = {
    "csv_readable": check_csv_readable,
    "exactly_six_items": check_exactly_six_items,
    "owners_are_handles": check_owners_are_handles,
    "screenshots_reassigned": check_screenshots_reassigned,
    "sams_disambiguated": check_sams_disambiguated,
    "due_dates_resolved": check_due_dates_resolved,
    "carried_over_kept": check_carried_over_kept,
    "done_and_cancelled_excluded": check_done_and_cancelled_excluded,
    "email_covers_owners": check_email_covers_owners,
}


def main():
    scores = {}
    for name, check in CHECKS.items():
        try:
            value = float(check())
        except Exception:  # a garbled output file must cost points, never crash the checker
            value = 0.0
        scores[name] = min(1.0, max(0.0, value))
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
