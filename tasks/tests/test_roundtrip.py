"""Import then export through the catalog reproduces the source exactly; re-imports behave."""

import json
from pathlib import Path

import pytest

from tasks.exporting import export_tasks
from tasks.importing import import_path
from tasks.models import Task
from tasks.package import DEFAULT_CHECKER_ENTRY
from tasks.services import revise_task
from tasks.tests.data.builders import RULE, jsonl_line, tree, write_jsonl, write_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def assert_same_folders(src: Path, out: Path):
    """Every file byte for byte, data_entry.json JSON-equal."""
    a, b = tree(src), tree(out)
    assert sorted(a) == sorted(b)
    for rel in a:
        if rel.endswith("data_entry.json"):
            assert json.loads(a[rel]) == json.loads(b[rel]), rel
        else:
            assert a[rel] == b[rel], rel


SPELLINGS = [
    {},
    {"lambda": 0.7},
    {"rubric": []},
    {"checker_entry": DEFAULT_CHECKER_ENTRY},
    {"rubric": [], "lambda": 0.7, "checker_entry": DEFAULT_CHECKER_ENTRY, "input_mount_dir": "/root/ws"},
    {"rubric": [RULE], "lambda": 0.55, "checker_entry": "python3 reward/check.py", "input_mount_dir": "/ws"},
    {"rubric": [{"name": "loose", "scores": {"0.0": "a", "0.25": "b", "0.5": "c", "0.75": "d", "1.0": "e"}}]},
    {"notes": {"free": ["form", 1, None]}},
]


def test_folder_round_trip_is_exact(db, tmp_path):
    src = tmp_path / "src"
    for i, extra in enumerate(SPELLINGS):
        write_task(src, f"task_{i}", entry=extra)
    write_task(
        src,
        "binary",
        files={
            "input_files/img/logo.png": b"\x89PNG\x00\xff\xfe",
            "input_files/empty.txt": b"",
            "reward/check.py": "print('{}')\n",
        },
    )
    report = import_path(src)
    assert report.as_dict() == {
        "imported": len(SPELLINGS) + 1,
        "updated": 0,
        "unchanged": 0,
        "failed": [],
        "failed_count": 0,
    }

    assert export_tasks(tmp_path / "out") == len(SPELLINGS) + 1
    assert_same_folders(src, tmp_path / "out")


def test_jsonl_round_trip_is_json_equal_per_line(db, tmp_path):
    lines = [
        jsonl_line(),
        jsonl_line(task_id="with-id", metadata={"category": "Data"}, rule={"rules": [RULE], "lambda": 0.3}),
        jsonl_line(task_id="text-rule", rule="Names both totals.", hook_code=None),
        {k: v for k, v in jsonl_line(prompt="No rule key.").items() if k != "rule"},
        jsonl_line(
            task_id="files",
            input_files=[
                {"file_path": "z.txt", "content": "z"},
                {"file_path": "reward/answer.json", "content": "{}"},
                {"file_path": "a.bin", "content": "AP8=", "encoding": "base64"},
            ],
            solution_files=[{"file_path": "out.txt", "content": "3\n"}],
        ),
    ]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    assert import_path(src).as_dict()["imported"] == len(lines)

    export_tasks(tmp_path / "out.jsonl", fmt="clawgym-jsonl")
    written = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert written == lines  # catalog order is import order


def test_jsonl_to_folder_to_jsonl(db, tmp_path):
    """A task travels through the other format and back with its meaning intact."""
    line = jsonl_line(task_id="travel", metadata={"category": "Data"}, rule=[RULE])
    import_path(write_jsonl(tmp_path / "in.jsonl", [line]))
    export_tasks(tmp_path / "folder")
    Task.objects.all().delete()
    import_path(tmp_path / "folder")
    export_tasks(tmp_path / "again.jsonl", fmt="clawgym-jsonl")
    assert json.loads((tmp_path / "again.jsonl").read_text()) == line


def test_reimport_of_identical_content_creates_nothing(db, tmp_path):
    write_task(tmp_path / "src", "task_a")
    write_task(tmp_path / "src", "task_b", entry={"lambda": 0.7})
    import_path(tmp_path / "src")
    revisions = sorted(Task.objects.values_list("external_id", "current_revision_id"))

    assert import_path(tmp_path / "src").as_dict() == {
        "imported": 0,
        "updated": 0,
        "unchanged": 2,
        "failed": [],
        "failed_count": 0,
    }
    assert sorted(Task.objects.values_list("external_id", "current_revision_id")) == revisions
    assert Task.objects.get(external_id="task_a").revisions.count() == 1


def test_changed_content_creates_revision_2_with_parent_1(db, tmp_path, admin_user):
    folder = write_task(tmp_path / "src", "task_a")
    import_path(tmp_path / "src", user=admin_user)
    (folder / "input_files" / "notes.md").write_text("# Notes\n- one\n- two\n- three\n")

    assert import_path(tmp_path / "src").as_dict() == {
        "imported": 0,
        "updated": 1,
        "unchanged": 0,
        "failed": [],
        "failed_count": 0,
    }
    task = Task.objects.get(external_id="task_a")
    r2, r1 = task.revisions.order_by("-number")
    assert (r1.number, r2.number) == (1, 2)
    assert task.current_revision == r2 and r2.parent == r1
    assert r1.author_user == admin_user and r1.author_stage == "import"
    assert task.source == Task.Source.IMPORTED
    assert r2.files.get(path="notes.md").blob.content.endswith(b"- three\n")


