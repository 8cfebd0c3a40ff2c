"""Reading and writing ClawGym task folders (no database: the format alone)."""

import json
import os
import stat

import pytest

from tasks.formats import ReadFailure, detect_format, get_format
from tasks.formats.base import LAYOUT_KEY
from tasks.package import DEFAULT_CHECKER_ENTRY, STANDARD_REWARD_SH, PackageFile
from tasks.tests.data.builders import CHECK_PY, RULE, tree, write_task

fmt = get_format("clawgym")


def read_all(path):
    return list(fmt.read(path))


def test_reads_a_folder_of_task_folders(tmp_path):
    write_task(tmp_path, "task_a", entry={"input_mount_dir": "/workspace", "difficulty": "hard"})
    write_task(tmp_path, "task_b", entry={"rubric": [RULE], "lambda": 0.6, "checker_entry": "bash reward/run.sh"})
    (tmp_path / "README.md").write_text("not a task: files beside the task folders are ignored")

    a, b = read_all(tmp_path)
    assert a.external_id == "task_a" and a.origin == "task_a"
    assert a.instruction == "Summarise notes.md into report.md (task_a)."
    assert a.metadata == {"category": "Office", "grading_type": "code"}
    assert a.entry_extra == {"input_mount_dir": "/workspace", "difficulty": "hard"}
    assert {(f.role, f.path): f.data for f in a.files} == {
        ("input", "notes.md"): b"# Notes\n- one\n- two\n",
        ("reward", "reward.sh"): STANDARD_REWARD_SH.encode(),
        ("reward", "check.py"): CHECK_PY.encode(),
        ("solution", "report.md"): b"one, two\n",
    }
    assert (a.rubric, a.code_weight, a.checker_entry) == ([], 0.7, DEFAULT_CHECKER_ENTRY)
    assert b.rubric == [RULE] and b.code_weight == 0.6 and b.checker_entry == "bash reward/run.sh"
    assert LAYOUT_KEY not in b.entry_extra  # written exactly as this writer would: nothing to remember


def test_reads_one_task_folder_and_nested_files(tmp_path):
    folder = write_task(tmp_path, "solo", files={"input_files/docs/deep/x.json": "{}", "reward/check.py": "print(1)"})
    (package,) = read_all(folder)
    assert package.external_id == "solo"
    assert sorted((f.role, f.path) for f in package.files) == [("input", "docs/deep/x.json"), ("reward", "check.py")]
    assert detect_format(folder) is fmt and detect_format(tmp_path) is fmt


@pytest.mark.parametrize(
    "damage, source, error",
    [
        (lambda f: (f / "notes.txt").write_text("x"), "task_b", "unexpected entry 'notes.txt' in the task folder"),
        (lambda f: (f / "data_entry.json").unlink(), "task_b", "task_b: not a task folder: it has no data_entry.json"),
        (
            lambda f: (f / "data_entry.json").write_text('{"task_id": "task_b",\n "user_query": }'),
            "task_b",
            "task_b/data_entry.json: not valid JSON (Expecting value at line 2 column 16)",
        ),
        (
            lambda f: (f / "data_entry.json").write_text('["a list"]'),
            "task_b",
            "task_b/data_entry.json: must hold a JSON object",
        ),
        (
            lambda f: (f / "data_entry.json").write_text('{"user_query": "q"}'),
            "task_b",
            "task_b/data_entry.json: needs 'task_id', a non-empty string",
        ),
        (
            lambda f: (f / "data_entry.json").write_text('{"task_id": "task_b", "user_query": " "}'),
            "task_b",
            "task_b/data_entry.json: needs 'user_query', a non-empty string",
        ),
        (
            lambda f: (f / "data_entry.json").write_text(
                json.dumps({"task_id": "task_b", "user_query": "q", "rubric": [{"name": "r", "scores": {"1": "all"}}]})
            ),
            "task_b",
            "task_b/data_entry.json: rubric rule 1 (r): needs at least two score levels, e.g. 0 and 1",
        ),
        (
            lambda f: (f / "data_entry.json").write_text(
                json.dumps({"task_id": "task_b", "user_query": "q", "lambda": 2})
            ),
            "task_b",
            "task_b/data_entry.json: code weight λ must be a number in [0, 1], got 2",
        ),
        (
            lambda f: (f / "data_entry.json").write_text(
                json.dumps({"task_id": "task_b", "user_query": "q", "_layout": {}})
            ),
            "task_b",
            "the key '_layout' is reserved",
        ),
        (
            lambda f: os.symlink("/etc/passwd", f / "input_files" / "passwd"),
            "task_b",
            "task_b/input_files/passwd: symbolic links are not allowed",
        ),
        (
            lambda f: os.symlink("/etc", f / "input_files" / "etc"),
            "task_b",
            "task_b/input_files/etc: symbolic links are not allowed",
        ),
        (lambda f: os.mkfifo(f / "reward" / "pipe"), "task_b", "task_b/reward/pipe: not a regular file"),
        (
            lambda f: (f / "input_files" / "a\\b.txt").write_text("x"),
            "task_b",
            "task_b/input_files/a\\b.txt: path contains a backslash",
        ),
        (
            lambda f: ((f / "solution").rename(f / "sol"), os.symlink(f / "sol", f / "solution")),
            "task_b",
            "unexpected entry 'sol'",
        ),
    ],
)
def test_a_bad_task_is_reported_and_the_others_are_read(tmp_path, damage, source, error):
    write_task(tmp_path, "task_a")
    damage(write_task(tmp_path, "task_b"))
    write_task(tmp_path, "task_c")

    results = read_all(tmp_path)
    assert [r.external_id for r in results if not isinstance(r, ReadFailure)] == ["task_a", "task_c"]
    (failure,) = [r for r in results if isinstance(r, ReadFailure)]
    assert failure.source == source
    assert error in failure.error


