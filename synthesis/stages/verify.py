"""Verification design: a checker in the ClawGym reward/ format and a reference solution, proven in the sandbox.

The generator writes `reward/check.py` (prints one JSON object of named atomic checks, each 0/1 or a float in
[0, 1]; standard library only) and the solution files (role "solution"). `reward/reward.sh` is always the standard
averager (tasks.package.STANDARD_REWARD_SH), so the code score is the mean of the checks.

Each round runs the existing sanity check (tasks.sanity.evaluate) on a SanityMaterial built in memory: no task
is written to the catalog for it. The checker runs sandboxed on the empty, initial and scaffold workspaces and on
the solution. A round passes when the checker crashed on none, paid nothing on the three lazy workspaces (not
over-lenient), gave the same sub-score keys on every run, and scored the solution 1.0. Otherwise the problems and
the runs' scores go back to the generator, up to 3 rounds; after the third the item is rejected at "verify" with
every round's problems kept in stage_results["verify"]["rounds"]. A sandbox that cannot run at all is a failure
to retry (the checker is not to blame).

The passing round's check is the task's sanity check: its report (tasks.sanity.report_fields, with the digest of
what it ran on) goes with the draft, and the catalog stage stores it as the new revision's SanityReport when the
revision holds exactly what was checked. A kept task is sanity-checked already; accepting it needs no other run.
"""

from __future__ import annotations

import ast
import json
import sys

from tasks.package import STANDARD_REWARD_SH
from tasks.paths import TaskFileError, normalize_path
from tasks.sanity import (
    RUN_KINDS,
    SOLUTION_RUN,
    SanityMaterial,
    SanityUnavailable,
    evaluate,
    material_digest,
    output_paths,
    report_fields,
)
from tasks.verification import REWARD_DIR, CheckerSpec

from ..llm_json import StageFailure, ask_json
from ..pipeline import FAIL, PASS, StageResult
from . import PROMPT_VERSIONS, messages, quoted
from .catalog import external_id

STAGE = "verify"
PROMPT_VERSION = PROMPT_VERSIONS["verify"]
ROUNDS = 3
CHECKER_ENTRY = "bash reward/reward.sh"
FILE_SHOWN_CHARS = 4000  # of each input file shown to the generator

