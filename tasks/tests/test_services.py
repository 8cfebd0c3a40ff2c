import pytest

from tasks.models import Blob, RevisionFile, Task, TaskRevision
from tasks.package import PackageError, PackageFile, TaskPackage
from tasks.paths import TaskFileError
from tasks.services import SaveOutcome, StaleRevisionError, revise_task, save_package

RUBRIC = [
    {
        "name": "tone",
        "target_file": "reply.md",
        "scores": {"0": "rude", "0.25": "curt", "0.5": "neutral", "0.75": "warm", "1": "warm and precise"},
        "weight": 2,
    }
]


def package(**overrides) -> TaskPackage:
    fields = dict(
        external_id="expense-summary",
        instruction="Summarise expenses.csv into summary.json\nwith totals per category.",
        metadata={
            "category": "Analysis & Reasoning",
            "grading_type": "code",
            "scenario_category": "data-analysis",
            "scenario_subcategory": "financial-analysis",
        },
        files=[
            PackageFile("expenses.csv", b"date,amount\n2026-01-01,3\n"),
            PackageFile("README.md", b"# notes\n"),
            PackageFile("check.py", b"print('{}')\n", role="reward"),
        ],
    )
    fields.update(overrides)
    return TaskPackage(**fields)


@pytest.mark.django_db
def test_new_task_gets_revision_one_with_files_and_categories():
    result = save_package(package(), stage="import")
    assert result.outcome is SaveOutcome.CREATED
    task = Task.objects.get(external_id="expense-summary")
    assert task.current_revision == result.revision
    assert result.revision.number == 1 and result.revision.parent is None
    assert result.revision.author == "import"
    assert task.title == "Summarise expenses.csv into summary.json"
    assert task.benchmark_category.name == "Analysis & Reasoning"
    assert task.scenario_category.slug == "data-analysis"
    assert task.scenario_subcategory.slug == "financial-analysis"
    files = {(f.role, f.path): f.blob.content for f in result.revision.files.all()}
    assert files[("input", "expenses.csv")] == b"date,amount\n2026-01-01,3\n"
    assert files[("reward", "check.py")] == b"print('{}')\n"


@pytest.mark.django_db
def test_identical_content_creates_nothing_and_changes_make_a_child_revision():
    first = save_package(package())
    again = save_package(package())
    assert again.outcome is SaveOutcome.UNCHANGED
    assert again.revision == first.revision
    assert TaskRevision.objects.count() == 1

    changed = save_package(package(instruction="Summarise expenses per month."))
    assert changed.outcome is SaveOutcome.UPDATED
    assert changed.revision.number == 2
    assert changed.revision.parent == first.revision
    first.revision.refresh_from_db()
    assert first.revision.instruction.startswith("Summarise expenses.csv")  # nothing overwritten


@pytest.mark.django_db
def test_identical_files_are_stored_once():
    save_package(package())
    save_package(package(external_id="other-task"))
    assert Blob.objects.count() == 3
    assert RevisionFile.objects.count() == 6


@pytest.mark.django_db
def test_revisions_are_immutable():
    revision = save_package(package()).revision
    revision.instruction = "tampered"
    with pytest.raises(ValueError, match="immutable"):
        revision.save()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"external_id": "../evil"}, "task id"),
        ({"instruction": "  "}, "instruction"),
        ({"files": [PackageFile("../x", b"")]}, "'..'"),
        ({"files": [PackageFile("a.txt", b"", role="secret")]}, "unknown file role"),
        ({"rubric": [{"name": "r", "scores": {"1": "b"}}]}, "needs at least two score levels"),
        ({"rubric": [{"name": "r", "scores": {"0": "a", "1.2": "b"}}]}, r"score level '1.2' is not in \[0, 1\]"),
        ({"rubric": [{"name": "r", "scores": {"0": "a", "nan": "b"}}]}, r"score level 'nan' is not in \[0, 1\]"),
        ({"rubric": [{"name": "r", "scores": {"0": "a", "1": "b", "1.0": "c"}}]}, "score level 1 is given twice"),
        ({"rubric": [{"name": "r", "scores": {"0": "a", "0.5": " "}}]}, "the description for score 0.5 is empty"),
        ({"rubric": RUBRIC * 2}, "used twice"),
        ({"code_weight": 1.5}, "λ"),
    ],
)
def test_bad_packages_are_refused_and_nothing_is_written(overrides, message):
    with pytest.raises((PackageError, TaskFileError), match=message):
        save_package(package(**overrides))
    assert not Task.objects.exists() and not Blob.objects.exists()


@pytest.mark.django_db
def test_rubric_is_stored_canonically():
    rubric = [dict(RUBRIC[0], scores={"0.0": "rude", ".25": "curt", "0.50": "neutral", "0.75": "warm", "1.0": "x"})]
    revision = save_package(package(rubric=rubric, code_weight=0.6)).revision
    assert list(revision.rubric[0]["scores"]) == ["0", "0.25", "0.5", "0.75", "1"]
    assert revision.code_weight == 0.6


@pytest.mark.django_db
def test_a_rule_may_state_its_own_levels_in_0_1():
    fifths = {"1.0": "all", "0.8": "most", "0.6": "many", "0.4": "some", "0.2": "few", "0.0": "none"}
    rubric = [dict(RUBRIC[0], scores=fifths), dict(RUBRIC[0], name="pass", scores={"1": "yes", "0": "no"})]
    revision = save_package(package(rubric=rubric)).revision
    assert revision.rubric[0]["scores"] == {
        "0": "none",
        "0.2": "few",
        "0.4": "some",
        "0.6": "many",
        "0.8": "most",
        "1": "all",
    }
    assert list(revision.rubric[1]["scores"]) == ["0", "1"]


@pytest.mark.django_db
def test_revise_task_changes_files_and_refuses_stale_edits(reviewer):
    first = save_package(package()).revision
    task = first.task
    second = revise_task(
        task,
        user=reviewer,
        message="fix the data",
        file_changes={("input", "expenses.csv"): b"date,amount\n", ("input", "README.md"): None},
        base_revision=first,
    ).revision
    assert second.number == 2 and second.parent == first and second.author == reviewer.username
    assert sorted(second.files.values_list("path", flat=True)) == ["check.py", "expenses.csv"]
    with pytest.raises(StaleRevisionError, match="you edited r1, current is r2"):
        revise_task(task, user=reviewer, message="late", instruction="x", base_revision=first)
    with pytest.raises(TaskFileError, match="no input file"):
        revise_task(task, user=reviewer, message="x", file_changes={("input", "nope.txt"): None})
    assert task.revisions.count() == 2