def test_symlinked_role_folder_and_task_folder_are_refused(tmp_path):
    elsewhere = write_task(tmp_path / "elsewhere", "other")
    root = tmp_path / "root"
    write_task(root, "task_a")
    os.symlink(elsewhere, root / "linked_task")
    folder = write_task(root, "task_b", files={})
    os.symlink(elsewhere / "input_files", folder / "input_files")

    results = {r.source: r.error for r in read_all(root) if isinstance(r, ReadFailure)}
    assert results == {
        "linked_task": "linked_task: symbolic links are not allowed",
        "task_b": "task_b/input_files: must be a folder (symbolic links are not allowed)",
    }


def test_oversized_file_is_refused_before_it_is_read(tmp_path, settings):
    settings.CLAWGYM_MAX_FILE_BYTES = 1000
    write_task(tmp_path, "task_a", files={"input_files/big.bin": b"x" * 1001})
    (failure,) = read_all(tmp_path)
    assert failure.error == "task_a/input_files/big.bin: file is 1001 bytes, over the limit of 1000 bytes"


def test_write_makes_the_same_layout_with_executable_scripts(tmp_path):
    (package,) = read_all(write_task(tmp_path / "in", "task_a", entry={"input_mount_dir": "/ws"}))
    package.files.append(PackageFile(path="tools/run.sh", data=b"#!/bin/sh\necho hi\n", role="input"))

    assert fmt.write([package], tmp_path / "out") == 1
    out = tmp_path / "out" / "task_a"
    assert json.loads((out / "data_entry.json").read_text()) == {
        "task_id": "task_a",
        "user_query": "Summarise notes.md into report.md (task_a).",
        "metadata": {"category": "Office", "grading_type": "code"},
        "input_mount_dir": "/ws",
    }
    assert sorted(tree(out)) == [
        "data_entry.json",
        "input_files/notes.md",
        "input_files/tools/run.sh",
        "reward/check.py",
        "reward/reward.sh",
        "solution/report.md",
    ]
    assert stat.S_IMODE((out / "reward" / "reward.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "input_files" / "tools" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "reward" / "check.py").stat().st_mode) == 0o644


def test_write_refuses_to_overwrite_a_task_folder(tmp_path):
    (package,) = read_all(write_task(tmp_path / "in", "task_a"))
    fmt.write([package], tmp_path / "out")
    with pytest.raises(ValueError, match="already exists"):
        fmt.write([package], tmp_path / "out")


SPELLINGS = {
    "all optional keys absent": {},
    "lambda present with its default": {"lambda": 0.7},
    "lambda as an integer": {"lambda": 1},
    "rubric present but empty": {"rubric": []},
    "rubric null": {"rubric": None},
    "checker_entry present with its default": {"checker_entry": DEFAULT_CHECKER_ENTRY},
    "all present with defaults": {
        "rubric": [],
        "lambda": 0.7,
        "checker_entry": DEFAULT_CHECKER_ENTRY,
        "input_mount_dir": "/root/.openclaw/workspace",
    },
    "non-default values": {"rubric": [RULE], "lambda": 0.5, "checker_entry": "python3 reward/check.py"},
    "rubric spelled loosely": {
        "rubric": [{"name": "r", "scores": {"0.0": "a", "0.25": "b", "0.50": "c", "0.75": "d", "1.0": "e"}}]
    },
    "metadata absent": {"metadata": "absent"},
    "metadata null": {"metadata": None},
}


@pytest.mark.parametrize("extra", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_data_entry_is_written_back_as_it_was_read(tmp_path, extra):
    entry = {k: v for k, v in extra.items() if v != "absent"}
    folder = write_task(tmp_path / "in", "task_a", entry=entry)
    if extra.get("metadata") == "absent":
        data = json.loads((folder / "data_entry.json").read_text())
        del data["metadata"]
        (folder / "data_entry.json").write_text(json.dumps(data))
    original = json.loads((folder / "data_entry.json").read_text())

    (package,) = read_all(folder)
    fmt.write([package], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "task_a" / "data_entry.json").read_text()) == original


def test_remembered_spelling_gives_way_to_an_edited_task(tmp_path):
    loose = {"name": "r", "scores": {"0.0": "a", "0.25": "b", "0.50": "c", "0.75": "d", "1.0": "e"}}
    (package,) = read_all(write_task(tmp_path / "in", "task_a", entry={"rubric": [loose], "lambda": 0.7}))
    assert package.entry_extra[LAYOUT_KEY]["clawgym"]["values"] == {"rubric": [loose], "lambda": 0.7}

    package.rubric = [RULE]  # as a reviewer's revision would
    fmt.write([package], tmp_path / "out")
    entry = json.loads((tmp_path / "out" / "task_a" / "data_entry.json").read_text())
    assert entry["rubric"] == [RULE] and "lambda" not in entry and LAYOUT_KEY not in entry
