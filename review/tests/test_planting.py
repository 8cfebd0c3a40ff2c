"""Planted flaws: each kind planted into a copy of an accepted candidate, the copy unmarked in the queue, never
accepted into a benchmark, what the LLM and the reviewers made of it, and the reveal after a decision."""

import json
import re
from dataclasses import replace

import pytest

from benchmarks.models import Benchmark
from jobs.models import JobRun
from review import planting
from review.edits import save_edit
from review.job_kinds import DIAGNOSE_JOB
from review.models import BenchmarkCandidate, PlantedFlaw, ReviewDecision
from review.services import ReviewError, claim, decide, freeze_version, propose_candidates
from review.tests.helpers import accept_all, add_diagnosis, sanity
from tasks.job_kinds import SANITY_JOB
from tasks.models import Task
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

pytestmark = pytest.mark.django_db

CHECK_PY = b"""import json
from pathlib import Path
report = Path(__file__).resolve().parent.parent / "out" / "report.md"
text = report.read_text() if report.exists() else ""
print(json.dumps({"report_exists": float(bool(text)), "total_right": float("42" in text)}))
"""
REWARD_SH = b'scores="$(python3 reward/check.py)"\necho "$scores"\necho 0.5\n'
RUBRIC = [
    {
        "name": "clear_summary",
        "target_file": "out/report.md",
        "scores": {"0": "No summary at all.", "1": "A clear summary with the total of 42."},
        "weight": 1.0,
    }
]


def rich_task(external_id="sales-summary"):
    package = TaskPackage(
        external_id=external_id,
        instruction=(
            "Summarise the sales in sales.csv for my manager. "
            "Write the summary to out/report.md and give the total_right amount, 42, on its own line.\n"
            "Keep it short."
        ),
        files=[
            PackageFile("sales.csv", b"item,amount\na,40\nb,2\n"),
            PackageFile("notes.txt", b"nothing to see\n"),
            PackageFile("reward.sh", REWARD_SH, role="reward"),
            PackageFile("check.py", CHECK_PY, role="reward"),
        ],
        rubric=RUBRIC,
        metadata={"category": "Data"},
    )
    return save_package(package).task


@pytest.fixture
def accepted(benchmark, admin_user, reviewer):
    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    return BenchmarkCandidate.objects.get(benchmark=benchmark, status="accepted")


def files_of(task, role):
    return {f.path: f.blob.content for f in task.current_revision.files.filter(role=role).select_related("blob")}


def test_each_kind_is_planted_into_a_new_task_proposed_to_the_benchmark(benchmark, accepted, admin_user):
    plants = planting.plant_flaws(benchmark, list(PlantedFlaw.Kind.values), 4, user=admin_user, seed=3)
    assert [p.kind for p in plants] == list(PlantedFlaw.Kind.values)
    source = accepted.task.current_revision
    for plant in plants:
        task = plant.candidate.task
        assert task.pk != accepted.task_id and not task.external_id.startswith("sales-summary")
        assert plant.candidate.benchmark == benchmark
        assert plant.candidate.status == BenchmarkCandidate.Status.AWAITING_DIAGNOSIS
        assert plant.source_candidate == accepted and plant.source_revision == source
        assert task.current_revision.number == 1 and task.benchmark_category == accepted.task.benchmark_category
        assert task.current_revision.content_hash != source.content_hash
    by_kind = {p.kind: p for p in plants}

    check = by_kind["check_removed"]
    assert check.component == "checker" and check.path == "reward.sh"
    assert files_of(check.candidate.task, "reward")["reward.sh"] == REWARD_SH + b"echo 1.0\n"

    cut = by_kind["instruction_cut"]
    assert cut.component == "instruction"
    assert "42" not in cut.candidate.task.current_revision.instruction
    assert "Summarise the sales" in cut.candidate.task.current_revision.instruction
    assert "out/report.md" in cut.change

    removed = by_kind["input_removed"]
    assert removed.component == "input_file" and removed.path == "sales.csv"  # the instruction names it
    inputs = files_of(removed.candidate.task, "input")
    assert inputs.get("sales.csv", b"") == b"" and inputs["notes.txt"] == b"nothing to see\n"

    rubric = by_kind["rubric_contradicts"]
    rules = rubric.candidate.task.current_revision.rubric
    assert rubric.component == "rubric" and len(rules) == 2
    assert "out/report.md is not created" in rules[1]["scores"]["1"]


