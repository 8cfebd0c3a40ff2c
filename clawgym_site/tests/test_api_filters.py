"""Every list in the API refuses a query parameter it does not understand (a misspelt filter must not list all)."""

import pytest
from django.urls import reverse

from clawgym_site.api_urls import router
from review.models import BenchmarkCandidate
from tasks.models import Task
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

# Every list route the router holds ("<basename>-list"), so a list added later is covered without editing this.
LISTS = sorted(basename for _prefix, _viewset, basename in router.registry)
# Lists under a task or a candidate: the fixture below makes them (a candidate's id is known once it is made).
NESTED = {
    "task-revision": lambda: {"task_external_id": "t-1"},
    "candidate-solve": lambda: {"candidate_pk": BenchmarkCandidate.objects.get(task__external_id="t-1").pk},
}
# Lists that need a parameter to answer at all (a leaderboard, a precision is of one benchmark): the fixture makes it.
REQUIRED = {"leaderboard": {"benchmark": "b-1"}, "diagnosis-precision": {"benchmark": "b-1"}}


@pytest.fixture(autouse=True)
def a_task(db):
    save_package(TaskPackage(external_id="t-1", instruction="Say hi", files=[PackageFile("a.txt", b"x")]))
    from benchmarks.models import Benchmark, BenchmarkVersion

    benchmark = Benchmark.objects.create(name="b-1")
    BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    BenchmarkCandidate.objects.create(task=Task.objects.get(external_id="t-1"), benchmark=benchmark)


@pytest.mark.parametrize("basename", LISTS)
def test_an_unknown_parameter_is_a_400_naming_it(api_as, admin_user, basename):
    url = reverse(f"{basename}-list", kwargs=NESTED[basename]() if basename in NESTED else None)
    api = api_as(admin_user)
    response = api.get(url, {"staus": "ready"})
    assert response.status_code == 400, (url, response.content)
    [message] = response.json()["staus"]
    assert message.startswith("unknown query parameter for this list (it takes: ")
    # Pagination and the format override are understood by every list.
    assert api.get(url, {"page": 1, "format": "json", **REQUIRED.get(basename, {})}).status_code == 200, url


def test_the_known_filters_search_and_ordering_still_work(api_as, viewer):
    api = api_as(viewer)
    assert api.get("/api/tasks/", {"status": "ready", "search": "hi", "ordering": "-created_at"}).status_code == 200
    response = api.get("/api/tasks/", {"status": "ready", "colour": "red", "size": "xl"})
    assert response.status_code == 400 and set(response.json()) == {"colour", "size"}
    assert "status" in response.json()["colour"][0] and "search" in response.json()["colour"][0]


def test_a_detail_action_keeps_its_own_parameters(api_as, viewer):
    url = "/api/tasks/t-1/revisions/1/files/content/"
    assert api_as(viewer).get(url, {"role": "input", "path": "a.txt"}).content == b"x"
