#!/usr/bin/env python3
"""Checker for interview-loop-schedule: is schedule/2025-05-15_onsite.csv a feasible onsite loop?

Many schedules are correct, so this checks every rule of the brief instead of comparing with one answer. All
constraints are stated here in New York time (EDT, UTC-4 on 15 May 2025): Berlin working hours 14:00-19:00 CEST
(UTC+2) are 08:00-13:00, London 13:00-18:00 BST (UTC+1) is 08:00-13:00, and the busy blocks of busy.ics are
converted from UTC or from their TZID. Fixed offsets, because the checker must not depend on tzdata.

Prints one JSON object of named sub-scores in [0, 1]. Standard library only; a missing or garbled schedule scores
0 instead of raising. The feasibility checks only count for a complete loop (8 sessions, each type once per
candidate): a half-empty schedule must not collect points for breaking no rules.
"""

import csv
import io
import json
import re
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
SCHEDULE = WORKSPACE / "schedule" / "2025-05-15_onsite.csv"


def hm(text):
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


SESSIONS = ("coding", "system-design", "behavioral", "hiring-manager")
CANDIDATES = {  # earliest start, latest end
    "omar haddad": (hm("10:00"), hm("17:00")),
    "lena fischer": (hm("09:00"), hm("15:30")),
}
OFFICE = (hm("09:00"), hm("17:00"))
LUNCH = (hm("12:00"), hm("13:00"))
INTERVIEWERS = {  # working hours in New York time, trained session types
    "priya nair": ((hm("09:00"), hm("17:00")), {"coding", "system-design"}),
    "tom becker": ((hm("08:00"), hm("13:00")), {"coding", "system-design"}),
    "aisha bello": ((hm("08:00"), hm("13:00")), {"behavioral"}),
    "marco rossi": ((hm("09:00"), hm("17:00")), {"behavioral", "coding"}),
    "grace liu": ((hm("09:00"), hm("17:00")), {"hiring-manager"}),
}
ON_LEAVE = {"dev patel"}
REMOTE = {"tom becker", "aisha bello"}
BUSY = {  # busy.ics events on 15 May, New York time
    "priya nair": [(hm("09:00"), hm("10:30"))],
    "grace liu": [(hm("13:00"), hm("14:30")), (hm("16:00"), hm("17:00"))],
    "marco rossi": [(hm("14:00"), hm("15:00"))],
    "tom becker": [(hm("10:00"), hm("10:45"))],
    "aisha bello": [(hm("11:00"), hm("11:45"))],
}
ROOMS_WITH_VIDEO = {"hudson": True, "liberty": False}  # Brooklyn is closed for renovation
MAX_PER_INTERVIEWER = 3
MIN_GAP = 15
DURATION = 45

TIME = re.compile(r"(\d{1,2}):(\d{2})(?::\d{2})?\s*([ap])?\.?\s*m?\.?\s*$", re.IGNORECASE)


def parse_time(text):
    """Minutes after midnight from '09:00', '9:00', '09:00:00', '2025-05-15 09:00' or '9:00 AM'; None otherwise."""
    match = TIME.search(text.strip())
    if not match:
        return None
    hours, minutes, half = int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()
    if half == "p" and hours < 12:
        hours += 12
    if half == "a" and hours == 12:
        hours = 0
    if hours > 23 or minutes > 59:
        return None
    return hours * 60 + minutes


def person(text, known):
    """The canonical full name for a full or first name; otherwise the cleaned text itself."""
    cleaned = " ".join(text.split()).casefold()
    for name in known:
        if cleaned == name or cleaned == name.split()[0]:
            return name
    return cleaned


def session_type(text):
    return re.sub(r"[\s_]+", "-", text.strip().casefold())


def room_name(text):
    cleaned = text.strip().casefold()
    return next((room for room in ("hudson", "liberty", "brooklyn") if room in cleaned), cleaned)


def load_rows():
    """The sessions as dicts, or None if the file is missing, lacks a column or has an unreadable time."""
    try:
        text = SCHEDULE.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        return None
    if not {"candidate", "session", "interviewer", "room", "start", "end"} <= {
        (f or "").strip().lower() for f in reader.fieldnames
    }:
        return None
    rows = []
    known_people = set(INTERVIEWERS) | ON_LEAVE
    for raw in reader:
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if isinstance(v, str)}
        if not any(row.values()):
            continue
        start, end = parse_time(row.get("start", "")), parse_time(row.get("end", ""))
        if start is None or end is None:
            return None
        rows.append(
            {
                "candidate": person(row.get("candidate", ""), CANDIDATES),
                "session": session_type(row.get("session", "")),
                "interviewer": person(row.get("interviewer", ""), known_people),
                "room": room_name(row.get("room", "")),
                "start": start,
                "end": end,
            }
        )
    return rows


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


