#!/usr/bin/env python3
"""Checker for fix-proration-bug: is BUG-231 fixed per the finance rules, with tests that would have caught it?

The agent's code runs in child processes on a scratch copy of billing/ and tests/ (with a timeout), so a broken or
hanging module costs points instead of crashing or stalling the checker. To judge the agent's *tests* rather than
its code, the checker appends replacement definitions to a copy of billing/proration.py: a reference
implementation (the tests must pass against it) and two buggy ones (the BUG-231 regression tests must fail against
them). Appending keeps any helpers the agent added importable. The points for the agent's code (and for keeping
the original tests) need the BUG-231 cases fixed first: the shipped code gets some easy cases right by itself.

Prints one JSON object of named sub-scores in [0, 1]. Standard library only.
"""

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
TIMEOUT_S = 60

# (monthly price in cents, date) -> expected cents, by FR-3 (both days billed) and FR-7 (half up).
PRORATION_CASES = [
    ((3100, (2025, 1, 1)), 3100),
    ((3100, (2025, 1, 31)), 100),
    ((3100, (2025, 1, 16)), 1600),
    ((2900, (2024, 2, 29)), 100),
    ((2800, (2025, 2, 28)), 100),
    ((1035, (2025, 6, 30)), 35),  # the case in the bug report: 34.5 -> 35
    ((999, (2025, 4, 26)), 167),  # 166.5 -> 167; round() gives 166
    ((4900, (2025, 6, 16)), 2450),
    ((999, (2025, 4, 10)), 699),
    ((0, (2025, 3, 5)), 0),
    ((1000, (2100, 2, 15)), 500),
    ((12900, (2025, 12, 31)), 416),
]
# The cases of BUG-231 itself (PRORATION_CASES indices): the change on the last day (the report's 34.5 -> 35 and a
# plain one) and the change on the 1st from the comments. The shipped code and the fix that keeps round() both fail
# at least one; every other point for the code is gated on these passing.
BUG_231_CASES = (0, 1, 5)
UPGRADE_CASES = [
    (("starter", "team", (2025, 6, 16)), 1932),
    (("starter", "team", (2025, 6, 30)), 128),
    (("team", "business", (2025, 1, 1)), 8000),
    (("business", "starter", (2025, 6, 16)), 0),
]
ORIGINAL_TESTS = {
    "tests/test_proration.py": {
        "test_thirty_and_thirty_one",
        "test_february",
        "test_full_month_when_changing_on_the_first",
        "test_mid_month",
        "test_leap_february",
        "test_free_plan",
        "test_negative_price_rejected",
    },
    "tests/test_plans.py": {
        "test_upgrade_starter_to_team_mid_month",
        "test_downgrade_is_never_charged",
        "test_unknown_plan",
    },
}
ORIGINAL_TEST_COUNT = 10

REFERENCE = """

# --- appended by the checker: reference implementation ---
import calendar as _checker_calendar


def days_in_month(year, month):
    return _checker_calendar.monthrange(year, month)[1]


def prorated_charge(monthly_price_cents, change_date):
    if monthly_price_cents < 0:
        raise ValueError("monthly_price_cents must not be negative")
    total = _checker_calendar.monthrange(change_date.year, change_date.month)[1]
    numerator = monthly_price_cents * (total - change_date.day + 1)
    return (2 * numerator + total) // (2 * total)
"""

# The code as shipped: the change day is not billed and round() rounds halves to even.
ORIGINAL_BUG = """

# --- appended by the checker: the implementation from before the fix ---
import calendar as _checker_calendar


def prorated_charge(monthly_price_cents, change_date):
    if monthly_price_cents < 0:
        raise ValueError("monthly_price_cents must not be negative")
    total = _checker_calendar.monthrange(change_date.year, change_date.month)[1]
    return round(monthly_price_cents * (total - change_date.day) / total)
"""

# The careless fix: days counted right, but still round() (0.345 dollars -> 34 cents).
HALF_FIX = """

# --- appended by the checker: a fix that forgets FR-7 ---
import calendar as _checker_calendar


def prorated_charge(monthly_price_cents, change_date):
    if monthly_price_cents < 0:
        raise ValueError("monthly_price_cents must not be negative")
    total = _checker_calendar.monthrange(change_date.year, change_date.month)[1]
    return round(monthly_price_cents * (total - change_date.day + 1) / total)
"""

EVALUATE = """
import json
from datetime import date
out = {"proration": [], "upgrade": []}
try:
    from billing.proration import prorated_charge
    for (price, ymd), _ in CASES:
        try:
            got = prorated_charge(price, date(*ymd))
            out["proration"].append(got if type(got) is int else repr(got))
        except Exception as exc:
            out["proration"].append("error: %r" % exc)
    from billing.plans import upgrade_charge
    for (old, new, ymd), _ in UPGRADES:
        try:
            got = upgrade_charge(old, new, date(*ymd))
            out["upgrade"].append(got if type(got) is int else repr(got))
        except Exception as exc:
            out["upgrade"].append("error: %r" % exc)
except Exception as exc:
    out["import_error"] = repr(exc)
print(json.dumps(out))
"""


