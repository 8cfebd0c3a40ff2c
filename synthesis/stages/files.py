"""Resource preparation: the task's file spec [(path, type, content spec)] → the input files' contents.

Each file is validated for its type: CSV/TSV parse with the same number of columns on every row, JSON, JSONL and
YAML parse (through tasks.formats.safe_parse: a model's alias bomb or nesting thousands deep is a problem with the
file, not a worker brought down), Python compiles, Markdown, HTML and text are not blank. Paths go through the catalog's rules
(tasks.paths: normalize_path, validate_files for sizes and counts). Every workspace file the instruction names
(tasks.sanity.output_paths, the scaffold's own reading of it) must be an input file or a declared output.
Invalid files get one regeneration with the errors listed; still invalid → rejected at "files" with them.
"""

from __future__ import annotations

import csv
import io
import json

import yaml

from tasks.formats.safe_parse import load_json, load_yaml
from tasks.paths import TaskFileError, normalize_path, validate_files
from tasks.sanity import output_paths

from ..llm_json import ask_json
from ..pipeline import FAIL, PASS, StageResult
from . import PROMPT_VERSIONS, messages, quoted

STAGE = "files"
PROMPT_VERSION = PROMPT_VERSIONS["files"]

SCHEMA = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        }
    },
    "required": ["files"],
}

SYSTEM = (
    "You write the input files of a workspace task for an AI agent, exactly as their specs say: realistic, "
    "consistent with the instruction, in the stated format. Never write the task's answer or its output files."
)


def prompt(draft: dict) -> list[dict]:
    specs = "\n".join(f"- `{s['path']}` ({s['type']}): {s['content_spec']}" for s in draft["file_spec"])
    user = (
        f"## Instruction\n{quoted('INSTRUCTION', draft['instruction'])}\n\n"
        f"## Files to write\n{specs}\n\nGive every file's full content."
    )
    return messages(SYSTEM, user, SCHEMA)


def type_problem(kind: str, text: str) -> str:
    """What is wrong with `text` as a file of `kind` ("" when nothing)."""
    if not text.strip():
        return "the file is empty"
    try:
        if kind in ("csv", "tsv"):
            rows = [row for row in csv.reader(io.StringIO(text), delimiter="\t" if kind == "tsv" else ",") if row]
            widths = {len(row) for row in rows}
            if len(widths) > 1:
                bad = next(n for n, row in enumerate(rows, start=1) if len(row) != len(rows[0]))
                return f"rows have different numbers of columns ({sorted(widths)}; row {bad} differs from the header)"
        elif kind == "json":
            load_json(text)
        elif kind == "jsonl":
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        load_json(line)
                    except ValueError as exc:
                        return f"line {n} is not JSON: {exc}"
        elif kind == "yaml":
            load_yaml(text)
        elif kind == "python":
            compile(text, "<file>", "exec")
    except (ValueError, yaml.YAMLError, SyntaxError, csv.Error) as exc:
        return f"does not parse as {kind}: {str(exc).splitlines()[0][:300]}"
    except (RecursionError, MemoryError):  # how compile() says that expressions nest thousands deep
        return f"does not parse as {kind}: it nests too deeply"
    return ""


def file_problems(draft: dict, answer: dict) -> tuple[dict[str, str], list[str]]:
    """The files by path, and what is wrong with them."""
    problems = []
    files: dict[str, str] = {}
    for entry in answer["files"]:
        try:
            path = normalize_path(entry["path"].removeprefix("./"))
        except TaskFileError as exc:
            problems.append(str(exc))
            continue
        files[path] = entry["content"]
    kinds = {spec["path"]: spec["type"] for spec in draft["file_spec"]}
    for path, kind in kinds.items():
        if path not in files:
            problems.append(f"{path!r} is missing")
        else:
            problem = type_problem(kind, files[path])
            if problem:
                problems.append(f"{path!r} ({kind}): {problem}")
    for path in files:
        if path not in kinds:
            problems.append(f"{path!r} is not in the file spec (write only the files listed)")
    try:
        validate_files(("input", path, text.encode()) for path, text in files.items())
    except TaskFileError as exc:
        problems.append(str(exc))
    declared = set(draft.get("output_files") or [])
    for path in output_paths(draft["instruction"], files):
        if path not in declared:
            problems.append(f"the instruction names {path!r}, which is neither an input file nor a declared output")
    return files, problems


def run(item, ctx):
    draft = item.draft
    conversation = prompt(draft)
    rounds = []
    for attempt in (1, 2):
        answer, call = ask_json(item, ctx.generator, STAGE, conversation, SCHEMA)
        files, problems = file_problems(draft, answer)
        rounds.append({"round": attempt, "problems": problems, "model_call": call.pk})
        if not problems:
            kept = {path: files[path] for path in sorted(files)}
            return StageResult(PASS, "", data={"files": kept}, details={"rounds": rounds})
        conversation = conversation + [
            {"role": "assistant", "content": json.dumps(answer)},
            {
                "role": "user",
                "content": "These files are not valid:\n"
                + "\n".join(f"- {p}" for p in problems)
                + "\nWrite all the files again, fixed.",
            },
        ]
    return StageResult(FAIL, "; ".join(rounds[-1]["problems"]), details={"rounds": rounds})
