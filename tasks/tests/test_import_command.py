"""The import_tasks and export_tasks management commands."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task
from tasks.tests.data.builders import jsonl_line, tree, write_jsonl, write_task


def run(*args, **options):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_import_json_report_is_the_last_line(db, tmp_path):
    write_task(tmp_path / "src", "task_a")
    write_task(tmp_path / "src", "task_b")
    (tmp_path / "src" / "not_a_task").mkdir()

    out, err = run("import_tasks", str(tmp_path / "src"), "--json")
    assert json.loads(out.strip().splitlines()[-1]) == {
        "imported": 2,
        "updated": 0,
        "unchanged": 0,
        "failed": [{"source": "not_a_task", "error": "not_a_task: not a task folder: it has no data_entry.json"}],
        "failed_count": 1,
    }
    assert "failed: not_a_task: " in err

    out, _ = run("import_tasks", str(tmp_path / "src"), "--json")
    assert json.loads(out.strip().splitlines()[-1])["unchanged"] == 2


def test_import_with_explicit_format_and_plain_output(db, tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [jsonl_line(task_id="j1"), "{broken"])
    out, err = run("import_tasks", str(path), "--format", "clawgym-jsonl")
    assert "imported 1, updated 0, unchanged 0, failed 1" in out
    assert "tasks.jsonl line 2" in err
    assert Task.objects.filter(external_id="j1").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["/no/such/path"], "/no/such/path does not exist"),
        (["{src}", "--format", "csv"], "unknown task format 'csv'; choose one of clawgym, clawgym-jsonl, pinchbench"),
        (["{empty}"], "cannot tell the task format of 'empty'"),
    ],
)
def test_import_refuses_what_it_cannot_run(db, tmp_path, args, message):
    write_task(tmp_path / "src", "task_a")
    (tmp_path / "empty").mkdir()
    args = [a.format(src=tmp_path / "src", empty=tmp_path / "empty") for a in args]
    with pytest.raises(CommandError, match=message):
        run("import_tasks", *args)
    assert not Task.objects.exists()


def test_exit_status(db, tmp_path):
    """manage.py exits with CommandError.returncode (1) when the import could not run, 0 when it returns."""
    write_task(tmp_path / "src", "task_a")
    (tmp_path / "src" / "broken").mkdir()
    with pytest.raises(CommandError) as missing:
        run("import_tasks", str(tmp_path / "nope"))
    assert missing.value.returncode == 1
    out, _ = run("import_tasks", str(tmp_path / "src"), "--json")  # one task failed: still no error
    assert len(json.loads(out.splitlines()[-1])["failed"]) == 1


def test_export_folder_and_selected_tasks(db, tmp_path):
    for name in ("task_a", "task_b", "task_c"):
        write_task(tmp_path / "src", name)
    run("import_tasks", str(tmp_path / "src"))

    out, _ = run("export_tasks", str(tmp_path / "all"))
    assert "exported 3 tasks" in out
    assert tree(tmp_path / "all").keys() == tree(tmp_path / "src").keys()

    out, _ = run("export_tasks", str(tmp_path / "some"), "--task", "task_c", "task_a")
    assert "exported 2 tasks" in out
    assert sorted(p.name for p in (tmp_path / "some").iterdir()) == ["task_a", "task_c"]

    run("export_tasks", str(tmp_path / "one.jsonl"), "--format", "clawgym-jsonl", "--task", "task_b")
    (line,) = (tmp_path / "one.jsonl").read_text().splitlines()
    assert json.loads(line)["task_id"] == "task_b"


def test_export_refusals(db, tmp_path):
    write_task(tmp_path / "src", "task_a")
    run("import_tasks", str(tmp_path / "src"))
    with pytest.raises(CommandError, match="no such task: nope, nada"):
        run("export_tasks", str(tmp_path / "out"), "--task", "task_a", "nope", "--task", "nada")
    assert not (tmp_path / "out").exists()
    with pytest.raises(CommandError, match="the pinchbench format is import only"):
        run("export_tasks", str(tmp_path / "out"), "--format", "pinchbench")
    with pytest.raises(CommandError, match="unknown task format 'yaml'"):
        run("export_tasks", str(tmp_path / "out"), "--format", "yaml")
    with pytest.raises(CommandError, match="must be a new or empty folder"):
        run("export_tasks", str(tmp_path / "src"))
