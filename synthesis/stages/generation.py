"""What both generation stages share: the task's JSON schema, its checks, and the network check.

A task that needs the network is rejected by two checks, both without a model call: the generator's own
`needs_network` answer, and a keyword check of the instruction, scenario, expected behaviour and file specs
(URLs, downloading, fetching, web search, sending mail, installing packages…). The sandbox has no network, so
such a task could never be solved there.
"""

from __future__ import annotations

import posixpath
import re

from tasks.paths import TaskFileError, normalize_path
from tasks.verification import REWARD_DIR

from ..pipeline import FAIL, PASS, StageResult

# File types the files stage can write and validate (text formats). Others (pdf, docx, images) are refused.
TEXT_TYPES = {
    "csv": "csv",
    "tsv": "tsv",
    "json": "json",
    "jsonl": "jsonl",
    "yaml": "yaml",
    "yml": "yaml",
    "py": "python",
    "python": "python",
    "md": "markdown",
    "markdown": "markdown",
    "html": "html",
    "htm": "html",
    "txt": "text",
    "text": "text",
    "xml": "text",
    "ini": "text",
    "toml": "text",
    "cfg": "text",
    "log": "text",
    "sh": "text",
    "sql": "text",
    "css": "text",
    "js": "text",
    "ics": "text",
    "vcf": "text",
    "eml": "text",
    "rst": "text",
}
MAX_INPUT_FILES = 12

TASK_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 20},
        "scenario": {"type": "string"},
        "expected_behavior": {"type": "string", "minLength": 1},
        "required_operations": {"type": "array", "items": {"type": "string"}},
        "input_files": {
            "type": "array",
            "maxItems": MAX_INPUT_FILES,
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "type": {"type": "string", "minLength": 1},
                    "content_spec": {"type": "string", "minLength": 1},
                },
                "required": ["path", "type", "content_spec"],
            },
        },
        "output_files": {"type": "array", "items": {"type": "string"}},
        "difficulty": {"type": "integer", "minimum": 1, "maximum": 5},
        "needs_network": {"type": "boolean"},
    },
    "required": ["question", "expected_behavior", "input_files", "output_files", "difficulty", "needs_network"],
}

TASK_RULES = (
    "The agent works alone in a sandbox on a local workspace of files, with tools to read, write and edit files and "
    "run commands (python3 with the standard library, common shell tools). It has NO network: no web, no APIs, no "
    "e-mail, no package installs. Write one realistic request a user would make, solvable there, whose result is "
    "files in the workspace that a program can check. `question` is the user's instruction, naming every input "
    "file and every output file by its relative path; `input_files` lists the files the workspace starts with, "
    "each with its path, its type (csv, json, jsonl, yaml, md, txt, html, py, …) and a precise spec of its content "
    "(the files are written later from that spec); `output_files` lists the paths the agent must write; "
    "`expected_behavior` says what a correct result contains; `difficulty` is 1 (trivial) to 5 (hard); "
    "`needs_network` says whether the task needs the network at all."
)

NETWORK_PATTERNS = [
    (re.compile(r"\bhttps?://[^\s`'\")>]+", re.I), "a URL"),
    (re.compile(r"\b(download|upload)(s|ed|ing)?\b", re.I), "downloading or uploading"),
    (
        re.compile(r"\b(fetch|scrape|crawl)(es|s|ed|ing)?\b[^.]{0,40}\b(web|site|page|url|online|internet|api)", re.I),
        "fetching from the web",
    ),
    (
        re.compile(r"\b(web search|search the (web|internet)|google (it|for)|browse the web|online search)\b", re.I),
        "searching the web",
    ),
    (re.compile(r"\b(rest|web|http)\s?api\b|\bapi (call|request|endpoint)s?\b|\bwebhooks?\b", re.I), "calling an API"),
    (
        re.compile(
            r"\bsend (an? )?(e-?mail|sms|text message|slack message)\b|\bpost (it )?to (slack|twitter|x)\b", re.I
        ),
        "sending a message",
    ),
    (re.compile(r"\b(pip|npm|apt(-get)?|brew) install\b|\b(curl|wget)\b", re.I), "installing or fetching software"),
]


def network_need(task: dict) -> str:
    """Why the task needs the network ("" when nothing says so)."""
    if task.get("needs_network"):
        return "the generator says the task needs the network"
    texts = [task.get("question", ""), task.get("scenario", ""), task.get("expected_behavior", "")]
    texts += [spec.get("content_spec", "") for spec in task.get("input_files") or []]
    for text in texts:
        for pattern, what in NETWORK_PATTERNS:
            match = pattern.search(text or "")
            if match:
                return f"the task needs the network ({what}: {match.group(0)!r}); the sandbox has none"
    return ""


def file_type(spec_type: str, path: str) -> str | None:
    """The validated type of an input file: its declared type, else its extension's; None when not a text type."""
    declared = (spec_type or "").strip().lower().lstrip(".")
    if declared in TEXT_TYPES:
        return TEXT_TYPES[declared]
    return TEXT_TYPES.get(posixpath.splitext(path)[1].lower().lstrip("."))


def task_problems(task: dict) -> list[str]:
    """What makes the generated task unusable, beyond its schema (paths, types, duplicates)."""
    problems, seen = [], set()
    outputs = set()
    for path in task.get("output_files") or []:
        try:
            outputs.add(normalize_path(path.removeprefix("./")))
        except TaskFileError as exc:
            problems.append(f"output file {exc}")
    for spec in task.get("input_files") or []:
        try:
            path = normalize_path(spec["path"].removeprefix("./"))
        except TaskFileError as exc:
            problems.append(f"input file {exc}")
            continue
        if path.split("/")[0] == REWARD_DIR:
            problems.append(f"input file {path!r}: reward/ is the checker's folder")
        if path in seen:
            problems.append(f"input file {path!r} is listed twice")
        if path in outputs:
            problems.append(f"{path!r} is both an input and an output file")
        seen.add(path)
        if file_type(spec["type"], path) is None:
            problems.append(f"input file {path!r}: type {spec['type']!r} is not a text format the workspace can hold")
    if not outputs:
        problems.append("the task names no output file: its result could not be checked")
    return problems


def normalized(task: dict) -> dict:
    """The task as the draft keeps it (paths canonical, the keys every later stage reads)."""
    return {
        "instruction": task["question"].strip(),
        "scenario": task.get("scenario", ""),
        "expected_behavior": task["expected_behavior"],
        "required_operations": task.get("required_operations") or [],
        "file_spec": [
            {
                "path": spec["path"].removeprefix("./"),
                "type": file_type(spec["type"], spec["path"]) or spec["type"],
                "content_spec": spec["content_spec"],
            }
            for spec in task["input_files"]
        ],
        "output_files": [path.removeprefix("./") for path in task["output_files"]],
        "difficulty": task["difficulty"],
    }


def judge_task(task: dict, extra: dict | None = None) -> StageResult:
    """The generate stage's verdict on an answer that matched the schema."""
    need = network_need(task)
    if need:
        return StageResult(FAIL, need, data={"task": task}, details={"network": True})
    problems = task_problems(task)
    if problems:
        return StageResult(FAIL, "; ".join(problems), data={"task": task})
    return StageResult(PASS, "", data={**normalized(task), **(extra or {})})
