"""CSV for spreadsheets (lib.csvsafe): text that a spreadsheet would run as a formula is written as text, and
every CSV the apps write goes through it."""

import ast
import csv
import io

from django.conf import settings

from lib.csvsafe import SafeDictWriter, safe_cell

APPS = (
    "accounts",
    "benchmarks",
    "clawgym_site",
    "demo",
    "evaluation",
    "jobs",
    "lib",
    "llm",
    "ops",
    "review",
    "sandbox",
    "synthesis",
    "tasks",
    "training_jobs",
)


def test_text_starting_a_formula_gets_a_quote_and_nothing_else_changes():
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert safe_cell(f"{start}HYPERLINK(1)") == f"'{start}HYPERLINK(1)"
    assert safe_cell('a =HYPERLINK("x")') == 'a =HYPERLINK("x")'
    assert (safe_cell(""), safe_cell(None), safe_cell("'=x")) == ("", "", "'=x")
    # Numbers are ClawGym's own figures: a negative one stays a number.
    assert (safe_cell(-0.5), safe_cell(-3), safe_cell(0)) == (-0.5, -3, 0)


def test_the_dict_writer_neutralises_rows_and_the_header():
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, fieldnames=["=name", "score"])
    writer.writeheader()
    writer.writerow({"=name": "@evil", "score": -1.5})
    writer.writerows([{"=name": "\t=1+1", "score": None}, {"=name": "\r=1\r+2", "score": 0}])
    rows = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))
    assert rows == [["'=name", "score"], ["'@evil", "-1.5"], ["'\t=1+1", ""], ["'\r=1\r+2", "0"]]
    # A carriage return inside a cell is quoted, so it never splits the row.
    assert buffer.getvalue().endswith('"\'\r=1\r+2",0\r\n')


WRITERS = {"writer", "DictWriter"}


def test_no_app_writes_csv_but_through_csvsafe():
    """A new CSV export must not bring back formulas: the csv module's writers are used in csvsafe alone."""
    # Read as code (ast), so a checker or an agent's script held in a string (tasks.testing) is not code here.
    found = []
    for app in APPS:
        for path in (settings.BASE_DIR / app).rglob("*.py"):
            if "tests" in path.parts or "migrations" in path.parts or path.name == "csvsafe.py":
                continue
            for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
                named = (
                    isinstance(node, ast.Attribute)
                    and node.attr in WRITERS
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "csv"
                ) or (
                    isinstance(node, ast.ImportFrom)
                    and node.module == "csv"
                    and any(alias.name in WRITERS for alias in node.names)
                )
                if named:
                    found.append(f"{path.relative_to(settings.BASE_DIR)}:{node.lineno}")
    assert found == [], "write CSV with lib.csvsafe.SafeDictWriter:\n" + "\n".join(found)
