"""The benchmark pages: list and creation, counts, the next freeze, freezing, versions, downloads and proposing."""

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.exporting import archive_chunks
from benchmarks.models import Benchmark, BenchmarkVersion
from review.models import BenchmarkCandidate
from review.services import claim, decide, freeze_version, propose_candidates
from review.tests.helpers import accept_all, sanity
from tasks.models import BenchmarkCategory, Task
from tasks.services import revise_task
from tasks.testing import make_task

Status = BenchmarkCandidate.Status
HTMX = {"HTTP_HX_REQUEST": "true"}


def page_url(name, *args):
    return reverse(f"review:{name}", args=args)


@pytest.fixture
def accepted(benchmark, admin_user, reviewer):
    """claw-bench with two accepted candidates (t-a, t-b) and one awaiting diagnosis (t-c)."""
    accept_all(benchmark, [make_task("t-a"), make_task("t-b")], admin_user=admin_user, reviewer=reviewer)
    propose_candidates(benchmark, [make_task("t-c")], user=admin_user)
    return benchmark


@pytest.fixture
def version(accepted, admin_user):
    return freeze_version(accepted, user=admin_user, note="first cut")


# --- roles ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("who, read", [("outsider", 403), ("viewer", 200), ("reviewer", 200), ("admin_user", 200)])
def test_reading_needs_a_role(request, version, who, read):
    client = Client()
    client.force_login(request.getfixturevalue(who))
    for url in (
        page_url("benchmarks"),
        page_url("benchmark", "claw-bench"),
        page_url("version", "claw-bench", 1),
        page_url("version_export", "claw-bench", 1) + "?format=zip",
    ):
        assert client.get(url).status_code == read, url


@pytest.mark.parametrize("who", ["outsider", "viewer", "reviewer"])
def test_changing_needs_the_admin_role(request, accepted, who):
    client = Client()
    client.force_login(request.getfixturevalue(who))
    assert client.post(page_url("benchmarks"), {"name": "other"}).status_code == 403
    assert client.post(page_url("freeze", "claw-bench"), {"note": "x"}).status_code == 403
    assert client.post(page_url("propose", "claw-bench"), {"status": "ready"}).status_code == 403
    assert client.post(page_url("lazy_tolerance", "claw-bench"), {"lazy_tolerance": "1"}).status_code == 403
    assert Benchmark.objects.get().lazy_tolerance == 0.0
    assert not BenchmarkVersion.objects.exists() and Benchmark.objects.count() == 1
    assert BenchmarkCandidate.objects.count() == 3


def test_anonymous_users_are_sent_to_log_in(client, version):
    for url in (
        page_url("benchmarks"),
        page_url("benchmark", "claw-bench"),
        page_url("version_export", "claw-bench", 1),
    ):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    assert client.post(page_url("freeze", "claw-bench")).status_code == 302
    assert not BenchmarkVersion.objects.filter(number=2).exists()


def test_viewers_see_no_admin_forms(viewer_client, admin_client, accepted):
    for url in (page_url("benchmarks"), page_url("benchmark", "claw-bench")):
        html = viewer_client.get(url).content.decode()
        assert "Create benchmark" not in html and "Freeze new version" not in html and "Propose candidates" not in html
    html = admin_client.get(page_url("benchmark", "claw-bench")).content.decode()
    assert "Freeze new version" in html and "Propose candidates" in html


# --- the list and creating a benchmark -----------------------------------------------------------------------------


def test_list_shows_counts_per_status_and_the_latest_version(viewer_client, version, admin_user):
    Benchmark.objects.create(name="fresh-bench", description="Nothing yet.")
    freeze_version(version.benchmark, user=admin_user, note="second")
    response = viewer_client.get(page_url("benchmarks"))
    assert response.status_code == 200 and response.context["nav"] == "review"
    rows = {row["benchmark"].name: row for row in response.context["rows"]}
    assert dict(rows["claw-bench"]["cells"]) == {
        "awaiting_diagnosis": 1,
        "awaiting_review": 0,
        "in_review": 0,
        "accepted": 2,
        "rejected": 0,
        "awaiting_adjudication": 0,
    }
    assert rows["claw-bench"]["total"] == 3 and rows["claw-bench"]["latest"].number == 2
    assert rows["claw-bench"]["latest"].task_count == 2
    assert rows["fresh-bench"]["total"] == 0 and rows["fresh-bench"]["latest"] is None
    html = response.content.decode()
    assert 'href="/review/benchmarks/claw-bench/v2/"' in html and "not frozen yet" in html and "Nothing yet." in html
    assert 'aria-current="page">Benchmarks</a>' in html