def test_planting_is_unmarked_in_the_copy_and_queues_its_checks(benchmark, accepted, admin_user):
    (plant,) = planting.plant_flaws(benchmark, ["input_removed"], 1, user=admin_user, seed=1)
    revision = plant.candidate.task.current_revision
    assert revision.author_user is None and "plant" not in revision.message.lower()
    assert "plant" not in plant.candidate.task.external_id
    kinds = set(JobRun.objects.values_list("kind", flat=True))
    assert {SANITY_JOB, DIAGNOSE_JOB} <= kinds


def test_a_copy_is_named_and_recorded_as_a_real_candidate_is(benchmark, admin_user, reviewer, second_reviewer):
    # Imported by a person, then revised in review: the copy is the accepted r2, recorded as r1 was.
    task = rich_task("quarterly-sales")
    Task.objects.filter(pk=task.pk).update(source=Task.Source.IMPORTED)
    task.revisions.update(author_user=second_reviewer, author_stage="import", message="imported from sales.zip")
    package = planting.package_from_revision(task.current_revision)
    save_package(replace(package, instruction=package.instruction + " Thanks."), message="tightened the wording")
    accept_all(benchmark, [task], admin_user=admin_user, reviewer=reviewer)
    plants = planting.plant_flaws(benchmark, list(PlantedFlaw.Kind.values), 8, user=admin_user, seed=5)
    ids = [p.candidate.task.external_id for p in plants]
    assert len(set(ids)) == 8
    for plant in plants:
        copy = plant.candidate.task
        assert re.fullmatch(r"[a-z]+(-[a-z]+){1,2}(-[0-9]{1,2})?", copy.external_id), copy.external_id
        assert not copy.external_id.startswith("quarterly-sales")
        (first,) = copy.revisions.all()
        assert (first.author_user, first.author_stage, first.message) == (
            second_reviewer,
            "import",
            "imported from sales.zip",
        )
        assert copy.source == Task.Source.IMPORTED
        assert plant.source_candidate.task == task  # the link to the original, for the admins' report


def test_a_copy_of_a_synthesised_task_does_not_share_its_batch(benchmark, admin_user, reviewer):
    task = rich_task("syn-3-1")
    synthesis = {"batch": 3, "item": 7, "route": "persona", "seed": {}, "prompt_versions": {}}
    package = planting.package_from_revision(task.current_revision)
    package = replace(package, metadata={**package.metadata, "synthesis": synthesis})
    save_package(package, stage="synthesis", message="synthesized by batch #3, item 1")
    Task.objects.filter(pk=task.pk).update(source=Task.Source.PERSONA)
    accept_all(benchmark, [task], admin_user=admin_user, reviewer=reviewer)
    (plant,) = planting.plant_flaws(benchmark, ["input_removed"], 1, user=admin_user, seed=2)
    copy = plant.candidate.task
    assert not copy.external_id.startswith("syn-") and copy.source == Task.Source.IMPORTED
    assert "synthesis" not in copy.current_revision.metadata
    assert "batch #3" not in copy.current_revision.message and copy.current_revision.author_stage == "import"


def test_the_same_seed_plants_the_same_flaws(benchmark, accepted, admin_user):
    first = planting.plant_flaws(benchmark, ["input_removed", "instruction_cut"], 2, user=admin_user, seed=9)
    second = planting.plant_flaws(benchmark, ["input_removed", "instruction_cut"], 2, user=admin_user, seed=9)
    assert [p.change for p in first] == [p.change for p in second]


