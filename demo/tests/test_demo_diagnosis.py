"""The demo judge's diagnoses, asked with the real diagnosis prompt of real revisions (no HTTP): the demo
generator's tasks get realistic issues with complete replacements (a lenient check on text outputs, a vague
instruction where the checker wants JSON numbers), the same on every ask; the example tasks get none. A suggested
checker really is stricter: run on a padded output it pays less than the original, and the solution still scores; a
reviewer marks the issue valid and applies its fix through the review services."""

import json
import subprocess
import sys

import pytest

from benchmarks.models import Benchmark
from demo import server
from demo.judge import LENIENT_LINE, NUMBERS_SENTENCE, STRICT_LINE
from demo.kinds import KINDS
from demo.tests.test_demo_answers import EXAMPLES, ask
from llm.models import ModelEndpoint
from review.diagnosis import DIAGNOSIS_SCHEMA, diagnosis_messages, store_diagnosis
from review.edits import apply_suggested_fix
from review.models import BenchmarkCandidate, ReviewDecision
from review.services import propose_candidates, record_verdicts
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


def test_a_reviewer_marks_a_demo_issue_and_applies_its_fix(reviewer):
    kind = next(k for k in KINDS if k.key == "low-stock")  # a text output: the lenient check
    revision = kind_revision(kind)
    benchmark = Benchmark.objects.create(name="demo-review")
    propose_candidates(benchmark, [revision.task], user=None)
    candidate = BenchmarkCandidate.objects.get(task=revision.task)
    judge = ModelEndpoint.objects.create(name="demo-judge", base_url="http://127.0.0.1:9/v1", model=server.JUDGE)
    diagnosis = store_diagnosis(candidate, revision, diagnose(revision), endpoint=judge)
    [issue] = diagnosis.issues.all()
    assert (issue.component, issue.path, issue.path_missing) == ("checker", "check.py", False)

    record_verdicts(candidate, {str(issue.pk): ReviewDecision.Verdict.VALID}, user=reviewer)
    fixed = apply_suggested_fix(issue, user=reviewer, base_revision=revision)
    checker = fixed.revision.files.get(role="reward", path="check.py").blob.content.decode()
    assert STRICT_LINE in checker and LENIENT_LINE not in checker
    assert diagnose(fixed.revision)["issues"] == []  # the fixed checker is clean
