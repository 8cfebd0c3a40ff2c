"""The example tasks in examples/tasks (ClawGym folder format): well-formed, and their checkers discriminate.

For every task folder: the untouched input workspace and the sanity check's scaffold (placeholders at the output
paths) score exactly 0, input + reference solution scores exactly 1 with every sub-score 1, a "near miss" (the
solution with one mistake a careless agent makes) scores below 1, and partial work keeps the points of the checks
that are gated on it (so the gates are not stricter than the work they wait for).

Checkers run as plain subprocesses in a temporary directory for now. The real sandbox (bubblewrap/docker backends in
sandbox/) comes in a later issue; these examples only run code we wrote, so a subprocess is enough here.
No database is needed.
"""

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.package import STANDARD_REWARD_SH, validate_rubric
from tasks.paths import validate_files
from tasks.sanity import output_paths, placeholder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
TASK_DIRS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir()) if EXAMPLES.is_dir() else []
TASK_IDS = [p.name for p in TASK_DIRS]

_taxonomy = importlib.import_module("tasks.migrations.0002_taxonomy")
CATEGORIES = {name for _slug, name, _description in _taxonomy.BENCHMARK_CATEGORIES}
SCENARIOS = {cat: {sub for sub, _name in subs} for (cat, _name), subs in _taxonomy.SCENARIOS.items()}

MIN_TASKS = 6
MAX_INPUT_BYTES = 20 * 1024
REWARD_TIMEOUT_S = 120


def load_entry(task_dir):
    return json.loads((task_dir / "data_entry.json").read_text(encoding="utf-8"))


def build_workspace(tmp_path, task_dir, with_solution):
    """input_files, overlaid with solution/ when asked, plus reward/ — what the checker sees after a rollout."""
    workspace = tmp_path / "workspace"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(task_dir / "input_files", workspace, ignore=skip)
    if with_solution:
        shutil.copytree(task_dir / "solution", workspace, dirs_exist_ok=True, ignore=skip)
    shutil.copytree(task_dir / "reward", workspace / "reward", ignore=skip)
    return workspace


def build_scaffold(tmp_path, task_dir):
    """The sanity check's scaffold workspace: input files plus a placeholder at every output the instruction names."""
    workspace = build_workspace(tmp_path, task_dir, with_solution=False)
    root = task_dir / "input_files"
    inputs = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    instruction = load_entry(task_dir)["user_query"]
    for path in output_paths(instruction, inputs):
        target = workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(placeholder(path, instruction, inputs))
    return workspace


def checker_env():
    # Scored without a reward payload: the checkers must not depend on one.
    return {k: v for k, v in os.environ.items() if k != "OPENCLAW_REWARD_PAYLOAD"}


