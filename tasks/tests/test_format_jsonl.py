"""Reading and writing ClawGym JSONL (no database: the format alone)."""

import base64
import json

import pytest

from tasks.formats import ReadFailure, detect_format, get_format
from tasks.formats.base import LAYOUT_KEY
from tasks.package import STANDARD_REWARD_SH
from tasks.tests.data.builders import CHECK_PY, RULE, jsonl_line, write_jsonl

fmt = get_format("clawgym-jsonl")


def read_all(path):
    return list(fmt.read(path))


def files_of(package):
    return {(f.role, f.path): f.data for f in package.files}


def test_reads_a_line_into_a_package(tmp_path):
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    line = jsonl_line(
        task_id="count-rows-1",
        metadata={"category": "Data"},
        rule=[RULE],
        input_files=[
            {"file_path": "data.csv", "content": "a,b\n1,2\n"},
            {"file_path": "img/logo.png", "content": base64.b64encode(png).decode(), "encoding": "base64"},
            {"file_path": "reward/expected.json", "content": '{"rows": 1}'},
        ],
        solution_files=[{"file_path": "count.txt", "content": "1\n"}],
    )
    (package,) = read_all(write_jsonl(tmp_path / "t.jsonl", [line]))

    assert package.external_id == "count-rows-1" and package.origin == "t.jsonl line 1"
    assert package.instruction == line["prompt"]
    assert package.metadata == {"category": "Data"}
    assert package.rubric == [RULE] and package.code_weight == 0.7
    assert package.entry_extra == {"origin_template": "count-rows"}
    assert files_of(package) == {
        ("input", "data.csv"): b"a,b\n1,2\n",
        ("input", "img/logo.png"): png,
        ("reward", "expected.json"): b'{"rows": 1}',
        ("reward", "check.py"): CHECK_PY.encode(),
        ("reward", "reward.sh"): STANDARD_REWARD_SH.encode(),
        ("solution", "count.txt"): b"1\n",
    }


def test_a_checker_given_in_input_files_wins_over_hook_code(tmp_path):
    line = jsonl_line(
        input_files=[
            {"file_path": "reward/check.py", "content": "print('{}')"},
            {"file_path": "reward/reward.sh", "content": "#!/bin/sh\necho 1\n"},
        ]
    )
    (package,) = read_all(write_jsonl(tmp_path / "t.jsonl", [line]))
    assert files_of(package)[("reward", "check.py")] == b"print('{}')"
    assert files_of(package)[("reward", "reward.sh")] == b"#!/bin/sh\necho 1\n"
    # ...and the line is still written back exactly, hook_code included.
    written = fmt.line_to_write(package)
    assert {k: v for k, v in written.items() if k != "task_id"} == line


def test_without_hook_code_there_is_no_checker(tmp_path):
    (package,) = read_all(write_jsonl(tmp_path / "t.jsonl", [jsonl_line(hook_code="")]))
    assert [f for f in package.files if f.role == "reward"] == []


@pytest.mark.parametrize(
    "rule, rubric_names, code_weight",
    [
        (None, [], 0.7),
        ([RULE], ["clear summary"], 0.7),
        ({"rules": [RULE], "lambda": 0.4}, ["clear summary"], 0.4),
        ({"rules": None, "lambda": 1}, [], 1.0),
        ("The report names both totals.", ["rubric"], 0.7),
        ("", [], 0.7),
    ],
)
def test_rule_forms(tmp_path, rule, rubric_names, code_weight):
    (package,) = read_all(write_jsonl(tmp_path / "t.jsonl", [jsonl_line(rule=rule)]))
    assert [r["name"] for r in package.rubric] == rubric_names
    assert package.code_weight == code_weight


def test_free_text_rule_gets_five_graded_descriptions(tmp_path):
    (package,) = read_all(write_jsonl(tmp_path / "t.jsonl", [jsonl_line(rule="The report names both totals.")]))
    (rule,) = package.rubric
    assert sorted(rule["scores"]) == ["0", "0.25", "0.5", "0.75", "1"]
    assert all("The report names both totals." in text for text in rule["scores"].values())
    assert len(set(rule["scores"].values())) == 5


def test_missing_task_id_gives_a_stable_content_derived_id(tmp_path):
    a, b, c = read_all(write_jsonl(tmp_path / "t.jsonl", [jsonl_line(), jsonl_line(), jsonl_line(prompt="Other.")]))
    assert a.external_id == b.external_id != c.external_id
    assert a.external_id.startswith("jsonl-") and len(a.external_id) == len("jsonl-") + 16