def test_inverting_a_rule_when_no_output_path_is_named(benchmark, admin_user, reviewer):
    package = TaskPackage(
        external_id="answer-only",
        instruction="Tell me which item sold most. Answer in one line.",
        files=[PackageFile("reward.sh", b"echo 1\n", role="reward")],
        rubric=RUBRIC,
    )
    accept_all(benchmark, [save_package(package).task], admin_user=admin_user, reviewer=reviewer)
    (plant,) = planting.plant_flaws(benchmark, ["rubric_contradicts"], 1, user=admin_user)
    (rule,) = plant.candidate.task.current_revision.rubric
    assert rule["scores"] == {"0": RUBRIC[0]["scores"]["1"], "1": RUBRIC[0]["scores"]["0"]}


def test_refusals_plant_nothing(benchmark, admin_user, reviewer, candidate):
    with pytest.raises(planting.PlantError, match="no accepted candidate"):
        planting.plant_flaws(benchmark, ["check_removed"], 1, user=admin_user)
    accept_all(benchmark, [], admin_user=admin_user, reviewer=reviewer)  # accepts the fixture's candidate
    with pytest.raises(planting.PlantError, match="unknown flaw kind 'typo'"):
        planting.plant_flaws(benchmark, ["typo"], 1, user=admin_user)
    with pytest.raises(planting.PlantError, match="between 1 and 50"):
        planting.plant_flaws(benchmark, ["check_removed"], 0, user=admin_user)
    with pytest.raises(planting.PlantError, match="at least one"):
        planting.plant_flaws(benchmark, [], 1, user=admin_user)
    with pytest.raises(ReviewError, match="admin"):
        planting.plant_flaws(benchmark, ["check_removed"], 1, user=reviewer)
    # The fixture's instruction is one sentence: the second plant cannot be made, so neither is.
    with pytest.raises(planting.PlantError, match="instruction_cut"):
        planting.plant_flaws(benchmark, ["input_removed", "instruction_cut"], 2, user=admin_user)
    assert not PlantedFlaw.objects.exists()
    assert Task.objects.count() == 1


def _ready(plant):
    """The planted copy diagnosed and sanity-checked, like any candidate awaiting review."""
    sanity(plant.candidate.task.current_revision)
    plant.candidate.refresh_from_db()
    return plant.candidate


def test_accepting_a_planted_copy_closes_it_as_missed_and_freezing_leaves_it_out(
    benchmark, accepted, admin_user, reviewer
):
    (plant,) = planting.plant_flaws(benchmark, ["instruction_cut"], 1, user=admin_user, seed=2)
    candidate = _ready(plant)
    assert planting.revelation(candidate, reviewer) is None  # nothing shows before the decision
    decide(candidate, "accept", user=reviewer)
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.REJECTED
    assert ReviewDecision.objects.filter(candidate=candidate, decision="accept").exists()
    shown = planting.revelation(candidate, reviewer)
    assert shown["outcome"] == "missed" and shown["kind"] == "instruction_cut"
    assert "planted flaw" in shown["message"] and "You missed it" in shown["message"]
    version = freeze_version(benchmark, user=admin_user)
    assert list(version.pins.values_list("revision__task_id", flat=True)) == [accepted.task_id]


def test_a_planted_copy_proposed_to_another_benchmark_never_enters_it(benchmark, accepted, admin_user, reviewer):
    (plant,) = planting.plant_flaws(benchmark, ["check_removed"], 1, user=admin_user, seed=6)
    _ready(plant)
    # Nothing marks the copy's task (a "ready" task like its original), so it can be proposed to another benchmark.
    other = Benchmark.objects.create(name="other-bench")
    propose_candidates(other, [accepted.task, plant.candidate.task], user=admin_user)
    there = BenchmarkCandidate.objects.get(benchmark=other, task=plant.candidate.task)
    assert planting.revelation(there, reviewer) is None
    decide(there, "accept", user=reviewer)
    there.refresh_from_db()
    assert there.status == BenchmarkCandidate.Status.REJECTED
    shown = planting.revelation(there, reviewer)
    assert shown["outcome"] == "missed" and shown["kind"] == "check_removed"
    assert "You missed it" in shown["message"] and "never enters a benchmark" in shown["message"]
    decide(BenchmarkCandidate.objects.get(benchmark=other, task=accepted.task), "accept", user=reviewer)
    frozen = freeze_version(other, user=admin_user)
    assert list(frozen.pins.values_list("revision__task_id", flat=True)) == [accepted.task_id]


