#!/usr/bin/env python3
"""Checker for expense-reconciliation-q1: is reports/q1_expense_summary.json a correct Q1 reconciliation?

Expected values were worked out by hand from expenses/2025-Q1_submitted.csv, fx_rates.json and policy.md; they are
fixed here rather than recomputed so that edits to the input files cannot move the target. Amounts are compared
with a 2-cent tolerance (rounding per claim vs. at the end may differ by a cent). Prints one JSON object of named
sub-scores in [0, 1]. Standard library only; a missing or garbled summary scores 0 instead of raising.
"""

import hashlib
import json
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
SUMMARY = WORKSPACE / "reports" / "q1_expense_summary.json"
Q4_EXPORT = WORKSPACE / "expenses" / "2024-Q4_submitted.csv"
# sha256 of the closed Q4 export (line endings and trailing whitespace ignored): finance said not to touch it.
Q4_SHA256 = "e299e9a4fe65ea0466132a2d1426d180a6a2f0a16b67424ff005d78a5bca2a72"
TOLERANCE = 0.02

TOTAL_SUBMITTED = 2097.14  # unique in-period claims, converted, rejected ones included
TOTAL_REIMBURSABLE = 1829.56
BY_EMPLOYEE = {"alice moreau": 411.77, "ben okafor": 1364.50, "chen wei": 53.29}
BY_CATEGORY = {"lodging": 538.00, "meals": 338.00, "office": 129.89, "software": 249.00, "travel": 574.67}
REJECTED = {"E-1011", "E-1014", "E-1015"}  # E-1014 is 21 GBP: over USD 25 only after conversion
MEAL_CAPS = {("alice moreau", "2025-01-08"): 20.63, ("ben okafor", "2025-02-04"): 12.65}
MEAL_CAPPED_CLAIMS = {"E-1002", "E-1009", "E-1010"}
DUPLICATES = {"E-1012"}
OUT_OF_PERIOD = {"E-1004", "E-1020"}
REQUIRED_KEYS = {
    "period",
    "total_submitted_usd",
    "total_reimbursable_usd",
    "by_employee",
    "by_category",
    "rejected",
    "meal_cap_adjustments",
    "duplicates",
    "out_of_period",
}


def load_summary():
    try:
        data = json.loads(SUMMARY.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def number(value):
    """A float from a JSON number or a numeric string such as "1,829.56" or "$53.29"; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().lstrip("$").replace(",", ""))
        except ValueError:
            return None
    return None


def close(value, expected):
    got = number(value)
    return got is not None and abs(got - expected) <= TOLERANCE + 1e-9  # binary floats: 0.02 must still pass


def name_key(value):
    return " ".join(str(value).split()).casefold()


def normalised_map(value):
    """{normalised key: value}; None when two keys collapse into one (e.g. 'Chen Wei' and 'Chen Wei ')."""
    if not isinstance(value, dict):
        return None
    out = {}
    for key, amount in value.items():
        norm = name_key(key)
        if norm in out:
            return None
        out[norm] = amount
    return out


def claim_ids(value):
    """The set of claim ids in a list of ids or of objects with a claim_id; None if it is not such a list."""
    if not isinstance(value, list):
        return None
    ids = set()
    for item in value:
        if isinstance(item, dict):
            item = item.get("claim_id")
        if not isinstance(item, str):
            return None
        ids.add(item.strip().upper())
    return ids


def check_summary_shape():
    data = load_summary()
    return data is not None and REQUIRED_KEYS <= set(data) and str(data.get("period", "")).strip().upper() == "2025-Q1"


def check_total_submitted():
    data = load_summary() or {}
    return close(data.get("total_submitted_usd"), TOTAL_SUBMITTED)


def check_total_reimbursable():
    data = load_summary() or {}
    return close(data.get("total_reimbursable_usd"), TOTAL_REIMBURSABLE)


def check_by_employee():
    got = normalised_map((load_summary() or {}).get("by_employee"))
    return got is not None and set(got) == set(BY_EMPLOYEE) and all(close(got[k], v) for k, v in BY_EMPLOYEE.items())


def check_by_category():
    got = normalised_map((load_summary() or {}).get("by_category"))
    if got is None:
        return 0.0
    # Listing an unused category with 0 is harmless; a missing or extra non-zero category is not.
    extra = [k for k in set(got) - set(BY_CATEGORY) if not close(got[k], 0.0)]
    return not extra and all(k in got and close(got[k], v) for k, v in BY_CATEGORY.items())


def check_rejected_claims():
    got = claim_ids((load_summary() or {}).get("rejected"))
    # Also listing out-of-period, duplicate or meal-capped claims here is a reading of "rejected", not an error;
    # rejecting a claim the policy accepts, or missing a no-receipt claim, is.
    return got is not None and REJECTED <= got and got - REJECTED <= OUT_OF_PERIOD | DUPLICATES | MEAL_CAPPED_CLAIMS


def check_meal_cap_adjustments():
    items = (load_summary() or {}).get("meal_cap_adjustments")
    if not isinstance(items, list):
        return 0.0
    got = {}
    for item in items:
        if not isinstance(item, dict):
            return 0.0
        key = (name_key(item.get("employee", "")), str(item.get("date", "")).strip())
        got[key] = item.get("excess_usd")
    return set(got) == set(MEAL_CAPS) and all(close(got[k], v) for k, v in MEAL_CAPS.items())


def check_duplicates_and_period():
    data = load_summary() or {}
    return claim_ids(data.get("duplicates")) == DUPLICATES and claim_ids(data.get("out_of_period")) == OUT_OF_PERIOD


def summary_is_substantive():
    """Does the summary hold the reconciliation (the right shape, both totals positive amounts)? A `{}` or a
    summary with the keys but no figures is not yet work that could have broken anything."""
    if not check_summary_shape():
        return False
    data = load_summary()
    totals = [number(data.get(key)) for key in ("total_submitted_usd", "total_reimbursable_usd")]
    return all(total is not None and total > 0 for total in totals)


def check_closed_quarter_untouched():
    # Gated on the main work: leaving Q4 alone is only worth a point once the Q1 reconciliation is there,
    # otherwise an untouched workspace (or a placeholder summary) would earn it.
    if not summary_is_substantive():
        return 0.0
    try:
        text = Q4_EXPORT.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0.0
    return hashlib.sha256(text.replace("\r\n", "\n").rstrip().encode()).hexdigest() == Q4_SHA256


CHECKS = {
    "summary_shape": check_summary_shape,
    "total_submitted": check_total_submitted,
    "total_reimbursable": check_total_reimbursable,
    "by_employee": check_by_employee,
    "by_category": check_by_category,
    "rejected_claims": check_rejected_claims,
    "meal_cap_adjustments": check_meal_cap_adjustments,
    "duplicates_and_period": check_duplicates_and_period,
    "closed_quarter_untouched": check_closed_quarter_untouched,
}


def main():
    scores = {}
    for name, check in CHECKS.items():
        try:
            value = float(check())
        except Exception:  # a garbled summary must cost points, never crash the checker
            value = 0.0
        scores[name] = min(1.0, max(0.0, value))
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
