"""Making benchmarks and storing frozen versions: roles, bounds, numbering, immutability."""

import pytest

from benchmarks.models import Benchmark, BenchmarkVersion
from benchmarks.services import BenchmarkError, NotAllowed, create_version, get_or_create_benchmark
from tasks.testing import make_task


def test_get_or_create_benchmark_needs_an_admin_unless_a_script_asks(admin_user, reviewer):
    with pytest.raises(NotAllowed, match="creating a benchmark needs the admin role"):
        get_or_create_benchmark("office", user=reviewer)
    made, created = get_or_create_benchmark("office", user=admin_user, description="d", lazy_tolerance=0.25)
    assert created and (made.description, made.lazy_tolerance) == ("d", 0.25)
    assert get_or_create_benchmark("office", user=reviewer) == (made, False)  # finding one needs no role
    assert get_or_create_benchmark("scripted", user=None)[1]
    with pytest.raises(BenchmarkError, match=r"must be in \[0, 1\], not 1.5"):
        get_or_create_benchmark("other", user=admin_user, lazy_tolerance=1.5)
    assert sorted(Benchmark.objects.values_list("name", flat=True)) == ["office", "scripted"]


def test_versions_are_numbered_pin_their_revisions_and_never_change(benchmark, admin_user, reviewer):
    a, b = make_task("t-a"), make_task("t-b")
    with pytest.raises(NotAllowed):
        create_version(benchmark, [a.current_revision_id], user=reviewer)
    with pytest.raises(BenchmarkError, match="needs at least one revision to pin"):
        create_version(benchmark, [], user=admin_user)
    twice = [a.current_revision_id, b.current_revision_id, a.current_revision_id]
    first = create_version(benchmark, twice, user=admin_user, note="first")
    second = create_version(benchmark, [b.current_revision_id], user=admin_user)
    assert (first.number, second.number, first.created_by, first.note) == (1, 2, admin_user, "first")
    assert sorted(first.revisions.values_list("task__external_id", flat=True)) == ["t-a", "t-b"]
    assert list(second.revisions.values_list("task__external_id", flat=True)) == ["t-b"]
    with pytest.raises(ValueError, match="immutable"):
        first.save()
    with pytest.raises(BenchmarkError, match="the version note is 501 characters"):
        create_version(benchmark, [a.current_revision_id], user=admin_user, note="n" * 501)
    assert BenchmarkVersion.objects.count() == 2