def test_admin_creates_a_benchmark(admin_client):
    response = admin_client.post(page_url("benchmarks"), {"name": "office-v1", "description": "Office work."})
    assert response.status_code == 302 and response["Location"] == page_url("benchmark", "office-v1")
    assert Benchmark.objects.get(name="office-v1").description == "Office work."
    html = admin_client.get(response["Location"]).content.decode()
    assert "Created the benchmark office-v1" in html


def test_creating_a_benchmark_shows_errors_in_place(admin_client, benchmark):
    response = admin_client.post(page_url("benchmarks"), {"name": "claw-bench", "description": "again"})
    assert response.status_code == 400
    assert "There is already a benchmark called “claw-bench”." in response.content.decode()
    response = admin_client.post(page_url("benchmarks"), {"name": "has spaces", "description": "kept"})
    html = response.content.decode()
    assert response.status_code == 400 and "valid “slug”" in html and ">\nkept</textarea>" in html
    assert Benchmark.objects.count() == 1


def test_creating_a_benchmark_with_htmx(admin_client):
    response = admin_client.post(page_url("benchmarks"), {"name": ""}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "This field is required." in html and "<html" not in html
    response = admin_client.post(page_url("benchmarks"), {"name": "via-htmx"}, **HTMX)
    assert response.status_code == 204 and response["HX-Redirect"] == page_url("benchmark", "via-htmx")
    assert Benchmark.objects.filter(name="via-htmx").exists()


# --- one benchmark -------------------------------------------------------------------------------------------------


def test_benchmark_page_links_counts_into_the_queue(viewer_client, accepted):
    response = viewer_client.get(page_url("benchmark", "claw-bench"))
    counts = {row["status"]: row["count"] for row in response.context["status_counts"]}
    assert counts == {
        "awaiting_diagnosis": 1,
        "awaiting_review": 0,
        "in_review": 0,
        "accepted": 2,
        "rejected": 0,
        "awaiting_adjudication": 0,
    }
    html = response.content.decode()
    assert "?benchmark=claw-bench&amp;status=accepted" in html
    assert 'data-testid="count-awaiting_diagnosis"' in html


def test_next_freeze_lists_the_accepted_revisions(admin_client, benchmark, admin_user, reviewer):
    task = make_task("t-over")
    propose_candidates(benchmark, [task], user=admin_user)
    candidate = BenchmarkCandidate.objects.get(task=task)
    sanity(task.current_revision, over_lenient=True)
    claim(candidate, user=admin_user)
    decide(candidate, "accept", user=admin_user, override_reason="The lenient run is a known false alarm.")
    revise_task(task, user=reviewer, message="later", instruction="Edited after acceptance.")
    response = admin_client.get(page_url("benchmark", "claw-bench"))
    (row,) = response.context["next_freeze"]["rows"]
    assert row["revision"].number == 1 and row["change"] == "new" and row["decision"].reviewer == admin_user
    html = response.content.decode()
    assert "The lenient run is a known false alarm." in html and "task now at r2" in html
    assert "ada_admin" in html and "Next freeze: v1" in html


def test_next_freeze_compares_with_the_latest_version(admin_client, version, reviewer):
    a = BenchmarkCandidate.objects.get(task__external_id="t-a")
    BenchmarkCandidate.objects.filter(pk=a.pk).update(status=Status.REJECTED)  # as if reconsidered
    c = BenchmarkCandidate.objects.get(task__external_id="t-c")
    sanity(c.task.current_revision)
    claim(c, user=reviewer)
    decide(c, "accept", user=reviewer)
    response = admin_client.get(page_url("benchmark", "claw-bench"))
    freeze = response.context["next_freeze"]
    assert [(r["task"].external_id, r["change"]) for r in freeze["rows"]] == [("t-b", "unchanged"), ("t-c", "new")]
    assert freeze["dropped"] == ["t-a"]
    html = response.content.decode()
    assert "Next freeze: v2" in html and "1 dropped" in html and "1 new" in html
    assert 'data-testid="nothing-changed"' not in html


def test_unknown_benchmark_is_404(viewer_client, db):
    assert viewer_client.get(page_url("benchmark", "nope")).status_code == 404
    assert viewer_client.get(page_url("version", "nope", 1)).status_code == 404


# --- freezing ------------------------------------------------------------------------------------------------------


def test_admin_freezes_a_version(admin_client, accepted):
    response = admin_client.post(page_url("freeze", "claw-bench"), {"note": "for the paper"})
    version = BenchmarkVersion.objects.get()
    assert response.status_code == 302 and response["Location"] == page_url("version", "claw-bench", 1)
    assert version.number == 1 and version.note == "for the paper" and version.created_by.username == "ada_admin"
    assert sorted(version.revisions.values_list("task__external_id", flat=True)) == ["t-a", "t-b"]
    html = admin_client.get(response["Location"]).content.decode()
    assert "Froze claw-bench v1: 2 tasks pinned." in html and "for the paper" in html
    html = admin_client.get(page_url("benchmark", "claw-bench")).content.decode()
    assert 'href="/review/benchmarks/claw-bench/v1/export/?format=tar.gz"' in html and "Next freeze: v2" in html
    assert "Nothing changed since v1: a new version would pin the same revisions." in html


def test_freezing_with_nothing_accepted_shows_the_error_in_place(admin_client, candidate):
    response = admin_client.post(page_url("freeze", "claw-bench"), {"note": "too early"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was frozen: claw-bench has no accepted candidates to freeze." in html
    assert ">\ntoo early</textarea>" in html  # the note is kept
    response = admin_client.post(page_url("freeze", "claw-bench"), {"note": "too early"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and 'data-testid="freeze-error"' in html and "<html" not in html
    assert not BenchmarkVersion.objects.exists()


def test_freezing_with_htmx_redirects_to_the_version(admin_client, accepted):
    response = admin_client.post(page_url("freeze", "claw-bench"), {"note": ""}, **HTMX)
    assert response.status_code == 204 and response["HX-Redirect"] == page_url("version", "claw-bench", 1)


def test_admin_sets_the_lazy_tolerance_of_the_accept_gate(admin_client, viewer_client, benchmark):
    assert 'data-testid="lazy-tolerance">0<' in viewer_client.get(page_url("benchmark", "claw-bench")).content.decode()
    assert "Save tolerance" not in viewer_client.get(page_url("benchmark", "claw-bench")).content.decode()
    response = admin_client.post(page_url("lazy_tolerance", "claw-bench"), {"lazy_tolerance": "1.5"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and "less than or equal to 1" in html
    response = admin_client.post(page_url("lazy_tolerance", "claw-bench"), {"lazy_tolerance": "0.2"})
    assert response.status_code == 302
    html = admin_client.get(response["Location"]).content.decode()
    assert "claw-bench now accepts checkers that pay a lazy agent at most 0.2." in html
    assert 'data-testid="lazy-tolerance">0.2<' in html and 'value="0.2"' in html
    assert Benchmark.objects.get(name="claw-bench").lazy_tolerance == 0.2


# --- versions and downloads ----------------------------------------------------------------------------------------


def test_version_page_lists_the_pinned_revisions(viewer_client, version, admin_user):
    revise_task(Task.objects.get(external_id="t-a"), user=admin_user, message="after", instruction="Later.")
    response = viewer_client.get(page_url("version", "claw-bench", 1))
    assert [(t["task_id"], t["revision"]) for t in response.context["tasks"]] == [("t-a", 1), ("t-b", 1)]
    html = response.content.decode()
    assert 'href="/tasks/t-a/?rev=1"' in html and "first cut" in html
    assert f'title="{version.revisions.get(task__external_id="t-a").content_hash}"' in html
    assert 'href="/review/benchmarks/claw-bench/v1/export/?format=zip"' in html
    assert viewer_client.get(page_url("version", "claw-bench", 9)).status_code == 404


@pytest.mark.parametrize("fmt, content_type", [("tar.gz", "application/gzip"), ("zip", "application/zip")])
def test_download_streams_the_exported_archive(viewer_client, version, fmt, content_type):
    response = viewer_client.get(page_url("version_export", "claw-bench", 1), {"format": fmt})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="claw-bench-v1.{fmt}"'
    assert b"".join(response.streaming_content) == b"".join(archive_chunks(version, fmt))


def test_download_defaults_to_tar_gz_and_refuses_other_formats(viewer_client, version):
    response = viewer_client.get(page_url("version_export", "claw-bench", 1))
    assert response["Content-Disposition"] == 'attachment; filename="claw-bench-v1.tar.gz"'
    response = viewer_client.get(page_url("version_export", "claw-bench", 1), {"format": "rar"})
    assert response.status_code == 400 and "choose tar.gz or zip" in response.content.decode()
    assert viewer_client.get(page_url("version_export", "claw-bench", 2)).status_code == 404


# --- proposing -----------------------------------------------------------------------------------------------------


@pytest.fixture
def catalog(db):
    """Tasks in two categories and states: office (ready: o-1, o-2; draft: o-3), none (ready: n-1)."""
    office = BenchmarkCategory.objects.create(slug="office", name="Office")
    for external_id, status, category in (
        ("o-1", "ready", office),
        ("o-2", "ready", office),
        ("o-3", "draft", office),
        ("n-1", "ready", None),
    ):
        task = make_task(external_id)
        Task.objects.filter(pk=task.pk).update(status=status, benchmark_category=category)
    return office


def proposed(benchmark="claw-bench"):
    return sorted(
        BenchmarkCandidate.objects.filter(benchmark__name=benchmark).values_list("task__external_id", flat=True)
    )


def test_propose_by_category_and_status_reports_counts(admin_client, benchmark, catalog, admin_user):
    propose_candidates(benchmark, [Task.objects.get(external_id="o-1")], user=admin_user)
    response = admin_client.post(
        page_url("propose", "claw-bench"), {"category": "office", "status": "ready"}, follow=True
    )
    assert proposed() == ["o-1", "o-2"]
    assert "Proposed to claw-bench: 1 new candidate, 1 already a candidate." in response.content.decode()
    response = admin_client.post(page_url("propose", "claw-bench"), {"category": "-", "status": ""}, follow=True)
    assert proposed() == ["n-1", "o-1", "o-2"] and "1 new candidate, 0 already candidates." in response.content.decode()
    candidate = BenchmarkCandidate.objects.get(task__external_id="n-1")
    assert candidate.status == Status.AWAITING_DIAGNOSIS and candidate.proposed_by == admin_user


def test_propose_pasted_ids_counts_skipped_tasks(admin_client, benchmark, catalog):
    Task.objects.create(external_id="t-empty")  # no revision yet
    response = admin_client.post(page_url("propose", "claw-bench"), {"task_ids": "o-3, n-1\nt-empty\n\no-3"})
    assert response.status_code == 302 and response["Location"] == page_url("benchmark", "claw-bench")
    html = admin_client.get(response["Location"]).content.decode()
    assert "2 new candidates, 0 already candidates, 1 skipped (no revision yet)." in html
    assert proposed() == ["n-1", "o-3"]


def test_propose_errors_are_shown_in_place(admin_client, benchmark, catalog):
    response = admin_client.post(page_url("propose", "claw-bench"), {"task_ids": "o-1 ghost-1 ghost-2"})
    html = response.content.decode()
    assert response.status_code == 400 and "No task with id ghost-1, ghost-2." in html
    assert ">\no-1 ghost-1 ghost-2</textarea>" in html
    response = admin_client.post(
        page_url("propose", "claw-bench"), {"category": "office", "status": "archived"}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200 and "No task matches this category and status." in html and "<html" not in html
    response = admin_client.post(page_url("propose", "claw-bench"), {"category": "nope"})
    assert response.status_code == 400 and "Select a valid choice." in response.content.decode()
    assert proposed() == []
    assert admin_client.post(page_url("propose", "no-such-bench"), {"status": "ready"}).status_code == 404


# --- in a browser ------------------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("taxonomy")
def test_admin_proposes_freezes_and_downloads_in_a_browser(page, live_server, admin_user, reviewer):
    from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot

    benchmark = Benchmark.objects.create(name="claw-bench", description="Reviewed claw tasks.")
    for external_id in ("t-a", "t-b"):
        make_task(external_id)
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{page_url('benchmark', 'claw-bench')}")

    # Freezing before anything is accepted: the error appears in place, without a reload.
    mark_document(page)
    page.fill("#freeze-panel textarea[name=note]", "too early")
    page.click("#freeze-panel button[type=submit]")
    page.wait_for_selector("[data-testid=freeze-error]")
    assert_no_reload(page)
    assert "no accepted candidates to freeze" in page.inner_text("[data-testid=freeze-error]")
    assert page.input_value("#freeze-panel textarea[name=note]") == "too early"
    screenshot(page, "benchmark-freeze-error")

    page.fill("#propose-panel textarea[name=task_ids]", "t-a t-b")
    page.click("#propose-panel button[type=submit]")
    page.wait_for_selector("text=Proposed to claw-bench: 2 new candidates, 0 already candidates.")
    assert page.inner_text("[data-testid=count-awaiting_diagnosis] .stat") == "2"

    accept_all(benchmark, [], admin_user=admin_user, reviewer=reviewer)
    page.reload()
    page.fill("#freeze-panel textarea[name=note]", "first cut")
    page.click("#freeze-panel button[type=submit]")
    page.wait_for_url(f"{live_server.url}{page_url('version', 'claw-bench', 1)}")
    assert "Froze claw-bench v1: 2 tasks pinned." in page.inner_text(".messages")
    assert page.inner_text("[data-testid=task-count]") == "2"
    screenshot(page, "benchmark-version")

    with page.expect_download() as download:
        page.click("text=Download .zip")
    assert download.value.suggested_filename == "claw-bench-v1.zip"
    version = BenchmarkVersion.objects.get()
    assert Path(download.value.path()).read_bytes() == b"".join(archive_chunks(version, "zip"))
    page.goto(f"{live_server.url}{page_url('benchmark', 'claw-bench')}")
    screenshot(page, "benchmark-detail")
    page.goto(f"{live_server.url}{page_url('benchmarks')}")
    screenshot(page, "benchmark-list")
