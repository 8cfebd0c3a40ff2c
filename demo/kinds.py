"""The demo generator's repertoire: small workspace tasks, each with its input files, reference solution and checker.

Each kind is a complete, solvable task a program can check: the solution is computed from the input files by the
kind's `solve`, and the checker (CHECK_PY with the solution's values in it) compares the agent's outputs with them,
two checks a file (complete, correct). It pays nothing on an empty workspace, the untouched inputs or the sanity
check's placeholders, and 1.0 on the solution, so the verify stage's sandboxed check passes in its first round.
Each kind's output file names it: later stages find the kind by that name in their prompt (kind_in).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class Kind:
    key: str
    question: str  # names every input and output file in backticks
    scenario: str
    expected_behavior: str
    operations: list[str]
    inputs: dict[str, tuple[str, str, str]]  # path -> (type, content spec, content)
    solve: Callable[[dict[str, str]], dict[str, str]]  # input texts -> output texts
    difficulty: int = 2
    rubric: list[dict] = field(default_factory=list)

    @property
    def outputs(self) -> list[str]:
        return sorted(self.solution())

    def input_texts(self) -> dict[str, str]:
        return {path: spec[2] for path, spec in self.inputs.items()}

    def solution(self) -> dict[str, str]:
        return self.solve(self.input_texts())

    def task(self) -> dict:
        """The generate stage's answer (synthesis.stages.generation.TASK_SCHEMA)."""
        return {
            "question": self.question,
            "scenario": self.scenario,
            "expected_behavior": self.expected_behavior,
            "required_operations": self.operations,
            "input_files": [{"path": p, "type": t, "content_spec": spec} for p, (t, spec, _) in self.inputs.items()],
            "output_files": self.outputs,
            "difficulty": self.difficulty,
            "needs_network": False,
        }

    def check_py(self) -> str:
        expected = {}
        for path, text in self.solution().items():
            if path.endswith(".json"):
                expected[path] = ["json", json.loads(text)]
            else:
                expected[path] = ["lines", [line.strip() for line in text.splitlines() if line.strip()]]
        return CHECK_PY.replace("EXPECTED = None", f"EXPECTED = json.loads({json.dumps(expected, sort_keys=True)!r})")


# The checker: standard library only, never raises, the same check names on every workspace.
CHECK_PY = '''"""Checks of a ClawGym demo task: each output file complete, and correct."""
import json

EXPECTED = None


def same(got, want):
    if isinstance(want, dict):
        return isinstance(got, dict) and set(got) == set(want) and all(same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) < 0.01
    return got == want


checks = {}
for path, (kind, want) in sorted(EXPECTED.items()):
    name = path.replace("/", "_").replace(".", "_")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        text = None
    if kind == "json":
        try:
            got = json.loads(text) if text is not None else None
        except ValueError:
            got = None
        if isinstance(want, dict):
            complete = isinstance(got, dict) and set(got) == set(want)
        else:
            complete = isinstance(got, list) and len(got) == len(want)
        checks[name + "_complete"] = int(bool(complete))
        checks[name + "_correct"] = int(same(got, want))
    else:
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        checks[name + "_complete"] = int(bool(want) and all(line in lines for line in want))
        checks[name + "_correct"] = int(lines == want)
print(json.dumps(checks))
'''


# --- the kinds ---------------------------------------------------------------------------------------------------


def _sum_by(text: str, key: str, value: str, digits: int = 2) -> dict:
    totals = defaultdict(float)
    for row in _rows(text):
        totals[row[key]] += float(row[value])
    return {k: round(v, digits) for k, v in sorted(totals.items())}


