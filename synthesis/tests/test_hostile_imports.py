"""Hostile seed input is refused early, alone and cheaply: SKILL.md front matter that is an alias bomb or loop, persona
files of endless, deep, overlong or unprintable lines, and model-written mock files that would blow up their check.

Bombs run under a memory ceiling (tasks.tests.data.hostile), so that a parser which builds them fails within seconds.
"""

import io
import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from synthesis.models import Persona, Skill
from synthesis.seed_files import MAX_LINE_CHARS
from synthesis.stages.files import file_problems
from tasks.formats.safe_parse import MAX_NODES
from tasks.importing import FAILURES_LISTED
from tasks.tests.data.hostile import DEEP_JSON, LOOP, alias_bomb, memory_ceiling

pytestmark = pytest.mark.django_db

PERSONAS_IMPORT = "/api/synthesis/personas/import/"


def skill_md(name: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n{extra}---\n\n# {name}\n\nDo the thing.\n"


# --- skills --------------------------------------------------------------------------------------------------------


def test_import_skills_fails_bombs_and_loops_alone(tmp_path):
    root = tmp_path / "skills"
    for name, extra in [
        ("a-good", ""),
        ("b-bomb", alias_bomb()),
        ("c-loop", LOOP),
        ("d-deep-metadata", f"metadata: '{'[' * 5_000}'\n"),  # a JSON string: json.loads hit RecursionError
    ]:
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(skill_md(name, extra))
    assert len((root / "c-loop" / "SKILL.md").read_text().split("---")[1]) < 80

    out = io.StringIO()
    started = time.monotonic()
    with memory_ceiling():
        call_command("import_skills", str(root), "--json", stdout=out, stderr=io.StringIO())
    assert time.monotonic() - started < 10

    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert (report["imported"], report["failed_count"]) == (1, 3), report
    errors = {f["source"]: f["error"] for f in report["failed"]}
    assert f"more than {MAX_NODES:,} values once its aliases (*name) are expanded" in errors["skills/b-bomb"]
    assert errors["skills/b-bomb"].startswith("SKILL.md's front matter is refused")
    assert "the alias *x is inside the node &x names" in errors["skills/c-loop"]
    assert errors["skills/d-deep-metadata"] == "metadata is a string that is neither JSON nor YAML"
    assert list(Skill.objects.values_list("name", flat=True)) == ["a-good"]


# --- personas ------------------------------------------------------------------------------------------------------


@pytest.fixture
def admin_api(api_as, admin_user):
    return api_as(admin_user)


def test_the_persona_api_fails_each_bad_line_alone_with_its_number(admin_api):
    lines = [
        json.dumps({"persona": "A beekeeper in Ljubljana who sells comb honey."}),
        '{"persona": ' + "[" * 20_000,  # nested deep (json.loads: RecursionError, a 500 that imported nothing)
        json.dumps({"persona": "A welder\u0000 in Gdansk"}),  # NUL: PostgreSQL cannot store it
        json.dumps({"persona": "A bell\u0007 ringer"}),
        json.dumps({"persona": "A lone \ud800 surrogate"}),
        json.dumps({"persona": "x" * 100_000}),  # a line longer than any persona line is
        json.dumps({"persona": "A ferry pilot in Split who logs every crossing."}),
    ]
    upload = SimpleUploadedFile("hub.jsonl", ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    response = admin_api.post(PERSONAS_IMPORT, {"file": upload}, format="multipart")
    assert response.status_code == 200, response.content[:500]
    report = response.json()
    assert (report["imported"], report["failed_count"]) == (2, 5), report
    errors = {f["source"]: f["error"] for f in report["failed"]}
    assert errors == {
        "hub.jsonl:2": "not JSON: arrays or objects are nested too deeply (column 212)",
        "hub.jsonl:3": "the persona holds the control character U+0000 at character 9",
        "hub.jsonl:4": "the persona holds the control character U+0007 at character 7",
        "hub.jsonl:5": "the persona holds a lone surrogate (U+D800), which is not Unicode text, at character 8",
        "hub.jsonl:6": f"the line has {len(lines[5]):,} characters (at most {MAX_LINE_CHARS:,})",
    }
    assert set(Persona.objects.filter(source="hub.jsonl").values_list("text", flat=True)) == {
        "A beekeeper in Ljubljana who sells comb honey.",
        "A ferry pilot in Split who logs every crossing.",
    }


def test_a_file_of_endless_bad_lines_is_a_short_answer(admin_api):
    upload = SimpleUploadedFile("braces.jsonl", b"{\n" * 20_000 + b'{"persona": "A tailor in Porto."}\n')
    response = admin_api.post(PERSONAS_IMPORT, {"file": upload}, format="multipart")
    assert response.status_code == 200
    report = response.json()
    assert (report["imported"], report["failed_count"], len(report["failed"])) == (1, 20_000, FAILURES_LISTED)
    assert report["failed"][-1]["source"] == f"braces.jsonl:{FAILURES_LISTED}"
    assert len(response.content) < 20_000  # was one entry per line: 114 MB for 2 MB of "{" lines


def test_the_persona_page_names_the_line_holding_a_nul(admin_client):
    upload = SimpleUploadedFile("mine.txt", b"A glassblower\x00 in Murano\nA courier in Hanoi who plans routes.\n")
    response = admin_client.post(reverse("synthesis:personas-import"), {"file": upload}, follow=True)
    text = response.content.decode()
    assert "1 imported, 0 updated, 0 unchanged, 1 failed" in text
    assert "mine.txt:1: the persona holds the control character U+0000 at character 14" in text
    # (Not text__contains: SQLite's LIKE ends the pattern at a NUL and matches every row.)
    assert list(Persona.objects.filter(source="mine.txt").values_list("text", flat=True)) == [
        "A courier in Hanoi who plans routes."
    ]


# --- mock files a model writes -------------------------------------------------------------------------------------


def test_mock_files_that_would_blow_up_their_check_are_problems_to_fix():
    files = {
        "bomb.yaml": ("yaml", alias_bomb()),
        "loop.yaml": ("yaml", LOOP),
        "deep.yaml": ("yaml", "x: " + "[" * 500 + "]" * 500),
        "deep.json": ("json", DEEP_JSON),
        "deep.jsonl": ("jsonl", '{"a": 1}\n' + DEEP_JSON + "\n"),
        "deep.py": ("python", "x = " + "-" * 100_000 + "1\n"),
        "compose.yaml": ("yaml", "base: &base {image: app}\nweb:\n  <<: *base\n  port: 80\n"),
    }
    draft = {
        "instruction": "Read the files and report what they hold.",
        "file_spec": [{"path": path, "type": kind, "content_spec": "mock"} for path, (kind, _) in files.items()],
        "output_files": [],
    }
    answer = {"files": [{"path": path, "content": content} for path, (_, content) in files.items()]}
    with memory_ceiling():
        kept, problems = file_problems(draft, answer)
    assert set(kept) == set(files)
    assert problems == [
        f"'bomb.yaml' (yaml): does not parse as yaml: the document holds more than {MAX_NODES:,} values once its "
        "aliases (*name) are expanded",
        "'loop.yaml' (yaml): does not parse as yaml: the alias *x is inside the node &x names: it would hold itself",
        "'deep.yaml' (yaml): does not parse as yaml: values are nested more than 64 deep",
        "'deep.json' (json): does not parse as json: arrays or objects are nested too deeply: line 1 column 201 "
        "(char 200)",
        "'deep.jsonl' (jsonl): line 2 is not JSON: arrays or objects are nested too deeply: line 1 column 201 "
        "(char 200)",
        "'deep.py' (python): does not parse as python: it nests too deeply",
    ]
