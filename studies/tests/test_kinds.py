"""The study kinds' own rules: picked by name, their parameters checked, the stratified subset."""

import pytest

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.testing import make_tasks
from studies.kinds import KINDS, StudyError, get_kind
from studies.kinds.stability import stratified_subset
from studies.services import create_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def version():
    revisions = make_tasks()
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="kb"), number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions.values())
    return version


def test_kinds_are_picked_by_name_and_an_unknown_one_names_the_known():
    assert set(KINDS) == {"stability", "training_exposure", "reward_threshold", "synthesis_routes"}
    assert get_kind("stability").axis == "run"
    with pytest.raises(StudyError, match="unknown study kind 'nope'; known: stability, training_exposure"):
        get_kind("nope")


def test_the_subset_keeps_every_category_and_is_the_same_for_the_same_seed(version):
    revisions = list(version.revisions.select_related("task__benchmark_category"))
    # 4 tasks: analysis-reasoning eval-a, eval-b; systems-automation eval-c; uncategorized eval-d.
    three = stratified_subset(revisions, 3, seed=0)
    ids = [r.task.external_id for r in three]
    assert len(ids) == 3 and "eval-c" in ids and "eval-d" in ids
    assert len({"eval-a", "eval-b"} & set(ids)) == 1
    assert [r.pk for r in stratified_subset(revisions, 3, seed=0)] == [r.pk for r in three]
    drawn = {stratified_subset(revisions, 3, seed=seed)[0].task.external_id for seed in range(20)}
    assert drawn == {"eval-a", "eval-b"}  # the seed decides which analysis task, and both come up
    two = [r.task.external_id for r in stratified_subset(revisions, 2, seed=0)]
    assert len(two) == 2 and len({"eval-a", "eval-b"} & set(two)) == 1  # the largest category keeps its seat
    assert [r.task.external_id for r in stratified_subset(revisions, 0, seed=0)] == [
        "eval-a",
        "eval-b",
        "eval-c",
        "eval-d",
    ]


def test_a_stability_study_has_one_cell_per_run_and_refuses_what_it_cannot_do(version, django_user_model):
    from evaluation.testing import endpoints

    class Upstream:
        base_url = "http://127.0.0.1:9/v1"

    strong, _weak = endpoints(Upstream())
    study = create_study(
        kind="stability",
        params={"benchmark_version": version.pk, "endpoint": strong.pk, "runs": 3, "subset": 3, "harness": "builtin"},
        user=None,
    )
    assert [c.label for c in study.cells.order_by("index")] == ["run 1", "run 2", "run 3"]
    assert study.params["subset"] == 3 and len(study.params["revisions"]) == 3 and study.status == "running"
    asks = [
        ({"endpoint": strong.pk, "runs": 3}, "a benchmark version is needed"),
        ({"benchmark_version": version.pk, "runs": 3}, "an endpoint is needed"),
        ({"benchmark_version": version.pk, "endpoint": strong.pk, "runs": 1}, "runs must be a whole number from 2"),
        ({"benchmark_version": version.pk, "endpoint": strong.pk, "runs": "x"}, "runs must be a whole number"),
        ({"benchmark_version": 999, "endpoint": strong.pk}, "no benchmark version #999"),
        ({"benchmark_version": version.pk, "endpoint": strong.pk, "harness": "zz"}, "unknown harness 'zz'"),
    ]
    for params, message in asks:
        with pytest.raises(StudyError, match=message):
            create_study(kind="stability", params=params, user=None)


def test_the_training_kinds_check_their_parameters(version):
    with pytest.raises(StudyError, match="training run is needed"):
        create_study(kind="training_exposure", params={"benchmark_version": version.pk}, user=None)
    with pytest.raises(StudyError, match="no training run #5"):
        create_study(kind="training_exposure", params={"training_run": 5}, user=None)
    with pytest.raises(StudyError, match="at least one threshold"):
        create_study(kind="reward_threshold", params={"values": ""}, user=None)
    with pytest.raises(StudyError, match=r"a threshold must be a number in \[0, 1\], got 1.5"):
        create_study(kind="reward_threshold", params={"values": "0.5,1.5"}, user=None)
    with pytest.raises(StudyError, match="a base model is needed"):
        create_study(kind="reward_threshold", params={"values": "0.5"}, user=None)
    with pytest.raises(StudyError, match="unknown route"):
        create_study(kind="synthesis_routes", params={"routes": "persona,web"}, user=None)
