"""manage.py review_report: the contract's last line (docs/reference/json-contracts.md) with what each figure
counts, and its refusal."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from review import planting
from review.models import BenchmarkCandidate
from review.services import record_verdicts
from review.tests.helpers import accept_all, add_diagnosis, make_candidate, sanity
from review.tests.test_planting import rich_task

pytestmark = pytest.mark.django_db

KINDS = ["check_removed", "instruction_cut", "input_removed", "rubric_contradicts"]
COMPONENTS = ["instruction", "input_file", "checker", "rubric"]


def report(benchmark, capsys) -> tuple[dict, str]:
    call_command("review_report", "--benchmark", benchmark.name, "--json")
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1]), "\n".join(out[:-1])


def test_the_last_line_is_the_contract(benchmark, capsys):
    body, _ = report(benchmark, capsys)
    assert body == {
        "candidates": 0,
        "decided": 0,
        "agreement": {"decision": {"kappa": None, "n": 0}, "issue_verdicts": {"kappa": None, "n": 0}},
        "diagnosis_precision": {"overall": None, "by_component": dict.fromkeys(COMPONENTS)},
        "planted": {
            "total": 0,
            "caught_by_llm": 0,
            "caught_by_reviewers": 0,
            "by_kind": {kind: {"total": 0, "caught_by_llm": 0, "caught_by_reviewers": 0} for kind in KINDS},
        },
        "blocked": {"unsolvable": 0, "contaminated": 0, "lazy": 0},
    }


def test_what_each_figure_counts(benchmark, admin_user, reviewer, capsys):
    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)  # its solution scores 1
    caught, missed = planting.plant_flaws(benchmark, ["input_removed", "check_removed"], 2, user=admin_user)
    add_diagnosis(caught.candidate, [{"component": "input_file", "severity": "blocker"}])
    diagnosis = add_diagnosis(missed.candidate, [{"component": "rubric", "severity": "minor"}])
    record_verdicts(missed.candidate, {str(diagnosis.issues.get().pk): "not_valid"}, user=reviewer)
    valid = caught.candidate.latest_diagnosis().issues.get()
    record_verdicts(caught.candidate, {str(valid.pk): "valid"}, user=reviewer)
    from review.services import decide

    decide(caught.candidate, "reject", user=reviewer, reason="an input is empty")
    # Its checker pays a lazy agent, and it has no reference solution: blocked twice.
    sanity(missed.candidate.task.current_revision, lazy=1.0, solution=None)
    lazy_open = make_candidate(benchmark, "t-open")
    sanity(lazy_open.task.current_revision, lazy=0.5, solution=0.5)

    body, text = report(benchmark, capsys)
    assert body["candidates"] == 4 and body["decided"] == 2  # the accepted original and the rejected plant
    assert body["diagnosis_precision"]["overall"] == 0.5
    assert body["diagnosis_precision"]["by_component"]["input_file"] == 1.0
    assert body["diagnosis_precision"]["by_component"]["rubric"] == 0.0
    assert body["planted"]["total"] == 2 and body["planted"]["caught_by_llm"] == 1
    assert body["planted"]["caught_by_reviewers"] == 1
    assert body["planted"]["by_kind"]["input_removed"] == {"total": 1, "caught_by_llm": 1, "caught_by_reviewers": 1}
    # Open or accepted: the original (accepted, proven solvable), the open plant and t-open (neither proven).
    assert body["blocked"] == {"unsolvable": 2, "contaminated": 0, "lazy": 2}
    assert BenchmarkCandidate.objects.filter(status="rejected").count() == 1
    assert "4 candidate(s), 2 decided" in text and "2 paying a lazy agent" in text


def test_an_unknown_benchmark_is_refused():
    with pytest.raises(CommandError, match="no benchmark 'nope'") as refused:
        call_command("review_report", "--benchmark", "nope", "--json")
    assert refused.value.returncode == 2


def test_contaminated_counts_what_training_data_holds(benchmark, admin_user, reviewer, capsys):
    from django.apps import apps

    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    make_candidate(benchmark, "t-clean-open")
    assert report(benchmark, capsys)[0]["blocked"]["contaminated"] == 0
    # An RL run trained on the accepted task's revision (training_jobs is looked up by name: it imports review).
    original = BenchmarkCandidate.objects.get(benchmark=benchmark, status="accepted").task.current_revision
    run_model = apps.get_model("training_jobs", "TrainingRun")
    run_model.objects.create(name="rl on it", kind="rl", base_model_path="/m", config={"tasks": [original.pk]})
    assert report(benchmark, capsys)[0]["blocked"]["contaminated"] == 1
