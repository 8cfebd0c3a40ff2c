"""Hostile YAML and JSON in imports: refused while it is read, that one task failed with a reason, the rest imported.

An alias bomb is a few hundred bytes that yaml.safe_load reads cheaply (aliases are shared references) and every walk
of the result then pays for in full: import_tasks went to a MemoryError at 3.9 GB, and `loop: &x [*x]` (a list
holding itself) aborted the whole import. These tests run the bombs under a memory ceiling, so that a parser which
builds them fails within seconds rather than taking the machine's memory.
"""

import io
import json
import os
import re
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from jobs import runner
from jobs.models import JobRun
from tasks.formats.safe_parse import MAX_NODES, YAMLRefused, load_json, load_yaml
from tasks.models import Task
from tasks.tests.data.builders import jsonl_line, write_jsonl, write_task
from tasks.tests.data.hostile import DEEP_JSON, LOOP, alias_bomb, memory_ceiling

BASE_DIR = Path(__file__).resolve().parents[2]

GRADE = "```python\ndef grade(transcript, workspace_path):\n    return {'done': 1.0}\n```\n"


def pinchbench_task(task_id: str, extra_front_matter: str = "") -> str:
    return (
        f"---\nid: {task_id}\nname: {task_id}\ngrading_type: automated\n{extra_front_matter}---\n\n"
        f"## Prompt\n\nWrite done.txt ({task_id}).\n\n## Automated Checks\n\n{GRADE}"
    )


@pytest.fixture
def hostile_bench(tmp_path) -> Path:
    """A PinchBench folder: one good task, an alias bomb and an alias loop in front matter."""
    folder = tmp_path / "bench"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "a_good.md").write_text(pinchbench_task("task_good"))
    (folder / "tasks" / "b_bomb.md").write_text(pinchbench_task("task_bomb", alias_bomb()))
    (folder / "tasks" / "c_loop.md").write_text(pinchbench_task("task_loop", LOOP))
    assert len((folder / "tasks" / "b_bomb.md").read_bytes()) < 800
    return folder


def assert_bombs_failed_alone(report: dict) -> None:
    assert (report["imported"], report["failed_count"]) == (1, 2), report
    errors = {f["source"]: f["error"] for f in report["failed"]}
    assert set(errors) == {"tasks/b_bomb.md", "tasks/c_loop.md"}
    assert "front matter refused" in errors["tasks/b_bomb.md"]
    assert f"more than {MAX_NODES:,} values once its aliases (*name) are expanded" in errors["tasks/b_bomb.md"]
    assert "the alias *x is inside the node &x names" in errors["tasks/c_loop.md"]
    assert list(Task.objects.values_list("external_id", flat=True)) == ["task_good"]


# --- the loader ----------------------------------------------------------------------------------------------------


def test_an_alias_bomb_is_refused_while_it_is_composed():
    started = time.monotonic()
    with memory_ceiling(), pytest.raises(YAMLRefused, match=r"once its aliases \(\*name\) are expanded") as refused:
        load_yaml(alias_bomb())
    assert time.monotonic() - started < 2
    assert "line 5" in str(refused.value)  # at l4 (9 ** 4 values), where the count passed MAX_NODES: l5..l8 unread


@pytest.mark.parametrize(
    "text, max_chars, message",
    [
        (LOOP, None, "the alias *x is inside the node &x names: it would hold itself"),
        ("x: " + "[" * 100 + "]" * 100, None, "values are nested more than 64 deep"),
        # One long scalar named many times: few values, but gigabytes once written out.
        (
            "s: &s " + "x" * 100_000 + "\nl: [" + ", ".join(["*s"] * 20) + "]\n",
            None,
            "aliases (*name) stand for more than 1,048,576 characters",
        ),
        ("a: b\n" * 1000, 4_000, "the YAML is 5,000 characters, over the 4,000 read here"),
    ],
)
def test_what_would_cost_more_than_its_size_is_refused(text, max_chars, message):
    with pytest.raises(YAMLRefused) as refused:
        load_yaml(text, **({"max_chars": max_chars} if max_chars else {}))
    assert message in str(refused.value)


def test_ordinary_anchors_and_merge_keys_still_read():
    text = "base: &base {image: app, restart: always}\nweb:\n  <<: *base\n  port: 80\nworkers: [*base, *base]\n"
    base = {"image": "app", "restart": "always"}
    assert load_yaml(text) == {"base": base, "web": {**base, "port": 80}, "workers": [base, base]}


@pytest.mark.parametrize("text", ["n: " + "9" * 5_000, "when: 2020-13-45", "a: [unclosed"])
def test_a_value_pyyaml_cannot_make_is_a_yaml_error(text):
    with pytest.raises(yaml.YAMLError):
        load_yaml(text)


def test_json_nested_too_deeply_or_with_endless_digits_is_a_json_decode_error():
    with pytest.raises(json.JSONDecodeError, match="nested too deeply") as deep:
        load_json('{"a": ' + DEEP_JSON + "}")
    assert deep.value.pos == 6 + 199  # where the nesting passed 200 levels (the object is the first)
    with pytest.raises(json.JSONDecodeError, match="Exceeds the limit") as digits:
        load_json('{"n": ' + "9" * 5_000 + "}")
    assert digits.value.colno == 7
    assert load_json('{"a": [[1]]}') == {"a": [[1]]}