KINDS = [
    Kind(
        "region-totals",
        "Please read `sales.csv` (one sale a row: region, amount) and write `region_totals.json`: a JSON object "
        "mapping each region to the sum of its amounts, rounded to cents.",
        "A shop owner tallies a month of sales by region.",
        "One total per region present in the file.",
        ["read a CSV file", "aggregate numbers by group", "write a JSON file"],
        {
            "sales.csv": (
                "csv",
                "region,amount rows, four regions, amounts with cents",
                "region,amount\nnorth,120.50\nsouth,80.00\nnorth,19.25\neast,42.10\nwest,7.75\nsouth,15.00\n",
            )
        },
        lambda f: {"region_totals.json": _json(_sum_by(f["sales.csv"], "region", "amount"))},
    ),
    Kind(
        "ticket-status",
        "Our helpdesk export is `tickets.csv` (id, status, assignee). Count the tickets in each status and write "
        "the counts to `status_counts.json` as a JSON object from status to count.",
        "A support lead prepares the weekly queue review.",
        "A count for every status that occurs.",
        ["read a CSV file", "count rows by a column", "write a JSON file"],
        {
            "tickets.csv": (
                "csv",
                "id,status,assignee rows with statuses open, pending and closed",
                "id,status,assignee\n101,open,ana\n102,closed,ben\n103,pending,ana\n104,open,chen\n"
                "105,closed,ana\n106,closed,ben\n107,open,ben\n",
            )
        },
        lambda f: {
            "status_counts.json": _json(dict(sorted(Counter(r["status"] for r in _rows(f["tickets.csv"])).items())))
        },
    ),
    Kind(
        "low-stock",
        "Go through `inventory.csv` (sku, name, quantity, reorder_level) and list the SKUs whose quantity is "
        "below their reorder level in `reorder.txt`, one SKU a line, sorted alphabetically.",
        "A warehouse clerk prepares the weekly purchase order.",
        "Exactly the SKUs under their reorder level.",
        ["read a CSV file", "filter rows by comparing two columns", "sort values", "write a text file"],
        {
            "inventory.csv": (
                "csv",
                "sku,name,quantity,reorder_level rows; some items under their level",
                "sku,name,quantity,reorder_level\nB-210,Bolts M6,40,100\nA-100,Washers,500,200\n"
                "C-330,Hinges,3,10\nA-150,Nuts M6,90,100\nD-400,Brackets,25,20\n",
            )
        },
        lambda f: {
            "reorder.txt": "\n".join(
                sorted(r["sku"] for r in _rows(f["inventory.csv"]) if int(r["quantity"]) < int(r["reorder_level"]))
            )
            + "\n"
        },
        difficulty=3,
    ),
    Kind(
        "timesheet-hours",
        "From the timesheet in `timesheet.csv` (person, date, hours), total the hours each person worked and save "
        "them in `hours_by_person.json`, an object from person to total hours.",
        "A team lead checks logged hours before payroll.",
        "The sum of hours for every person.",
        ["read a CSV file", "sum numbers by person", "write a JSON file"],
        {
            "timesheet.csv": (
                "csv",
                "person,date,hours rows over one week, hours with halves",
                "person,date,hours\nmaria,2025-03-03,7.5\njon,2025-03-03,8\nmaria,2025-03-04,6\n"
                "lee,2025-03-04,4.5\njon,2025-03-05,8\nlee,2025-03-05,3\n",
            )
        },
        lambda f: {"hours_by_person.json": _json(_sum_by(f["timesheet.csv"], "person", "hours", 1))},
    ),
    Kind(
        "unique-emails",
        "`signups.csv` (name, email) has duplicate sign-ups, some with different capitalisation. Write every "
        "distinct address, in lower case and sorted, one a line, to `unique_emails.txt`.",
        "A volunteer coordinator cleans up an event sign-up list.",
        "Each address once, lower-cased and sorted.",
        ["read a CSV file", "normalise and deduplicate values", "write a text file"],
        {
            "signups.csv": (
                "csv",
                "name,email rows with repeated addresses in mixed case",
                "name,email\nAda,ada@example.org\nBo,BO@example.org\nAda L.,Ada@Example.org\n"
                "Cy,cy@example.org\nbo,bo@example.org\n",
            )
        },
        lambda f: {
            "unique_emails.txt": "\n".join(sorted({r["email"].lower() for r in _rows(f["signups.csv"])})) + "\n"
        },
    ),
    Kind(
        "log-errors",
        "Read the service log `app.log` (each line: date, time, level, module followed by a colon, message) and "
        "count the ERROR lines of each module. Write `errors_by_module.json`, an object from module to count.",
        "An on-call engineer summarises last night's incidents.",
        "ERROR counts per module; other levels ignored.",
        ["read a log file", "parse lines", "count by a field", "write a JSON file"],
        {
            "app.log": (
                "log",
                "about ten lines at levels INFO, WARN and ERROR from modules billing, auth and mailer",
                "2025-03-01 01:02:03 INFO billing: run started\n2025-03-01 01:02:09 ERROR billing: card declined\n"
                "2025-03-01 01:05:00 WARN auth: slow login\n2025-03-01 01:07:12 ERROR auth: token expired\n"
                "2025-03-01 01:09:45 ERROR billing: ledger locked\n2025-03-01 01:10:00 INFO mailer: queue empty\n"
                "2025-03-01 01:12:30 ERROR mailer: bounce\n2025-03-01 01:15:00 ERROR billing: card declined\n",
            )
        },
        lambda f: {
            "errors_by_module.json": _json(
                dict(
                    sorted(
                        Counter(
                            line.split()[3].rstrip(":")
                            for line in f["app.log"].splitlines()
                            if line.split()[2:3] == ["ERROR"]
                        ).items()
                    )
                )
            )
        },
        difficulty=3,
    ),
    Kind(
        "config-merge",
        "Merge `defaults.json` and `overrides.json` into `config.json`: every key of the defaults, with the value "
        "from the overrides where it has one, plus the keys only the overrides have.",
        "A developer prepares the staging configuration.",
        "A shallow merge where the overrides win.",
        ["read JSON files", "merge objects", "write a JSON file"],
        {
            "defaults.json": (
                "json",
                "an object of six settings (strings, numbers, booleans)",
                _json(
                    {
                        "host": "localhost",
                        "port": 8080,
                        "debug": False,
                        "workers": 2,
                        "log_level": "info",
                        "timeout": 30,
                    }
                ),
            ),
            "overrides.json": (
                "json",
                "an object overriding three settings and adding one",
                _json({"port": 9090, "debug": True, "timeout": 45, "region": "eu-west"}),
            ),
        },
        lambda f: {"config.json": _json({**json.loads(f["defaults.json"]), **json.loads(f["overrides.json"])})},
    ),
    Kind(
        "grade-averages",
        "Using `grades.csv` (student, subject, score), compute each student's average score over their subjects, "
        "rounded to one decimal, and write the averages to `averages.json` keyed by student.",
        "A teacher prepares end-of-term report cards.",
        "One average per student, one decimal.",
        ["read a CSV file", "average numbers by group", "round values", "write a JSON file"],
        {
            "grades.csv": (
                "csv",
                "student,subject,score rows, three students, three subjects each",
                "student,subject,score\nkim,math,88\nkim,history,74\nkim,art,95\nraj,math,67\nraj,history,81\n"
                "raj,art,70\nsol,math,92\nsol,history,89\nsol,art,78\n",
            )
        },
        lambda f: {
            "averages.json": _json({s: round(sum(v) / len(v), 1) for s, v in sorted(_group(f["grades.csv"]).items())})
        },
        difficulty=3,
    ),
    Kind(
        "overdue-loans",
        "Today is 2025-04-15. From `loans.csv` (title, borrower, due), write the titles of the loans already "
        "overdue (due before today) to `overdue.txt`, one title a line, earliest due date first.",
        "A school librarian sends overdue reminders.",
        "The overdue titles, ordered by due date.",
        ["read a CSV file", "compare dates", "sort rows", "write a text file"],
        {
            "loans.csv": (
                "csv",
                "title,borrower,due rows with ISO dates around mid-April 2025",
                "title,borrower,due\nDune,ava,2025-04-20\nEmma,ben,2025-04-02\nUlysses,cai,2025-03-28\n"
                "Beloved,dee,2025-04-14\nWalden,eli,2025-04-15\n",
            )
        },
        lambda f: {
            "overdue.txt": "\n".join(
                r["title"] for r in sorted(_rows(f["loans.csv"]), key=lambda r: r["due"]) if r["due"] < "2025-04-15"
            )
            + "\n"
        },
    ),
    Kind(
        "action-items",
        "Turn the meeting notes in `standup_notes.md` into `action_items.md`: one bullet per ACTION line, written as "
        "'- owner: task', in the order they appear, and nothing else in the file.",
        "A project manager circulates the follow-ups of a stand-up.",
        "Every action with its owner, in order.",
        ["read a Markdown file", "extract marked lines", "write a Markdown file"],
        {
            "standup_notes.md": (
                "md",
                "stand-up notes with discussion lines and four 'ACTION(owner): task' lines",
                "# Stand-up, 3 March\n\nRelease slipped by a day.\nACTION(nina): update the release notes\n"
                "Discussed the flaky login test.\nACTION(omar): quarantine the flaky test\n"
                "ACTION(nina): book the retro room\nBudget question still open.\n"
                "ACTION(pia): send the budget figures\n",
            )
        },
        lambda f: {
            "action_items.md": "".join(
                f"- {line[7 : line.index(')')]}: {line[line.index(':') + 1 :].strip()}\n"
                for line in f["standup_notes.md"].splitlines()
                if line.startswith("ACTION(")
            )
        },
        rubric=[
            {
                "name": "actionable wording",
                "target_file": "action_items.md",
                "weight": 1,
                "scores": {
                    "0": "no usable action list",
                    "0.25": "actions hard to follow",
                    "0.5": "actions listed but vague",
                    "0.75": "clear actions, minor wording issues",
                    "1": "every action clear, owned and actionable",
                },
            }
        ],
    ),
]


def _group(text: str) -> dict[str, list[float]]:
    scores = defaultdict(list)
    for row in _rows(text):
        scores[row["student"]].append(float(row["score"]))
    return scores


BY_KEY = {kind.key: kind for kind in KINDS}


def kind_in(text: str) -> Kind | None:
    """The kind whose output file the text names (the instruction, quoted in every later stage's prompt)."""
    return next((kind for kind in KINDS if any(f"`{path}`" in text for path in kind.outputs)), None)
