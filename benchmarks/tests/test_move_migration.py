"""Moving Benchmark, BenchmarkVersion and PinnedRevision out of review (benchmarks 0001, evaluation 0007, review
0007) keeps a database filled before it: every row and every link, read through the new models afterwards, and new
rows numbered after the old ones."""

import pytest
from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from benchmarks.services import create_version
from tasks.models import TaskRevision

pytestmark = pytest.mark.django_db(transaction=True)
# Unapplies benchmarks 0001 and what depends on it (evaluation 0007, review 0007): the schema as it was before.
BEFORE = ("benchmarks", None)
MOVED = ["benchmark", "benchmarkversion", "pinnedrevision"]


def applied_apps():
    """The models as the database has them now: every app at the migrations applied to it."""
    loader = MigrationLoader(connection)
    return loader.project_state([key for key in loader.applied_migrations if key in loader.graph.nodes]).apps


def migrate_to_latest():
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def fill_before_the_move(old) -> dict:
    """Rows made through the historical models of review 0006 and evaluation 0006, as a deployment has them."""
    model = old.get_model
    ada = model("auth", "User").objects.create(username="ada")
    endpoint = model("llm", "ModelEndpoint").objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m")
    task = model("tasks", "Task").objects
    revision = model("tasks", "TaskRevision").objects
    t1, t2 = task.create(external_id="t-1", title="one"), task.create(external_id="t-2", title="two")
    r1 = revision.create(task=t1, number=1, instruction="i", content_hash="h1")
    r2 = revision.create(task=t2, number=1, instruction="i", content_hash="h2")
    r2b = revision.create(task=t2, number=2, instruction="j", content_hash="h3")
    bench = model("review", "Benchmark").objects.create(
        name="office", description="d", lazy_tolerance=0.25, difficulty_strong_min=0.3
    )
    version = model("review", "BenchmarkVersion").objects
    v1 = version.create(benchmark=bench, number=1, created_by=ada, note="first")
    v2 = version.create(benchmark=bench, number=2, created_by=ada, note="second")
    pins = model("review", "PinnedRevision").objects
    pins.bulk_create(pins.model(version=v, revision=r) for v, r in [(v1, r1), (v1, r2), (v2, r1), (v2, r2b)])
    run = model("evaluation", "EvalRun").objects.create(
        name="run", benchmark_version=v2, endpoint=endpoint, harness="builtin", config_hash="c"
    )
    candidate = model("review", "BenchmarkCandidate").objects.create(task=t2, benchmark=bench, status="accepted")
    flt = model("review", "DifficultyFilter").objects.create(
        benchmark=bench,
        strong_endpoint=endpoint,
        small_endpoint=endpoint,
        strong_min=0.3,
        small_max=0.6,
        harness="builtin",
        strong_run=run,
    )
    rows = {"ada": ada, "bench": bench, "v1": v1, "v2": v2, "r1": r1, "r2": r2, "r2b": r2b, "run": run}
    return {name: row.pk for name, row in rows.items()} | {"candidate": candidate.pk, "filter": flt.pk}


def test_rows_made_before_the_move_are_read_through_the_benchmarks_app(admin_user):
    content_types = dict(ContentType.objects.filter(app_label="benchmarks").values_list("model", "pk"))
    assert sorted(content_types) == MOVED
    MigrationExecutor(connection).migrate([BEFORE])
    try:
        old = applied_apps()
        assert not old.all_models["benchmarks"]
        assert old.get_model("review", "Benchmark")._meta.db_table == "review_benchmark"
        # The content types went back with the models (same rows), so admin history and permissions stay linked.
        old_types = old.get_model("contenttypes", "ContentType").objects.filter(app_label="review", model__in=MOVED)
        assert dict(old_types.values_list("model", "pk")) == content_types
        ids = fill_before_the_move(old)
    finally:
        migrate_to_latest()

    bench = Benchmark.objects.get(pk=ids["bench"])
    assert (bench.name, bench.description) == ("office", "d")
    assert (bench.lazy_tolerance, bench.difficulty_strong_min) == (0.25, 0.3)
    v1, v2 = BenchmarkVersion.objects.get(pk=ids["v1"]), BenchmarkVersion.objects.get(pk=ids["v2"])
    assert list(bench.versions.values_list("pk", "number", "note")) == [(v2.pk, 2, "second"), (v1.pk, 1, "first")]
    assert v1.created_by_id == v2.created_by_id == ids["ada"]
    assert set(v1.revisions.values_list("pk", flat=True)) == {ids["r1"], ids["r2"]}
    assert set(v2.pins.values_list("revision_id", flat=True)) == {ids["r1"], ids["r2b"]}
    assert set(TaskRevision.objects.get(pk=ids["r1"]).benchmark_versions.all()) == {v1, v2}
    assert PinnedRevision.objects.count() == 4

    # The apps above benchmarks by label, as the migrations name them: this app's tests import none of them.
    EvalRun = apps.get_model("evaluation", "EvalRun")
    BenchmarkCandidate = apps.get_model("review", "BenchmarkCandidate")
    DifficultyFilter = apps.get_model("review", "DifficultyFilter")
    run = EvalRun.objects.get(pk=ids["run"])
    assert run.benchmark_version == v2 and list(v2.eval_runs.all()) == [run]
    candidate = BenchmarkCandidate.objects.get(pk=ids["candidate"])
    assert candidate.benchmark == bench and list(bench.candidates.all()) == [candidate]
    assert DifficultyFilter.objects.get(pk=ids["filter"]).benchmark == bench
    assert list(bench.difficulty_filters.values_list("pk", flat=True)) == [ids["filter"]]
    assert dict(ContentType.objects.filter(app_label="benchmarks").values_list("model", "pk")) == content_types
    assert not ContentType.objects.filter(app_label="review", model__in=MOVED).exists()

    # The tables go on where they were: a new version is number 3 and takes fresh ids (PostgreSQL's sequences).
    v3 = create_version(bench, [ids["r2b"]], user=admin_user)
    old_pins = PinnedRevision.objects.exclude(version=v3).values_list("pk", flat=True)
    assert v3.number == 3 and v3.pk > v2.pk and v3.pins.get().pk > max(old_pins)
