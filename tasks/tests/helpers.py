"""Plain helpers and constants shared by the tasks tests and by other apps' tests: a task saved through the service
(`make_task`), a task for the sanity scaffold (`make_sanity_task`), checker runs (`run`, `shell`, `spec`, `HOSTILE`)."""

from pathlib import Path

from sandbox import Limits, Workspace
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.services import save_package
from tasks.verification import (
    CheckerSpec,
    CheckStatus,
    run_checker,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"

# Scores a summary of data.csv written to out.json; "out_exists" is the lenient kind of check the scaffold catches.
CHECK = """import json, os
def load():
    try:
        return json.load(open("out.json"))
    except (OSError, ValueError):
        return None
out = load()
scores = {"total_right": isinstance(out, dict) and out.get("total") == 3}
if LENIENT:
    scores["out_exists"] = os.path.exists("out.json")
if CRASH_WITHOUT_INPUT:
    open("data.csv").read()
print(json.dumps(scores))
"""

INPUTS = {"data.csv": b"n\n1\n2\n"}

SOLVED = {"out.json": b'{"total": 3}\n'}

FAST = Limits(wall_seconds=10, cpu_seconds=10, max_output_bytes=64 * 1024)

HOSTILE = {
    "bad_json": ("echo '{\"a\": 1,'; echo 1.0", CheckStatus.BAD_OUTPUT, "not valid JSON"),
    "nan_score": ("echo '{\"a\": 1}'; echo nan", CheckStatus.BAD_OUTPUT, "not a finite number"),
    "inf_subscore": ("echo '{\"a\": Infinity}'; echo 1", CheckStatus.BAD_OUTPUT, "sub-score 'a' is inf"),
    "score_above_one": ("echo '{\"a\": 1}'; echo 1.01", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "negative_score": ("echo -1", CheckStatus.BAD_OUTPUT, "outside [0, 1]"),
    "no_output": ("true", CheckStatus.BAD_OUTPUT, "printed nothing"),
    "words_not_score": ("echo 'all good!'", CheckStatus.BAD_OUTPUT, "not a number"),
    "non_zero_exit": ("echo '{\"a\": 1}'; echo 1.0; echo 'boom' >&2; exit 3", CheckStatus.ERROR, "exit code 3: boom"),
    "crash_in_check_py": (
        "set -e; python3 reward/check.py; echo 1.0",
        CheckStatus.ERROR,
        "exit code 1: SystemExit: check.py cannot parse out.json",
    ),
    "timeout": ("echo 1.0; sleep 30", CheckStatus.TIMEOUT, "wall-clock limit of 2 s"),
    "killed": ("echo 1.0; kill -9 $$", CheckStatus.KILLED, "SIGKILL"),
    "output_flood": ("yes 1.0", CheckStatus.OUTPUT_LIMIT, "output went past"),
}

RUBRIC = [
    {
        "name": "Report clarity",
        "target_file": "report.md",
        "scores": {
            "0": "missing",
            "0.25": "hard to read",
            "0.5": "readable",
            "0.75": "clear",
            "1": "crisp and complete",
        },
        "weight": 2,
    }
]


def make_task(external_id="sales-report", *, instruction=None, category="analysis-reasoning", files=None, **kwargs):
    """A task with input, reward and solution files, saved through the real service."""
    package = TaskPackage(
        external_id=external_id,
        instruction=instruction or f"Summarise the sales for {external_id}.\n\nWrite **report.md** with totals.",
        metadata={"category": category, "grading_type": "hybrid"},
        files=files
        if files is not None
        else [
            PackageFile("data/sales.csv", b"region,total\nnorth,10\nsouth,20\n"),
            PackageFile("README.md", b"# Notes\n\nSome *notes*.\n"),
            PackageFile("config.json", b'{"currency":"EUR","regions":["north","south"]}'),
            PackageFile("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary"),
            PackageFile("check.py", b"import json\nprint(json.dumps({'exists': 1.0}))\n", role="reward"),
            PackageFile("reward.sh", b"#!/usr/bin/env bash\npython3 reward/check.py\n", role="reward"),
            PackageFile("report.md", b"# Report\nnorth 10, south 20\n", role="solution"),
        ],
        rubric=RUBRIC,
    )
    return save_package(package, **kwargs).task


def make_sanity_task(external_id, *, lenient=False, crash=False, solution=SOLVED, inputs=INPUTS):
    check = f"LENIENT = {lenient}\nCRASH_WITHOUT_INPUT = {crash}\n" + CHECK
    files = [
        PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
        PackageFile("check.py", check.encode(), "reward"),
    ]
    files += [PackageFile(path, data, "input") for path, data in inputs.items()]
    files += [PackageFile(path, data, "solution") for path, data in (solution or {}).items()]
    instruction = "Sum the numbers in data.csv into out.json as {total}."
    package = TaskPackage(external_id=external_id, instruction=instruction, files=files)
    return save_package(package).task


def spec(check_py: str = "", reward_sh: str = STANDARD_REWARD_SH, entry: str = "bash reward/reward.sh"):
    files = {"reward.sh": reward_sh.encode()}
    if check_py:
        files["check.py"] = check_py.encode()
    return CheckerSpec(
        task_id="t-1",
        instruction="Write out.json",
        metadata={"category": "Analysis"},
        entry=entry,
        reward_files=files,
    )


def run(checker, files=None, backend=None, limits=FAST, **kwargs):
    with Workspace.create(files or {"data.csv": b"a,b\n1,2\n"}) as workspace:
        return run_checker(checker, workspace, backend=backend, limits=limits, **kwargs), workspace


def shell(script: str, check_py: str = "") -> CheckerSpec:
    return spec(check_py, reward_sh="#!/usr/bin/env bash\n" + script + "\n")
