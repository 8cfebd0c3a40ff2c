#!/usr/bin/env python3
"""Checker for lease-terms-extraction: lease_summary.yaml must state the lease as amended, and notes_for_me.md
must answer the notice and early-termination questions with the right numbers.

The checker may use the standard library only, so it reads the flat YAML the task asks for with a small parser
(scalars, quoted strings, inline [a, b] lists, block "- item" lists, comments). Prints one JSON object of named
sub-scores in [0, 1]; a missing or unparsable file scores 0 on the checks that need it instead of raising.
"""

import json
import re
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
SUMMARY = WORKSPACE / "lease_summary.yaml"
NOTES = WORKSPACE / "notes_for_me.md"

REQUIRED_KEYS = (
    "landlord",
    "tenant",
    "premises",
    "lease_start",
    "lease_end",
    "monthly_rent_usd",
    "parking_fee_usd",
    "rent_due_day",
    "grace_period_days",
    "late_fee_usd",
    "security_deposit_usd",
    "pet_deposit_usd",
    "cats_allowed",
    "dogs_allowed",
    "non_renewal_notice_days",
    "non_renewal_notice_deadline",
    "early_termination_fee_usd",
    "tenant_pays",
)
# Notice "at least 30 days before the last day of the Term" (30 Nov): 31 Oct, or 30 Oct if counted cautiously.
NOTICE_DEADLINES = {"2025-10-31", "2025-10-30"}
DEADLINE_IN_PROSE = re.compile(
    r"2025-10-3[01]|\b3[01](st|th)?\s+oct(ober)?\b|\boct(ober)?\.?\s+3[01](st|th)?\b"
    r"|\b3[01]/10/2025\b|\b10/3[01]/2025\b",
    re.IGNORECASE,
)
FEE_IN_PROSE = re.compile(r"4,?700")


def strip_comment(line):
    """Drop a '#' comment that is outside quotes and starts the line or follows whitespace."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def scalar(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [scalar(part) for part in inner.split(",")] if inner else []
    return text


def parse_flat_yaml(text):
    """A mapping of top-level keys to strings or lists of strings; nested mappings become dicts of strings.

    Returns None when the text is not a mapping of that shape.
    """
    result = {}
    current = None  # the top-level key whose block (list or mapping) is being read
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        # YAML allows a block list at the same indent as its key ("key:" then "- item"), so test items first.
        is_item = body.startswith("- ") or body == "-"
        if indent == 0 and not is_item:
            key, sep, value = body.partition(":")
            if not sep or not key.strip():
                return None
            key = scalar(key)
            result[key] = scalar(value) if value.strip() else None
            current = key
            continue
        if current is None:
            return None
        if is_item:
            block = result[current]
            if block is None:
                block = result[current] = []
            if not isinstance(block, list):
                return None
            block.append(scalar(body[1:]))
            continue
        key, sep, value = body.partition(":")
        if not sep:
            return None
        block = result[current]
        if block is None:
            block = result[current] = {}
        if not isinstance(block, dict):
            return None
        block[scalar(key)] = scalar(value)
    return result


def load_summary():
    try:
        text = SUMMARY.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None
    data = parse_flat_yaml(text)
    return {str(k).strip().lower(): v for k, v in data.items()} if data else None


def number(value):
    if not isinstance(value, str):
        return None
    cleaned = value.strip().lstrip("$").replace(",", "").strip()
    cleaned = re.sub(r"\s*(usd|dollars?)$", "", cleaned, flags=re.IGNORECASE)
    try:
        return float(cleaned)
    except ValueError:
        return None


def equals(value, expected):
    got = number(value)
    return got is not None and abs(got - expected) < 0.005


def boolean(value):
    if not isinstance(value, str):
        return None
    return {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}.get(value.strip().lower())


def text_of(value):
    return value.lower() if isinstance(value, str) else ""


def check_summary_complete():
    data = load_summary()
    return data is not None and all(key in data and data[key] not in (None, "", []) for key in REQUIRED_KEYS)


def check_parties_and_premises():
    data = load_summary() or {}
    premises = text_of(data.get("premises"))
    return (
        "harborview" in text_of(data.get("landlord"))
        and "lindqvist" in text_of(data.get("tenant"))
        and "2417 alder" in premises
        and "3b" in premises
    )


def check_term_as_amended():
    data = load_summary() or {}
    return data.get("lease_start") == "2024-09-01" and data.get("lease_end") == "2025-11-30"


def check_rent_not_the_proposal():
    data = load_summary() or {}
    return equals(data.get("monthly_rent_usd"), 2350) and equals(data.get("parking_fee_usd"), 95)


def check_deposits_and_late_fee():
    data = load_summary() or {}
    return (
        equals(data.get("security_deposit_usd"), 3525)
        and equals(data.get("pet_deposit_usd"), 300)
        and equals(data.get("late_fee_usd"), 75)
        and equals(data.get("grace_period_days"), 5)
        and equals(data.get("rent_due_day"), 1)
    )


def check_notice_as_amended():
    data = load_summary() or {}
    return (
        equals(data.get("non_renewal_notice_days"), 30) and data.get("non_renewal_notice_deadline") in NOTICE_DEADLINES
    )


def check_early_termination_fee():
    # Two months of *Base Rent*: the parking fee is not Base Rent (Amendment §3).
    return equals((load_summary() or {}).get("early_termination_fee_usd"), 4700)


def check_pets():
    data = load_summary() or {}
    return boolean(data.get("cats_allowed")) is True and boolean(data.get("dogs_allowed")) is False


def check_tenant_utilities():
    items = (load_summary() or {}).get("tenant_pays")
    if not isinstance(items, list) or len(items) != 2:
        return 0.0
    joined = " ".join(text_of(item) for item in items)
    return "electric" in joined and "internet" in joined


def check_notes_answer_deadline_and_fee():
    try:
        text = NOTES.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0.0
    return bool(DEADLINE_IN_PROSE.search(text)) and bool(FEE_IN_PROSE.search(text))


CHECKS = {
    "summary_complete": check_summary_complete,
    "parties_and_premises": check_parties_and_premises,
    "term_as_amended": check_term_as_amended,
    "rent_not_the_proposal": check_rent_not_the_proposal,
    "deposits_and_late_fee": check_deposits_and_late_fee,
    "notice_as_amended": check_notice_as_amended,
    "early_termination_fee": check_early_termination_fee,
    "pets": check_pets,
    "tenant_utilities": check_tenant_utilities,
    "notes_answer_deadline_and_fee": check_notes_answer_deadline_and_fee,
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