def test_a_bad_task_in_a_batch_is_skipped_and_reported(db, tmp_path):
    src = tmp_path / "src"
    write_task(src, "task_a")
    write_task(src, "task_bad", entry={"task_id": "bad id with spaces"})
    write_task(src, "task_c")
    (src / "task_c" / "stray.txt").write_text("x")
    write_task(src, "task_d")

    report = import_path(src).as_dict()
    assert report["imported"] == 2
    assert report["failed"] == [
        {
            "source": "task_bad",
            "error": "task id 'bad id with spaces' must be 1-200 characters of letters, digits, "
            "'.', '_' or '-' and start with a letter or digit",
        },
        {
            "source": "task_c",
            "error": "task_c: unexpected entry 'stray.txt' in the task folder (allowed: "
            "data_entry.json, input_files/, reward/, solution/)",
        },
    ]
    assert set(Task.objects.values_list("external_id", flat=True)) == {"task_a", "task_d"}


def test_a_single_wrapping_folder_is_looked_into(db, tmp_path):
    write_task(tmp_path / "upload" / "tasks", "task_a")
    assert import_path(tmp_path / "upload").imported == 1


@pytest.mark.parametrize("fmt", [None, "pinchbench"])
def test_input_without_tasks_is_an_error(db, tmp_path, fmt):
    from tasks.formats import FormatError

    write_jsonl(tmp_path / "empty.jsonl", [])
    write_task(tmp_path / "folder", "task_a")
    path = tmp_path / ("empty.jsonl" if fmt is None else "folder")
    with pytest.raises(FormatError, match=f"found no tasks in {path.name} "):
        import_path(path, fmt=fmt)


def test_the_same_task_twice_in_one_import_is_reported(db, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [jsonl_line(task_id="dup"), jsonl_line(task_id="dup", prompt="Other")])
    report = import_path(path).as_dict()
    assert report["imported"] == 1
    assert report["failed"] == [
        {"source": "t.jsonl line 2", "error": "task id 'dup' was already imported from t.jsonl line 1 in this import"}
    ]


def test_export_after_a_reviewer_edit_writes_the_current_revision(db, tmp_path, reviewer):
    write_task(tmp_path / "src", "task_a", entry={"lambda": 0.7, "rubric": []})
    import_path(tmp_path / "src")
    task = Task.objects.get(external_id="task_a")
    revise_task(
        task,
        user=reviewer,
        message="weigh the rubric",
        rubric=[RULE],
        code_weight=0.5,
        file_changes={("input", "notes.md"): b"new notes\n"},
    )

    export_tasks(tmp_path / "out")
    entry = json.loads((tmp_path / "out" / "task_a" / "data_entry.json").read_text())
    assert entry["rubric"] == [RULE] and entry["lambda"] == 0.5
    assert (tmp_path / "out" / "task_a" / "input_files" / "notes.md").read_bytes() == b"new notes\n"


def example_folders() -> list[Path]:
    if not EXAMPLES.is_dir():
        return []
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and (p / "data_entry.json").is_file())


def test_example_tasks_round_trip_exactly(db, tmp_path):
    folders = example_folders()
    assert folders, f"no example task folders found in {EXAMPLES}"
    report = import_path(EXAMPLES)
    assert report.failed == []
    assert report.imported == len(folders)

    export_tasks(tmp_path / "out")
    for folder in folders:
        entry = json.loads((folder / "data_entry.json").read_text())
        assert_same_folders(folder, tmp_path / "out" / entry["task_id"])
    assert (
        tmp_path / "out" / json.loads((folders[0] / "data_entry.json").read_text())["task_id"] / "reward" / "reward.sh"
    ).stat().st_mode & 0o111


def test_example_tasks_exported_as_jsonl_and_imported_back_are_unchanged(db, tmp_path):
    # A folder's spelling (a key given its default value, say) is kept as the folder format's layout record; reading
    # the same tasks from another format must keep it, not make a new revision without it.
    import_path(EXAMPLES)
    before = dict(Task.objects.values_list("external_id", "current_revision_id"))
    spelt = [
        t for t in Task.objects.select_related("current_revision") if t.current_revision.entry_extra.get("_layout")
    ]
    assert spelt, "no example task keeps a layout record: this test checks nothing"
    export_tasks(tmp_path / "all.jsonl", fmt="clawgym-jsonl")
    report = import_path(tmp_path / "all.jsonl", fmt="clawgym-jsonl")
    assert (report.imported, report.updated, report.failed) == (0, 0, [])
    assert report.unchanged == len(before)
    assert dict(Task.objects.values_list("external_id", "current_revision_id")) == before
    # And the folders still come back exactly as they were.
    export_tasks(tmp_path / "out")
    for folder in example_folders():
        entry = json.loads((folder / "data_entry.json").read_text())
        assert_same_folders(folder, tmp_path / "out" / entry["task_id"])


@pytest.mark.parametrize("fmt", ["clawgym", "clawgym-jsonl"])
def test_export_of_an_empty_catalog(db, tmp_path, fmt):
    assert export_tasks(tmp_path / "out", fmt=fmt) == 0