SCHEMA = {
    "type": "object",
    "properties": {
        "check_py": {"type": "string", "minLength": 1},
        "solution_files": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    "required": ["check_py", "solution_files"],
}

SYSTEM = (
    "You write the verifier of a workspace task for AI agents: `reward/check.py`, run from the workspace root after "
    "the agent stopped, which prints ONE JSON object of named atomic checks (each 0 or 1, or a float in [0, 1]) and "
    "nothing else, using the Python standard library only. Every check must test the agent's work itself (an "
    "output file's existence alone, or an input file left as it was, earns nothing): on an empty workspace, on the "
    "untouched input files and on placeholder outputs every check must be 0, and check.py must never crash (a "
    "missing or unreadable file is a 0, not an exception). Print the same check names in every case. Also write "
    "the reference solution: the output files a perfect agent leaves, which must score 1.0 on every check."
)


def _shown(files: dict[str, str]) -> str:
    parts = []
    for path, text in files.items():
        cut = f"\n[… {len(text) - FILE_SHOWN_CHARS:,} more characters]" if len(text) > FILE_SHOWN_CHARS else ""
        parts.append(f"### {path}\n{quoted('FILE', text[:FILE_SHOWN_CHARS] + cut)}")
    return "\n\n".join(parts) or "(no input files)"


def prompt(draft: dict) -> list[dict]:
    user = (
        f"## Instruction\n{quoted('INSTRUCTION', draft['instruction'])}\n\n"
        f"## Expected behaviour\n{draft['expected_behavior']}\n\n"
        f"## Output files the agent must write\n" + "\n".join(f"- {p}" for p in draft["output_files"]) + "\n\n"
        f"## Input files\n{_shown(draft['files'])}"
    )
    return messages(SYSTEM, user, SCHEMA)


def static_problems(check_py: str, solution: dict) -> list[str]:
    """What is wrong before anything runs: check.py must compile and import the standard library only."""
    problems = []
    try:
        tree = ast.parse(check_py)
    except SyntaxError as exc:
        return [f"reward/check.py does not compile: {exc}"]
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names:
                problems.append(f"reward/check.py imports {name!r}, which is not in the Python standard library")
    for path in solution:
        if path.split("/")[0] == REWARD_DIR:
            problems.append(f"solution file {path!r}: reward/ is the checker's folder")
    return problems


def _solution(answer: dict) -> tuple[dict[str, bytes], list[str]]:
    files, problems = {}, []
    for entry in answer["solution_files"]:
        try:
            files[normalize_path(entry["path"].removeprefix("./"))] = entry["content"].encode()
        except TaskFileError as exc:
            problems.append(f"solution file {exc}")
    return files, problems


def sanity_problems(outcome) -> list[str]:
    """The sanity outcome's findings, as feedback a model can act on."""
    problems = []
    for kind in RUN_KINDS:
        run = outcome.runs[kind]
        if not run.ok:
            problems.append(f"crashed on the {kind} workspace ({run.status}): {run.reason}")
        elif run.score > outcome.tolerance:
            paying = ", ".join(f"{name}={value:g}" for name, value in run.paying_checks.items()) or "its mean"
            problems.append(
                f"over-lenient: scored {run.score:g} on the {kind} workspace (paying: {paying}); it must be 0"
            )
    solution = outcome.runs.get(SOLUTION_RUN)
    if solution is not None and not outcome.solvable:
        if not solution.ok:
            problems.append(f"crashed on the reference solution ({solution.status}): {solution.reason}")
        else:
            failing = ", ".join(f"{n}={v:g}" for n, v in solution.subscores.items() if v < 1) or "its mean"
            problems.append(f"the reference solution scores {solution.score:g}, not 1.0 (failing: {failing})")
    keys = {kind: tuple(sorted(run.subscores)) for kind, run in outcome.runs.items() if run.ok}
    if any(not names for names in keys.values()):
        problems.append(
            "check.py printed no named checks on some workspace ("
            + ", ".join(k for k, v in keys.items() if not v)
            + ")"
        )
    elif len(set(keys.values())) > 1:
        problems.append(
            "the check names differ between workspaces: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in keys.items())
        )
    return problems


def _summary(outcome) -> dict:
    return {
        kind: {"score": run.score, "status": str(run.status), "subscores": run.subscores, "reason": run.reason}
        for kind, run in outcome.runs.items()
    }


def run(item, ctx):
    draft = item.draft
    inputs = {path: text.encode() for path, text in draft["files"].items()}
    conversation = prompt(draft)
    rounds = []
    for number in range(1, ROUNDS + 1):
        answer, call = ask_json(item, ctx.generator, STAGE, conversation, SCHEMA)
        solution, problems = _solution(answer)
        problems += static_problems(answer["check_py"], solution)
        report = {}
        sane = False
        if not problems:
            reward = {"check.py": answer["check_py"].encode(), "reward.sh": STANDARD_REWARD_SH.encode()}
            # The task id it will have in the catalog: the checker's payload is the one a later check gives it.
            material = SanityMaterial(
                revision_id=0,
                checker=CheckerSpec(
                    task_id=external_id(item),
                    instruction=draft["instruction"],
                    metadata={},
                    entry=CHECKER_ENTRY,
                    reward_files=reward,
                ),
                inputs=inputs,
                solution=solution,
                scaffold_paths=output_paths(draft["instruction"], inputs),
            )
            try:
                outcome = evaluate(material, backend=ctx.sandbox())
            except SanityUnavailable as exc:
                raise StageFailure(f"verify: {exc}", retryable=True) from None
            problems = sanity_problems(outcome)
            report = _summary(outcome)
            sane = not outcome.crashed and not outcome.over_lenient
        rounds.append({"round": number, "problems": problems, "runs": report, "model_call": call.pk, "sane": sane})
        if not problems:
            checker = {"check.py": answer["check_py"], "reward.sh": STANDARD_REWARD_SH}
            solution_text = {path: data.decode() for path, data in sorted(solution.items())}
            sanity = {
                **report_fields(material, outcome),
                "digest": material_digest(material),
                "job_run": item.job_run_id,
            }
            return StageResult(
                PASS,
                f"sane and solvable in round {number}",
                data={"checker": checker, "solution": solution_text, "sanity_report": sanity},
                details={"rounds": rounds, "sane": True, "solvable": True},
            )
        conversation = conversation + [
            {"role": "assistant", "content": json.dumps(answer)},
            {
                "role": "user",
                "content": f"Round {number}: the sandboxed sanity check found problems:\n"
                + "\n".join(f"- {p}" for p in problems)
                + "\nWrite check.py and the solution again, fixed.",
            },
        ]
    reasons = " | ".join(f"round {r['round']}: " + "; ".join(r["problems"]) for r in rounds)
    last = rounds[-1]
    return StageResult(
        FAIL,
        f"no sane, solvable checker after {ROUNDS} rounds: {reasons}",
        details={"rounds": rounds, "sane": last["sane"], "solvable": False},
    )