def test_every_yaml_parse_goes_through_the_bounded_loader():
    calls = re.compile(r"\byaml\.(?:safe_load|load|full_load|unsafe_load|compose|parse)(?:_all)?\(")
    found = []
    for here, dirs, names in os.walk(BASE_DIR):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"]  # the venv, the runtime, git
        for name in names:
            path = Path(here) / name
            rel = path.relative_to(BASE_DIR).as_posix()
            if name.endswith(".py") and rel != "tasks/formats/safe_parse.py" and calls.search(path.read_text("utf-8")):
                found.append(rel)
    assert found == [], "parse YAML with tasks.formats.safe_parse.load_yaml"


# --- through the imports -------------------------------------------------------------------------------------------


def test_import_tasks_fails_the_bombs_alone(db, hostile_bench):
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with memory_ceiling():
        call_command("import_tasks", str(hostile_bench), "--json", stdout=out, stderr=err)
    assert time.monotonic() - started < 10
    assert_bombs_failed_alone(json.loads(out.getvalue().strip().splitlines()[-1]))
    assert "failed: tasks/b_bomb.md: " in err.getvalue()


def test_an_uploaded_archive_of_bombs_fails_them_alone_in_the_job(
    api_as, admin_user, settings, tmp_path, hostile_bench
):
    settings.CLAWGYM_UPLOAD_DIR = tmp_path / "uploads"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(hostile_bench, arcname="bench")
    upload = io.BytesIO(buf.getvalue())
    upload.name = "bench.tar.gz"
    response = api_as(admin_user).post("/api/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content

    with memory_ceiling():
        assert runner.execute(response.json()["id"]) == JobRun.Status.SUCCEEDED
    run = JobRun.objects.get(pk=response.json()["id"])
    assert_bombs_failed_alone(run.result)
    assert "failed: tasks/b_bomb.md: tasks/b_bomb.md: front matter refused" in run.log_tail


def test_json_nested_too_deeply_fails_its_task_alone(db, tmp_path):
    src = tmp_path / "src"
    write_task(src, "task_ok")
    deep = write_task(src, "task_deep")
    (deep / "data_entry.json").write_text('{"task_id": "task_deep", "metadata": ' + DEEP_JSON + "}")
    lines = write_jsonl(
        tmp_path / "tasks.jsonl", [jsonl_line(task_id="j1"), '{"task_id": "j2", "rule": ' + DEEP_JSON + "}"]
    )

    for path, bad in ((src, "task_deep"), (lines, "tasks.jsonl line 2")):
        out = io.StringIO()
        call_command("import_tasks", str(path), "--json", stdout=out, stderr=io.StringIO())
        report = json.loads(out.getvalue().strip().splitlines()[-1])
        assert (report["imported"], report["failed_count"]) == (1, 1), report
        assert report["failed"][0]["source"] == bad
        assert "not valid JSON (arrays or objects are nested too deeply" in report["failed"][0]["error"]
    assert sorted(Task.objects.values_list("external_id", flat=True)) == ["j1", "task_ok"]


def test_a_report_lists_the_first_hundred_failures_and_counts_them_all(db, tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [jsonl_line(task_id="j1")] + ["{broken"] * 150)
    out, err = io.StringIO(), io.StringIO()
    call_command("import_tasks", str(path), "--json", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert (report["imported"], report["failed_count"], len(report["failed"])) == (1, 150, 100)
    assert report["failed"][-1]["source"] == "tasks.jsonl line 101"
    assert "imported 1, updated 0, unchanged 0, failed 150" in out.getvalue()
    assert "failed: 50 more, not listed" in err.getvalue()


def test_the_import_job_and_its_page_count_every_failure_and_list_the_first(
    api_as, admin_user, admin_client, settings, tmp_path
):
    settings.CLAWGYM_UPLOAD_DIR = tmp_path / "uploads"
    lines = [json.dumps(jsonl_line(task_id="j1"))] + ["{broken"] * 150
    upload = io.BytesIO(("\n".join(lines) + "\n").encode())
    upload.name = "tasks.jsonl"
    response = api_as(admin_user).post("/api/imports/", {"file": upload}, format="multipart")
    assert runner.execute(response.json()["id"]) == JobRun.Status.SUCCEEDED
    run = JobRun.objects.get(pk=response.json()["id"])
    assert (run.result["failed_count"], len(run.result["failed"])) == (150, 100)
    assert "imported 1, updated 0, unchanged 0, failed 150" in run.log_tail

    page = admin_client.get(reverse("jobs:detail", args=[run.pk])).content.decode()
    assert re.search(r'data-testid="failed">\s*150 failed', page)
    assert "The first 100 are listed; 150 failed in all." in page
    listing = admin_client.get(reverse("tasks:import")).content.decode()
    assert "150 failed" in listing


def test_a_json_file_nested_thousands_deep_is_shown_as_text(db, tmp_path, viewer_client):
    # An input file (or an agent's output in a rollout's workspace) is the task's content, not a reason for a 500.
    write_task(tmp_path / "src", "task_deep_file", files={"input_files/deep.json": DEEP_JSON})
    call_command("import_tasks", str(tmp_path / "src"), stdout=io.StringIO(), stderr=io.StringIO())
    response = viewer_client.get(reverse("tasks:file", args=["task_deep_file", 1, "input", "deep.json"]))
    assert response.status_code == 200
    assert "Not valid JSON (arrays or objects are nested too deeply: line 1 column 201" in response.content.decode()
