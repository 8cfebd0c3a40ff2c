import pytest

from tasks.diffing import (
    MAX_DIFF_LINES,
    diff_lines,
    diff_mapping,
    diff_revisions,
    diff_rubric,
)
from tasks.package import PackageFile, TaskPackage
from tasks.services import revise_task, save_package


def rule(name, weight=1.0, best="all done"):
    return {
        "name": name,
        "target_file": "report.md",
        "scores": {"0": "nothing", "0.25": "little", "0.5": "half", "0.75": "most", "1": best},
        "weight": weight,
    }


def test_diff_lines_classifies_unified_diff():
    lines = diff_lines("a\nb\nc\n", "a\nB\nc\nd\n", "r1/x", "r2/x")
    kinds = [(line.kind, line.text) for line in lines]
    assert kinds[0] == ("head", "--- r1/x")
    assert kinds[1] == ("head", "+++ r2/x")
    assert kinds[2][0] == "hunk"
    assert ("del", "-b") in kinds
    assert ("add", "+B") in kinds
    assert ("add", "+d") in kinds
    assert ("ctx", " a") in kinds


def test_diff_lines_equal_texts_give_nothing():
    assert diff_lines("same\n", "same\n") == []


def test_diff_lines_are_cut_at_the_limit():
    old = "\n".join(f"old {i}" for i in range(MAX_DIFF_LINES))
    new = "\n".join(f"new {i}" for i in range(MAX_DIFF_LINES))
    lines = diff_lines(old, new)
    assert len(lines) == MAX_DIFF_LINES + 1
    assert "cut" in lines[-1].text


def test_diff_mapping_reports_added_removed_changed_keys():
    changes = diff_mapping({"a": 1, "b": "x", "same": [1]}, {"b": "y", "c": {"k": 2}, "same": [1]}, "metadata")
    by_name = {c.name: (c.old, c.new) for c in changes}
    assert by_name == {"metadata.a": ("1", None), "metadata.b": ("x", "y"), "metadata.c": (None, '{"k": 2}')}


def test_diff_rubric_matches_rules_by_name():
    old = [rule("clarity"), rule("accuracy", weight=1.0), rule("dropped")]
    new = [rule("clarity"), rule("accuracy", weight=2.0), rule("added")]
    changes = {c.name: c for c in diff_rubric(old, new)}
    assert set(changes) == {"rubric rule “accuracy”", "rubric rule “added”", "rubric rule “dropped”"}
    assert '"weight": 1.0' in changes["rubric rule “accuracy”"].old
    assert '"weight": 2.0' in changes["rubric rule “accuracy”"].new
    assert changes["rubric rule “added”"].old is None
    assert changes["rubric rule “dropped”"].new is None


def test_diff_rubric_notices_reordering():
    changes = diff_rubric([rule("a"), rule("b")], [rule("b"), rule("a")])
    assert [c.name for c in changes] == ["rubric order"]


@pytest.fixture
def two_revisions(db, admin_user):
    first = save_package(
        TaskPackage(
            external_id="diff-task",
            instruction="Summarise the sales.\n\nWrite report.md.",
            metadata={"category": "analysis-reasoning", "grading_type": "automated"},
            files=[
                PackageFile("sales.csv", b"region,total\nnorth,10\nsouth,20\n"),
                PackageFile("notes.txt", b"keep me\n"),
                PackageFile("old.txt", b"to be removed\n"),
                PackageFile("logo.bin", b"\x00\x01\x02"),
                PackageFile("check.py", b"print('{}')\n", role="reward"),
            ],
        )
    )
    second = revise_task(
        first.task,
        user=admin_user,
        message="clearer wording, fixed data",
        instruction="Summarise the sales by region.\n\nWrite report.md.",
        metadata={"category": "analysis-reasoning", "grading_type": "hybrid"},
        rubric=[rule("clarity")],
        code_weight=0.6,
        checker_entry="bash reward/run.sh",
        file_changes={
            ("input", "sales.csv"): b"region,total\nnorth,10\nsouth,25\n",
            ("input", "old.txt"): None,
            ("input", "new.md"): b"# New\n",
            ("input", "logo.bin"): b"\x00\x09",
        },
    )
    return first.revision, second.revision


def test_diff_revisions_end_to_end(two_revisions):
    old, new = two_revisions
    diff = diff_revisions(old, new)
    assert not diff.is_empty
    assert ("del", "-Summarise the sales.") in [(line.kind, line.text) for line in diff.instruction]
    assert ("add", "+Summarise the sales by region.") in [(line.kind, line.text) for line in diff.instruction]

    fields = {c.name: (c.old, c.new) for c in diff.fields}
    assert fields["λ (code weight)"] == ("0.7", "0.6")
    assert fields["checker entry"] == ("bash reward/reward.sh", "bash reward/run.sh")
    assert fields["metadata.grading_type"] == ("automated", "hybrid")
    assert fields["rubric rule “clarity”"][0] is None
    assert "metadata.category" not in fields

    files = {(f.role, f.path): f for f in diff.files}
    assert files[("input", "new.md")].status == "added"
    assert files[("input", "old.txt")].status == "removed"
    assert files[("input", "old.txt")].old_size == len(b"to be removed\n")
    csv_change = files[("input", "sales.csv")]
    assert csv_change.status == "modified"
    assert [line.text for line in csv_change.lines if line.kind in ("add", "del")] == ["-south,20", "+south,25"]
    assert csv_change.lines[0].text == "--- r1/sales.csv"
    assert files[("input", "logo.bin")].note == "binary file changed"
    assert files[("input", "logo.bin")].lines == []
    assert ("input", "notes.txt") not in files
    assert diff.unchanged_files == 2  # notes.txt and reward/check.py


def test_diff_of_a_revision_with_itself_is_empty(two_revisions):
    old, _ = two_revisions
    diff = diff_revisions(old, old)
    assert diff.is_empty
    assert diff.unchanged_files == 5


def test_diff_in_reverse_swaps_added_and_removed(two_revisions):
    old, new = two_revisions
    files = {f.path: f.status for f in diff_revisions(new, old).files}
    assert files["new.md"] == "removed"
    assert files["old.txt"] == "added"
