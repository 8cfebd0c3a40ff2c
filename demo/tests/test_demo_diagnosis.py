"""The demo judge's diagnoses, asked with the real diagnosis prompt of real revisions (no HTTP): the demo
generator's tasks get realistic issues with complete replacements (a lenient check on text outputs, a vague
instruction where the checker wants JSON numbers), the same on every ask; the example tasks get none. A suggested
checker really is stricter: run on a padded output it pays less than the original, and the solution still scores."""

import json
import subprocess
import sys

import pytest

from demo import server
from demo.judge import NUMBERS_SENTENCE
from demo.kinds import KINDS
from demo.tests.test_demo_answers import EXAMPLES, ask
from review.diagnosis import DIAGNOSIS_SCHEMA, diagnosis_messages
from tasks.importing import import_path
from tasks.models import Task
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.services import save_package

pytestmark = pytest.mark.django_db


def kind_revision(kind):
    files = [PackageFile(path, text.encode(), "input") for path, text in kind.input_texts().items()]
    files += [
        PackageFile("check.py", kind.check_py().encode(), "reward"),
        PackageFile("reward.sh", STANDARD_REWARD_SH.encode(), "reward"),
    ]
    files += [PackageFile(path, text.encode(), "solution") for path, text in kind.solution().items()]
    package = TaskPackage(external_id=f"demo-{kind.key}", instruction=kind.question, files=files)
    return save_package(package).task.current_revision


def diagnose(revision) -> dict:
    return ask(server.JUDGE, diagnosis_messages(revision), DIAGNOSIS_SCHEMA)


def checks(check_py: str, workspace, outputs: dict[str, str]) -> dict:
    for path, text in outputs.items():
        (workspace / path).write_text(text)
    (workspace / "check.py").write_text(check_py)
    done = subprocess.run([sys.executable, "check.py"], cwd=workspace, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_demo_generators_tasks_get_issues_with_replacements(tmp_path):
    found = {}
    for kind in KINDS:
        revision = kind_revision(kind)
        answer = diagnose(revision)
        assert answer == diagnose(revision)  # deterministic
        found[kind.key] = {(i["component"], i["path"]) for i in answer["issues"]}
        text_outputs = [p for p in kind.outputs if not p.endswith(".json")]
        for issue in answer["issues"]:
            assert issue["replacement"] and issue["suggested_fix"] and issue["evidence"]
            if issue["component"] == "checker":
                assert text_outputs, kind.key
                padded = {p: kind.solution()[p] + "not-an-answer\n" for p in text_outputs}
                before = checks(kind.check_py(), tmp_path, padded)
                after = checks(issue["replacement"], tmp_path, padded)
                assert sum(after.values()) < sum(before.values()), (kind.key, before, after)
                assert set(checks(issue["replacement"], tmp_path, kind.solution()).values()) == {1}
            else:
                assert issue["component"] == "instruction"
                assert issue["replacement"] == kind.question + NUMBERS_SENTENCE
                assert not any(word in kind.question.lower() for word in ("number", "round", "count"))
    assert any(("checker", "check.py") in issues for issues in found.values()), found
    assert any(("instruction", "") in issues for issues in found.values()), found
    assert any(not issues for issues in found.values()), found  # some candidates, not all


def test_the_example_tasks_get_no_issue():
    import_path(EXAMPLES)
    for task in Task.objects.select_related("current_revision"):
        answer = diagnose(task.current_revision)
        assert answer["issues"] == [], (task.external_id, answer)
