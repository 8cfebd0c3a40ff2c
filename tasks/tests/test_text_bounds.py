"""Bounds on the text of a task (instruction, rubric, metadata): every way in refuses an oversized one, saying so.

A 6.4 MB instruction was once accepted by import, the API and the editor, making its page take 8 s and sending it
whole to the diagnosis model. Import: that one task fails with the reason, the others import.
"""

import json

import pytest

from tasks.importing import import_path
from tasks.models import Task
from tasks.package import PackageError, PackageFile, TaskPackage
from tasks.services import revise_task, save_package
from tasks.tests.data.builders import RULE, jsonl_line, write_task

LIMIT = 64 * 1024
# A long instruction as a person pastes one: a log dump under a real request, a little over the default limit.
HUGE = "Find the failing request in this log and explain it in report.md.\n" + "GET /api/v1/items 200 12ms\n" * 2500


def package(**overrides) -> TaskPackage:
    fields = dict(
        external_id="log-triage",
        instruction="Triage app.log into report.md.",
        files=[PackageFile("app.log", b"GET / 200\n")],
    )
    return TaskPackage(**(fields | overrides))


def test_the_default_instruction_limit_is_64_kib(settings):
    assert settings.CLAWGYM_MAX_INSTRUCTION_BYTES == LIMIT and len(HUGE.encode()) > LIMIT


@pytest.mark.django_db
@pytest.mark.parametrize(
    "overrides, error",
    [
        (
            {"instruction": HUGE},
            f"the instruction is {len(HUGE):,} bytes, over the limit of 65,536 bytes (CLAWGYM_MAX_INSTRUCTION_BYTES)",
        ),
        ({"metadata": {"notes": "x" * LIMIT}}, "the metadata is 65,549 bytes as JSON, over the limit of 65,536"),
        ({"entry_extra": {"input_mount_dir": "x" * LIMIT}}, "the extra entry data is"),
        (
            {"rubric": [RULE | {"name": f"rule {n}", "scores": {"0": "no", "1": "y" * 4000}} for n in range(20)]},
            "the rubric is",
        ),
        ({"checker_entry": "bash reward/reward.sh " + "-v " * 200}, "the checker entry command is 622 characters"),
    ],
)
def test_oversized_task_text_is_refused_and_nothing_is_written(overrides, error):
    with pytest.raises(PackageError, match=error.replace("(", r"\(").replace(")", r"\)")):
        save_package(package(**overrides))
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_multibyte_text_is_measured_in_bytes(settings):
    settings.CLAWGYM_MAX_INSTRUCTION_BYTES = 10
    with pytest.raises(PackageError, match="the instruction is 11 bytes, over the limit of 10 bytes"):
        save_package(package(instruction="ünïcödé"))  # 7 characters, 11 bytes
    assert save_package(package(instruction="résumé")).revision.instruction == "résumé"  # 8 bytes


@pytest.mark.django_db
def test_an_editor_change_is_bounded_too(reviewer):
    task = save_package(package()).task
    with pytest.raises(PackageError, match="the instruction is .* over the limit"):
        revise_task(task, user=reviewer, message="paste the log", instruction=HUGE)
    assert task.revisions.count() == 1