def scratch_copy(appended_source=None):
    """A temporary copy of billing/ and tests/; optionally with source appended to billing/proration.py."""
    root = Path(tempfile.mkdtemp(prefix="check-proration-"))
    for name in ("billing", "tests"):
        src = WORKSPACE / name
        if src.is_dir():
            shutil.copytree(src, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    if appended_source is not None:
        module = root / "billing" / "proration.py"
        original = module.read_text(encoding="utf-8", errors="replace") if module.is_file() else ""
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(original + appended_source, encoding="utf-8")
    return root


def run_python(root, args):
    """(exit code, combined output) of python3 -B ARGS in root; (None, '') on timeout or failure to start."""
    try:
        done = subprocess.run(
            [sys.executable, "-B", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except (OSError, subprocess.SubprocessError):
        return None, ""
    return done.returncode, done.stdout + done.stderr


def run_suite(appended_source=None, pattern=None):
    """Run the agent's unittest suite; returns (passed, tests run, tests skipped)."""
    root = scratch_copy(appended_source)
    try:
        args = ["-m", "unittest", "discover", "-s", "tests"]
        if pattern:
            args += ["-k", pattern]
        code, output = run_python(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ran = re.search(r"^Ran (\d+) tests?", output, re.MULTILINE)
    skipped = re.search(r"skipped=(\d+)", output)
    return code == 0, int(ran.group(1)) if ran else 0, int(skipped.group(1)) if skipped else 0


_results = None


def evaluate():
    """The agent's answers to the hidden cases (computed once)."""
    global _results
    if _results is None:
        root = scratch_copy()
        try:
            script = f"CASES = {PRORATION_CASES!r}\nUPGRADES = {UPGRADE_CASES!r}\n{EVALUATE}"
            code, output = run_python(root, ["-c", script])
        finally:
            shutil.rmtree(root, ignore_errors=True)
        try:
            _results = json.loads(output.strip().splitlines()[-1]) if code == 0 else {}
        except (ValueError, IndexError):
            _results = {}
    return _results


def bug_fixed():
    """Does the agent's prorated_charge get the BUG-231 cases right? Without that, the cases the buggy code already
    gets right by chance (a zero price, a downgrade) are no credit for a fix."""
    got = evaluate().get("proration", [])
    return len(got) == len(PRORATION_CASES) and all(got[i] == PRORATION_CASES[i][1] for i in BUG_231_CASES)


def check_hidden_cases():
    if not bug_fixed():
        return 0.0
    got = evaluate()["proration"]
    return sum(1 for value, (_, want) in zip(got, PRORATION_CASES) if value == want) / len(PRORATION_CASES)


def check_upgrade_charges():
    got = evaluate().get("upgrade", [])
    if not bug_fixed() or len(got) != len(UPGRADE_CASES):
        return 0.0
    return sum(1 for value, (_, want) in zip(got, UPGRADE_CASES) if value == want) / len(UPGRADE_CASES)


def check_test_suite_green():
    passed, ran, skipped = run_suite()
    return passed and ran > ORIGINAL_TEST_COUNT and skipped == 0


def check_tests_match_finance_rules():
    # A test that still expects the old numbers (e.g. test_mid_month's 1500) fails against the reference.
    passed, ran, _ = run_suite(REFERENCE)
    return passed and ran > 0


def check_regression_test_for_bug_231():
    passed, ran, _ = run_suite(pattern="231")
    if not passed or ran == 0:
        return 0.0
    for buggy in (ORIGINAL_BUG, HALF_FIX):
        still_passes, _, _ = run_suite(buggy, pattern="231")
        if still_passes:
            return 0.0
    return 1.0


def check_original_tests_kept():
    # Keeping the tests is only worth a point next to a fix: the untouched workspace keeps them all too.
    if not bug_fixed():
        return 0.0
    for relpath, names in ORIGINAL_TESTS.items():
        try:
            tree = ast.parse((WORKSPACE / relpath).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            return 0.0
        defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if not names <= defined:
            return 0.0
    return 1.0


def check_changelog_entry():
    try:
        text = (WORKSPACE / "CHANGELOG.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0.0
    match = re.search(r"^##\s*\[?unreleased\]?\s*$(.*?)(?=^##\s|\Z)", text, re.IGNORECASE | re.MULTILINE | re.DOTALL)
    return bool(match) and "bug-231" in match.group(1).lower()


CHECKS = {
    "hidden_cases": check_hidden_cases,
    "upgrade_charges": check_upgrade_charges,
    "test_suite_green": check_test_suite_green,
    "tests_match_finance_rules": check_tests_match_finance_rules,
    "regression_test_for_bug_231": check_regression_test_for_bug_231,
    "original_tests_kept": check_original_tests_kept,
    "changelog_entry": check_changelog_entry,
}


def main():
    scores = {}
    for name, check in CHECKS.items():
        try:
            value = float(check())
        except Exception:  # broken agent code must cost points, never crash the checker
            value = 0.0
        scores[name] = min(1.0, max(0.0, value))
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