def test_bad_lines_are_reported_with_their_line_number_and_skipped(tmp_path):
    path = write_jsonl(
        tmp_path / "batch.jsonl",
        [
            jsonl_line(task_id="good-1"),
            '{"prompt": "broken",',
            jsonl_line(task_id="no-prompt", prompt=None),
            "",
            jsonl_line(task_id="bad-path", input_files=[{"file_path": "../etc/passwd", "content": "x"}]),
            jsonl_line(task_id="abs-path", input_files=[{"file_path": "/etc/passwd", "content": "x"}]),
            jsonl_line(task_id="bad-b64", input_files=[{"file_path": "a.bin", "content": "!!", "encoding": "base64"}]),
            jsonl_line(task_id="bad-rule", rule=42),
            jsonl_line(
                task_id="twice", input_files=[{"file_path": "a", "content": "1"}, {"file_path": "a", "content": "2"}]
            ),
            "[1, 2]",
            jsonl_line(task_id="good-2"),
        ],
    )
    results = read_all(path)
    assert fmt.count(path) == len(results) == 10
    assert [r.external_id for r in results if not isinstance(r, ReadFailure)] == ["good-1", "good-2"]
    failures = {r.source: r.error for r in results if isinstance(r, ReadFailure)}
    assert failures == {
        "batch.jsonl line 2": "batch.jsonl line 2: not valid JSON (Expecting property name enclosed in double "
        "quotes at column 21)",
        "batch.jsonl line 3": "batch.jsonl line 3: missing 'prompt' (the task instruction, a non-empty string)",
        "batch.jsonl line 5": "batch.jsonl line 5: input_files[0] ('../etc/passwd'): '..' is not allowed in a path",
        "batch.jsonl line 6": "batch.jsonl line 6: input_files[0] ('/etc/passwd'): absolute paths are not allowed",
        "batch.jsonl line 7": "batch.jsonl line 7: input_files[0] ('a.bin'): content is not valid base64",
        "batch.jsonl line 8": 'batch.jsonl line 8: \'rule\' must be a list of rules, {"rules": [...], "lambda": λ}, '
        "free text, or null",
        "batch.jsonl line 9": "batch.jsonl line 9: input_files[1] ('a'): the same file is listed twice",
        "batch.jsonl line 10": "batch.jsonl line 10: the line must hold a JSON object",
    }


def test_detects_jsonl_files_and_folders_holding_them(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [jsonl_line()])
    assert detect_format(path) is fmt and detect_format(tmp_path) is fmt


LINES = {
    "plain": jsonl_line(),
    "with id and metadata": jsonl_line(task_id="x-1", metadata={"category": "Data", "n": 1.5}),
    "empty metadata": jsonl_line(metadata={}),
    "rubric list": jsonl_line(rule=[RULE]),
    "loose rubric": jsonl_line(
        rule=[{"name": "r", "scores": {"0.0": "a", "0.25": "b", "0.5": "c", "0.75": "d", "1.0": "e"}}]
    ),
    "rule object with default lambda": jsonl_line(rule={"rules": [RULE], "lambda": 0.7}),
    "rule object": jsonl_line(rule={"rules": [RULE], "lambda": 0.25}),
    "free text rule": jsonl_line(rule="Names both totals."),
    "rule absent": {k: v for k, v in jsonl_line().items() if k != "rule"},
    "hook_code null, no checker": jsonl_line(hook_code=None),
    "hook_code absent": {k: v for k, v in jsonl_line().items() if k != "hook_code"},
    "binary and text files, unsorted": jsonl_line(
        input_files=[
            {"file_path": "z.txt", "content": "z"},
            {"file_path": "reward/answer.json", "content": "{}"},
            {"file_path": "a.bin", "content": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64"},
            {"file_path": "b.txt", "content": base64.b64encode(b"text").decode(), "encoding": "base64"},
        ]
    ),
    "standard reward.sh listed": jsonl_line(
        input_files=[{"file_path": "reward/reward.sh", "content": STANDARD_REWARD_SH}]
    ),
    "check.py listed and hook_code": jsonl_line(input_files=[{"file_path": "reward/check.py", "content": "x = 1"}]),
    "solution files": jsonl_line(solution_files=[{"file_path": "out.txt", "content": "3\n"}]),
    "no input_files key": {k: v for k, v in jsonl_line().items() if k != "input_files"},
    "other keys": jsonl_line(difficulty="hard", tags=["a", "b"], checker_entry="python3 reward/check.py"),
}


@pytest.mark.parametrize("line", LINES.values(), ids=LINES.keys())
def test_every_line_shape_is_written_back_json_equal(tmp_path, line):
    packages = read_all(write_jsonl(tmp_path / "in.jsonl", [line]))
    assert not any(isinstance(p, ReadFailure) for p in packages), packages
    fmt.write(packages, tmp_path / "out.jsonl")
    (written,) = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(written) == line


def test_an_edited_task_is_written_from_its_content(tmp_path):
    line = jsonl_line(input_files=[{"file_path": "z.txt", "content": "z"}, {"file_path": "a.txt", "content": "a"}])
    (package,) = read_all(write_jsonl(tmp_path / "in.jsonl", [line]))
    assert LAYOUT_KEY in package.entry_extra  # no task_id, unsorted files: remembered
    package.files = [f for f in package.files if f.path != "z.txt"]

    written = fmt.line_to_write(package)
    assert written["task_id"] == package.external_id  # content changed, so the derived id must be written
    assert written["input_files"] == [{"file_path": "a.txt", "content": "a"}]
    assert written["hook_code"] == CHECK_PY and written["rule"] is None


def test_input_file_under_reward_cannot_be_written(tmp_path):
    (package,) = read_all(write_jsonl(tmp_path / "in.jsonl", [jsonl_line(task_id="t")]))
    package.files.append(type(package.files[0])(path="reward/x.txt", data=b"x", role="input"))
    with pytest.raises(ValueError, match="input file 'reward/x.txt' cannot be written to JSONL"):
        fmt.write([package], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()