@pytest.mark.django_db
def test_import_fails_only_the_oversized_task_in_every_format(tmp_path):
    # ClawGym folders
    root = tmp_path / "folders"
    write_task(root, "task_small")
    write_task(root, "task_huge", entry={"user_query": HUGE})
    report = import_path(root)
    assert report.imported == 1 and [f["source"] for f in report.failed] == ["task_huge"]
    error = report.failed[0]["error"]
    assert error == "the instruction is 67,566 bytes, over the limit of 65,536 bytes (CLAWGYM_MAX_INSTRUCTION_BYTES)"

    # ClawGym JSONL
    lines = [jsonl_line(task_id="line-1"), jsonl_line(task_id="line-2", prompt=HUGE), jsonl_line(task_id="line-3")]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = import_path(tmp_path / "tasks.jsonl")
    assert report.imported == 2 and [f["source"] for f in report.failed] == ["tasks.jsonl line 2"]
    assert "the instruction is" in report.failed[0]["error"]

    # PinchBench markdown
    bench = tmp_path / "pinchbench"
    (bench / "tasks").mkdir(parents=True)
    task_md = "---\nid: {id}\ngrading_type: llm_judge\n---\n## Prompt\n{prompt}\n## Grading Criteria\n- [ ] done\n"
    (bench / "tasks" / "task_ok.md").write_text(task_md.format(id="task_ok", prompt="Write hello.txt."))
    (bench / "tasks" / "task_log.md").write_text(task_md.format(id="task_log", prompt=HUGE))
    report = import_path(bench)
    assert report.imported == 1 and [f["source"] for f in report.failed] == ["tasks/task_log.md"]
    assert "the instruction is" in report.failed[0]["error"]


# --- the API ---------------------------------------------------------------------------------------------------


def test_the_api_refuses_an_oversized_instruction_on_create_and_edit(api_as, admin_user, reviewer):
    body = {"external_id": "log-triage", "instruction": HUGE, "files": [{"path": "app.log", "content": "GET /\n"}]}
    created = api_as(admin_user).post("/api/tasks/", body, format="json")
    assert created.status_code == 400
    assert created.json()["instruction"] == [
        f"the instruction is {len(HUGE):,} bytes, over the limit of 65,536 bytes (CLAWGYM_MAX_INSTRUCTION_BYTES)"
    ]
    assert not Task.objects.exists()

    small = body | {"instruction": "Triage app.log."}
    assert api_as(admin_user).post("/api/tasks/", small, format="json").status_code == 201
    edit = api_as(reviewer).patch("/api/tasks/log-triage/", {"instruction": HUGE, "message": "log"}, format="json")
    assert edit.status_code == 400 and "CLAWGYM_MAX_INSTRUCTION_BYTES" in edit.json()["instruction"][0]
    rubric = [RULE | {"name": f"rule {n}", "scores": {"0": "no", "1": "y" * 4000}} for n in range(20)]
    edit = api_as(reviewer).patch("/api/tasks/log-triage/", {"rubric": rubric, "message": "rubric"}, format="json")
    assert edit.status_code == 400 and "CLAWGYM_MAX_RUBRIC_BYTES" in edit.json()["rubric"][0]
    metadata = {"notes": "x" * LIMIT}
    edit = api_as(reviewer).patch("/api/tasks/log-triage/", {"metadata": metadata, "message": "m"}, format="json")
    assert edit.status_code == 400 and "CLAWGYM_MAX_METADATA_BYTES" in edit.json()["metadata"][0]
    assert Task.objects.get().revisions.count() == 1


@pytest.mark.django_db
def test_text_that_is_not_unicode_fails_its_task_alone(tmp_path):
    # JSON may spell a lone surrogate ("\ud800"); json.loads takes it, but no database can store it.
    lines = [
        '{"task_id": "ok-1", "prompt": "Count rows.", "hook_code": "", "input_files": [], "rule": null}',
        '{"task_id": "bad-2", "prompt": "Count rows \\ud800 of data.csv.", "hook_code": "", "input_files": [],'
        ' "rule": null}',
        '{"task_id": "bad-3", "prompt": "Count rows.", "hook_code": "", "input_files": [], "rule": null,'
        ' "metadata": {"note": "caf\\udce9"}}',
        '{"task_id": "ok-4", "prompt": "Sum rows.", "hook_code": "", "input_files": [], "rule": null}',
    ]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    report = import_path(tmp_path / "tasks.jsonl")
    assert report.imported == 2
    assert {f["source"]: f["error"] for f in report.failed} == {
        "tasks.jsonl line 2": "the instruction is not valid Unicode text: it holds \\ud800 at character 11",
        "tasks.jsonl line 3": "the metadata is not valid Unicode text: it holds \\udce9",
    }
    assert set(Task.objects.values_list("external_id", flat=True)) == {"ok-1", "ok-4"}