def complete_rows():
    """The rows if they form a complete loop (each candidate has each session type exactly once), else None."""
    rows = load_rows()
    if not rows or len(rows) != len(CANDIDATES) * len(SESSIONS):
        return None
    for candidate in CANDIDATES:
        if sorted(r["session"] for r in rows if r["candidate"] == candidate) != sorted(SESSIONS):
            return None
    return rows


def check_schedule_readable():
    # Readable means it holds a schedule: a header alone (or last week's loop under this week's name) is not one.
    rows = load_rows()
    return bool(rows) and any(r["candidate"] in CANDIDATES and r["session"] in SESSIONS for r in rows)


def check_sessions_complete():
    return complete_rows() is not None


def check_durations_and_grid():
    rows = complete_rows()
    return bool(rows) and all(
        r["end"] - r["start"] == DURATION and r["start"] % 15 == 0 and OFFICE[0] <= r["start"] and r["end"] <= OFFICE[1]
        for r in rows
    )


def check_interviewers_qualified():
    rows = complete_rows()
    if not rows:
        return 0.0
    for r in rows:
        trained = INTERVIEWERS.get(r["interviewer"], (None, set()))[1]
        if r["session"] not in trained:  # also catches Dev Patel (on leave) and unknown names
            return 0.0
    pairs = [(r["candidate"], r["interviewer"]) for r in rows]
    if len(set(pairs)) != len(pairs):
        return 0.0
    return all(sum(1 for r in rows if r["interviewer"] == name) <= MAX_PER_INTERVIEWER for name in INTERVIEWERS)


def check_interviewer_availability():
    rows = complete_rows()
    if not rows:
        return 0.0
    for r in rows:
        if r["interviewer"] not in INTERVIEWERS:
            return 0.0
        hours = INTERVIEWERS[r["interviewer"]][0]
        slot = (r["start"], r["end"])
        if not (hours[0] <= slot[0] and slot[1] <= hours[1]):
            return 0.0
        if any(overlaps(slot, busy) for busy in BUSY.get(r["interviewer"], [])):
            return 0.0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a["interviewer"] == b["interviewer"] and overlaps((a["start"], a["end"]), (b["start"], b["end"])):
                return 0.0
    return 1.0


def check_candidate_day():
    rows = complete_rows()
    if not rows:
        return 0.0
    for candidate, (earliest, latest) in CANDIDATES.items():
        day = sorted((r for r in rows if r["candidate"] == candidate), key=lambda r: r["start"])
        if day[0]["start"] < earliest or day[-1]["end"] > latest:
            return 0.0
        if day[-1]["session"] != "hiring-manager":
            return 0.0
        if any(overlaps((r["start"], r["end"]), LUNCH) for r in day):
            return 0.0
        if any(nxt["start"] - cur["end"] < MIN_GAP for cur, nxt in zip(day, day[1:])):
            return 0.0
    return 1.0


def check_rooms_not_double_booked():
    rows = complete_rows()
    if not rows or any(r["room"] not in ROOMS_WITH_VIDEO for r in rows):
        return 0.0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a["room"] == b["room"] and overlaps((a["start"], a["end"]), (b["start"], b["end"])):
                return 0.0
    return 1.0


def check_remote_sessions_have_video():
    rows = complete_rows()
    return bool(rows) and all(ROOMS_WITH_VIDEO.get(r["room"], False) for r in rows if r["interviewer"] in REMOTE)


CHECKS = {
    "schedule_readable": check_schedule_readable,
    "sessions_complete": check_sessions_complete,
    "durations_and_grid": check_durations_and_grid,
    "interviewers_qualified": check_interviewers_qualified,
    "interviewer_availability": check_interviewer_availability,
    "candidate_day": check_candidate_day,
    "rooms_not_double_booked": check_rooms_not_double_booked,
    "remote_sessions_have_video": check_remote_sessions_have_video,
}


def main():
    scores = {}
    for name, check in CHECKS.items():
        try:
            value = float(check())
        except Exception:  # a garbled schedule must cost points, never crash the checker
            value = 0.0
        scores[name] = min(1.0, max(0.0, value))
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