def test_freezing_leaves_out_a_planted_copy_accepted_in_another_benchmark(benchmark, accepted, admin_user, reviewer):
    # As a database holds it where such a copy was accepted before services.decide closed it in every benchmark.
    (plant,) = planting.plant_flaws(benchmark, ["input_removed"], 1, user=admin_user, seed=7)
    other = Benchmark.objects.create(name="other-bench")
    propose_candidates(other, [plant.candidate.task], user=admin_user)
    there = BenchmarkCandidate.objects.get(benchmark=other)
    ReviewDecision.objects.create(
        candidate=there, reviewer=reviewer, decision="accept", revision=there.task.current_revision
    )
    BenchmarkCandidate.objects.filter(pk=there.pk).update(status=BenchmarkCandidate.Status.ACCEPTED)
    with pytest.raises(ReviewError, match="no accepted candidates"):
        freeze_version(other, user=admin_user)


def test_rejecting_or_fixing_catches_it(benchmark, accepted, admin_user, reviewer, second_reviewer):
    rejected, fixed = planting.plant_flaws(benchmark, ["input_removed", "check_removed"], 2, user=admin_user, seed=4)
    decide(_ready(rejected), "reject", user=reviewer, reason="sales.csv is empty")
    assert planting.revelation(rejected.candidate, reviewer)["outcome"] == "caught"
    # Another reviewer sees what it was once it is closed, told the review caught it.
    assert "The review caught it" in planting.revelation(rejected.candidate, second_reviewer)["message"]

    candidate = _ready(fixed)
    claim(candidate, user=second_reviewer)
    base = candidate.task.current_revision
    save_edit(candidate, user=second_reviewer, field="reward", path="reward.sh", content=REWARD_SH, base_revision=base)
    report = planting.planted_report(benchmark)
    assert report["total"] == 2 and report["decided"] == 2 and report["caught_by_reviewers"] == 2
    assert report["by_kind"]["input_removed"]["caught_by_reviewers"] == 1
    assert report["by_reviewer"]["rob_reviewer"] == {
        "decided": 1,
        "caught": 1,
        "share": 1.0,
        "by_kind": {"check_removed": {"decided": 1, "caught": 1, "share": 1.0}},
    }


def test_the_llm_named_it_when_a_diagnosis_of_the_planted_revision_names_its_component(
    benchmark, accepted, admin_user, reviewer
):
    named, missed, undiagnosed = planting.plant_flaws(
        benchmark, ["check_removed", "input_removed", "instruction_cut"], 3, user=admin_user, seed=5
    )
    add_diagnosis(named.candidate, [{"component": "checker", "severity": "blocker"}])
    add_diagnosis(missed.candidate, [{"component": "rubric", "severity": "minor"}])
    decide(_ready(missed), "accept", user=reviewer)
    report = planting.planted_report(benchmark)
    assert (report["total"], report["diagnosed"], report["caught_by_llm"]) == (3, 2, 1)
    assert report["llm_share"] == 0.5
    assert report["by_kind"]["check_removed"]["caught_by_llm"] == 1
    assert report["by_kind"]["input_removed"]["llm_share"] == 0.0
    assert report["by_kind"]["instruction_cut"]["diagnosed"] == 0
    assert report["by_kind"]["rubric_contradicts"]["total"] == 0
    assert report["by_reviewer"][reviewer.username]["caught"] == 0
    assert json.dumps(report)  # plain JSON


def test_planted_tasks_are_never_sources(benchmark, accepted, admin_user):
    planting.plant_flaws(benchmark, ["input_removed"], 3, user=admin_user)
    assert planting.sources(benchmark) == [accepted]