def run_reward(workspace):
    """(score, sub-scores) from `bash reward/reward.sh`: sub-scores JSON, then the mean on the last line."""
    done = subprocess.run(
        ["bash", "reward/reward.sh"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=REWARD_TIMEOUT_S,
        env=checker_env(),
    )
    assert done.returncode == 0, f"reward.sh exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) >= 2, f"reward.sh printed too little:\n{done.stdout}"
    return float(lines[-1]), json.loads("\n".join(lines[:-1]))


def run_check_py(workspace):
    """The sub-scores printed by reward/check.py (run by python3, as reward.sh does); it must exit cleanly."""
    done = subprocess.run(
        ["python3", "reward/check.py"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=REWARD_TIMEOUT_S,
        env=checker_env(),
    )
    assert done.returncode == 0, f"check.py crashed:\n{done.stderr}"
    scores = json.loads(done.stdout)
    assert isinstance(scores, dict)
    return scores


# --- near misses: the reference solution with one mistake a careless agent would make -------------------------


def _rewrite(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert old in text, f"near miss out of date: {old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _screenshots_left_with_priya(ws):
    # Misses that Priya is out Thu-Fri and the screenshots moved to Marcus.
    _rewrite(ws / "actions" / "2025-03-11_launch-sync.csv", "A2,marcus.chen,", "A2,priya.raman,")


def _uk_date_read_as_us(ws):
    # Reads the Pret receipt's 04/03/2025 as April 3rd although the vendor is in the UK.
    old = ws / "receipts" / "2025" / "2025-03-04_pret_8.45.txt"
    old.rename(old.with_name("2025-04-03_pret_8.45.txt"))
    _rewrite(
        ws / "receipts" / "manifest.csv", "2025-03-04_pret_8.45.txt,2025-03-04,", "2025-04-03_pret_8.45.txt,2025-04-03,"
    )


def _duplicate_claim_counted_twice(ws):
    path = ws / "reports" / "q1_expense_summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in ("total_submitted_usd", "total_reimbursable_usd"):
        data[key] = round(data[key] + 39.99, 2)
    data["by_employee"]["Chen Wei"] = round(data["by_employee"]["Chen Wei"] + 39.99, 2)
    data["by_category"]["office"] = round(data["by_category"]["office"] + 39.99, 2)
    data["duplicates"] = []
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _amendment_ignored(ws):
    # Takes end date and notice period from the original lease, not the First Amendment.
    path = ws / "lease_summary.yaml"
    _rewrite(path, "lease_end: 2025-11-30", "lease_end: 2025-08-31")
    _rewrite(path, "non_renewal_notice_days: 30", "non_renewal_notice_days: 60")
    _rewrite(path, "non_renewal_notice_deadline: 2025-10-31", "non_renewal_notice_deadline: 2025-07-02")


def _busy_block_read_as_local_time(ws):
    # Reads Grace's busy block 17:00Z-18:30Z as New York time and books her at 13:00, when she is in planning.
    _rewrite(
        ws / "schedule" / "2025-05-15_onsite.csv",
        "Lena Fischer,hiring-manager,Grace Liu,Hudson,14:30,15:15",
        "Lena Fischer,hiring-manager,Grace Liu,Hudson,13:00,13:45",
    )


def _fix_keeps_bankers_rounding(ws):
    # Counts the days right but keeps round(), which rounds 34.5 cents to 34 (FR-7 says half up).
    _rewrite(
        ws / "billing" / "proration.py",
        "    return (2 * numerator + total_days) // (2 * total_days)",
        "    return round(numerator / total_days)",
    )


def _cancelled_survey_kept(ws):
    # Copies last week's open items without reading that the survey was dropped.
    path = ws / "actions" / "2025-03-11_launch-sync.csv"
    row = "A7,samantha.ortiz,Send beta feedback survey to TestFlight testers,2025-03-10\n"
    path.write_text(path.read_text(encoding="utf-8") + row, encoding="utf-8")


def _subtotal_instead_of_total(ws):
    old = ws / "receipts" / "2025" / "2025-02-27_home-depot_42.27.txt"
    old.rename(old.with_name("2025-02-27_home-depot_38.87.txt"))
    _rewrite(
        ws / "receipts" / "manifest.csv",
        "2025-02-27_home-depot_42.27.txt,2025-02-27,home-depot,42.27",
        "2025-02-27_home-depot_38.87.txt,2025-02-27,home-depot,38.87",
    )


def _meal_cap_per_claim(ws):
    # Caps each meal claim at 75 instead of each employee-day, so Ben's two meals on 4 Feb escape the cap.
    path = ws / "reports" / "q1_expense_summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["total_reimbursable_usd"] = round(data["total_reimbursable_usd"] + 12.65, 2)
    data["by_employee"]["Ben Okafor"] = round(data["by_employee"]["Ben Okafor"] + 12.65, 2)
    data["by_category"]["meals"] = round(data["by_category"]["meals"] + 12.65, 2)
    data["meal_cap_adjustments"] = [a for a in data["meal_cap_adjustments"] if a["employee"] != "Ben Okafor"]
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _rent_from_renewal_offer(ws):
    # Treats the property manager's renewal offer as if it changed the lease.
    _rewrite(ws / "lease_summary.yaml", "monthly_rent_usd: 2350", "monthly_rent_usd: 2495")


def _remote_interviewer_without_video(ws):
    # Swaps the 11:00 rooms: Tom (Berlin, remote) ends up in Liberty, which has no video conferencing.
    path = ws / "schedule" / "2025-05-15_onsite.csv"
    _rewrite(
        path,
        "Lena Fischer,system-design,Priya Nair,Liberty,11:00",
        "Lena Fischer,system-design,Priya Nair,Hudson,11:00",
    )
    _rewrite(path, "Omar Haddad,coding,Tom Becker,Hudson,11:00", "Omar Haddad,coding,Tom Becker,Liberty,11:00")


def _wrong_test_deleted_instead_of_fixed(ws):
    # Gets the suite green by deleting the test that expects the old amount rather than correcting it.
    path = ws / "tests" / "test_proration.py"
    text = path.read_text(encoding="utf-8")
    start = text.index("    def test_mid_month(self):")
    end = text.index("    def ", start + 1)
    path.write_text(text[:start] + text[end:], encoding="utf-8")


NEAR_MISSES = {
    "meeting-notes-action-items": [_screenshots_left_with_priya, _cancelled_survey_kept],
    "receipt-filing-manifest": [_uk_date_read_as_us, _subtotal_instead_of_total],
    "expense-reconciliation-q1": [_duplicate_claim_counted_twice, _meal_cap_per_claim],
    "lease-terms-extraction": [_amendment_ignored, _rent_from_renewal_offer],
    "interview-loop-schedule": [_busy_block_read_as_local_time, _remote_interviewer_without_video],
    "fix-proration-bug": [_fix_keeps_bankers_rounding, _wrong_test_deleted_instead_of_fixed],
}
NEAR_MISS_CASES = [
    pytest.param(task_dir, near_miss, id=f"{task_dir.name}:{near_miss.__name__.lstrip('_')}")
    for task_dir in TASK_DIRS
    for near_miss in NEAR_MISSES.get(task_dir.name, [])
]


# --- partial work: the gated checks ("broke nothing", "readable") must pay once real work is there ------------------


def _first_candidate_only(ws):
    # Half the loop: Lena's four sessions, none of Omar's.
    path = ws / "schedule" / "2025-05-15_onsite.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line for line in lines if not line.startswith("Omar")) + "\n", encoding="utf-8")


def _two_actions_only(ws):
    path = ws / "actions" / "2025-03-11_launch-sync.csv"
    path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")


def _one_receipt_filed_no_manifest(ws):
    keep = ws / "receipts" / "2025" / "2025-02-27_home-depot_42.27.txt"
    for path in [p for p in (ws / "receipts").rglob("*") if p.is_file() and p != keep]:
        path.unlink()


def _code_fixed_tests_and_changelog_untouched(ws):
    for relpath in ("tests/test_proration.py", "CHANGELOG.md"):
        shutil.copyfile(EXAMPLES / "fix-proration-bug" / "input_files" / relpath, ws / relpath)


# task -> (partial work on top of the solution, the gated checks it must still earn in full)
PARTIAL_WORK = {
    "expense-reconciliation-q1": (_duplicate_claim_counted_twice, {"closed_quarter_untouched", "summary_shape"}),
    "fix-proration-bug": (
        _code_fixed_tests_and_changelog_untouched,
        {"hidden_cases", "upgrade_charges", "original_tests_kept"},
    ),
    "interview-loop-schedule": (_first_candidate_only, {"schedule_readable"}),
    "meeting-notes-action-items": (_two_actions_only, {"csv_readable", "owners_are_handles"}),
    "receipt-filing-manifest": (_one_receipt_filed_no_manifest, {"inbox_untouched"}),
}


# --- the collection as a whole -----------------------------------------------------------------------------------


def test_there_are_at_least_six_tasks():
    assert len(TASK_DIRS) >= MIN_TASKS, f"only {len(TASK_DIRS)} task folders in {EXAMPLES}"


def test_all_benchmark_categories_are_covered():
    used = {load_entry(d)["metadata"]["category"] for d in TASK_DIRS}
    assert used == CATEGORIES, f"missing categories: {sorted(CATEGORIES - used)}"


def test_at_least_two_tasks_have_a_rubric():
    assert sum(1 for d in TASK_DIRS if load_entry(d).get("rubric")) >= 2


def test_every_task_has_a_near_miss():
    assert set(NEAR_MISSES) == set(TASK_IDS)
    assert all(NEAR_MISSES.values())


# --- each task ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_data_entry_is_valid(task_dir):
    text = (task_dir / "data_entry.json").read_text(encoding="utf-8")
    entry = json.loads(text)
    assert text == json.dumps(entry, indent=2, ensure_ascii=False) + "\n", "data_entry.json is not canonically dumped"
    assert entry["task_id"] == task_dir.name
    assert re.fullmatch(r"[a-z0-9-]+", entry["task_id"])
    assert isinstance(entry["user_query"], str) and len(entry["user_query"]) > 100
    meta = entry["metadata"]
    assert meta["category"] in CATEGORIES
    assert meta["scenario_category"] in SCENARIOS, meta["scenario_category"]
    assert meta["scenario_subcategory"] in SCENARIOS[meta["scenario_category"]], meta["scenario_subcategory"]
    rubric = validate_rubric(entry.get("rubric"))
    if rubric:
        assert meta["grading_type"] == "hybrid"
        assert entry["lambda"] == 0.7
        for rule in rubric:  # a rule must judge a file the task actually produces
            assert (task_dir / "solution" / rule["target_file"]).is_file(), rule["target_file"]
    else:
        assert meta["grading_type"] == "code"
        assert "lambda" not in entry


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_files_are_realistic_and_within_limits(task_dir):
    inputs = [p for p in (task_dir / "input_files").rglob("*") if p.is_file()]
    assert len(inputs) >= 3
    assert len({p.suffix for p in inputs}) >= 2, "input files should be of varied types"
    for path in inputs:
        assert 0 < path.stat().st_size < MAX_INPUT_BYTES, f"{path} is empty or over 20 KB"
    triples = []
    for role, folder in (("input", "input_files"), ("reward", "reward"), ("solution", "solution")):
        root = task_dir / folder
        triples += [(role, p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file()]
    validate_files(triples)


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_reward_entry_is_the_standard_one(task_dir):
    reward_sh = task_dir / "reward" / "reward.sh"
    assert reward_sh.read_text() == STANDARD_REWARD_SH
    assert os.access(reward_sh, os.X_OK)


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_checker_uses_only_the_standard_library(task_dir):
    tree = ast.parse((task_dir / "reward" / "check.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names), sorted(imported - set(sys.stdlib_module_names))


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_untouched_workspace_scores_zero(task_dir, tmp_path, record_property):
    # The sanity check's bar (tolerance 0): no point, not even for "broke nothing", before any work is done.
    score, subscores = run_reward(build_workspace(tmp_path, task_dir, with_solution=False))
    record_property("input_score", score)
    assert len(subscores) >= 5, "a checker needs at least 5 atomic checks"
    assert all(v == 0.0 for v in subscores.values()), f"the untouched workspace earns points: {subscores}"
    assert score == 0.0


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_scaffold_scores_zero(task_dir, tmp_path):
    # Placeholders (`{}`, a header-only CSV, `# placeholder`) are no work either.
    score, subscores = run_reward(build_scaffold(tmp_path, task_dir))
    assert all(v == 0.0 for v in subscores.values()), f"placeholder outputs earn points: {subscores}"
    assert score == 0.0


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_reference_solution_scores_one(task_dir, tmp_path):
    score, subscores = run_reward(build_workspace(tmp_path, task_dir, with_solution=True))
    assert subscores and all(v == 1 for v in subscores.values()), subscores
    assert score == 1.0


@pytest.mark.parametrize(("task_dir", "near_miss"), NEAR_MISS_CASES)
def test_near_miss_scores_below_one(task_dir, near_miss, tmp_path, record_property):
    workspace = build_workspace(tmp_path, task_dir, with_solution=True)
    near_miss(workspace)
    score, subscores = run_reward(workspace)
    record_property("near_miss_score", score)
    assert score < 1.0, f"the near miss is not caught: {subscores}"


@pytest.mark.parametrize("name", sorted(PARTIAL_WORK))
def test_partial_work_earns_the_gated_checks(name, tmp_path):
    change, gated = PARTIAL_WORK[name]
    workspace = build_workspace(tmp_path, EXAMPLES / name, with_solution=True)
    change(workspace)
    score, subscores = run_reward(workspace)
    assert {check: subscores[check] for check in gated} == dict.fromkeys(gated, 1.0), subscores
    assert 0.0 < score < 1.0, subscores


@pytest.mark.parametrize("task_dir", TASK_DIRS, ids=TASK_IDS)
def test_garbled_outputs_cost_points_without_crashing(task_dir, tmp_path):
    workspace = build_workspace(tmp_path, task_dir, with_solution=True)
    solution = task_dir / "solution"
    for path in (p for p in solution.rglob("*") if p.is_file()):
        (workspace / path.relative_to(solution)).write_bytes(b"\xff\xfe{garbled: [\x00 not what was asked,\n")
    scores = run_check_py(workspace)
    assert all(isinstance(v, (int, float)) and 0.0 <= v <= 1.0 for v in scores.values()), scores
    assert sum(scores.values()) / len(scores) < 0.5, scores
