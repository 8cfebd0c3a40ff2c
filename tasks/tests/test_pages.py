"""The catalog's HTML pages: dashboard, list, detail, file viewer, diff, import, and the Django admin."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.models import JobRun
from tasks.models import Blob, SanityReport, ScenarioCategory, Task, TaskRevision
from tasks.package import PackageFile
from tasks.services import revise_task
from tasks.testing import RUBRIC, SAMPLE_FILES, make_task
from tasks.viewers import MAX_CSV_ROWS, render_markdown, view_file
from tasks.views import PAGE_SIZE

HTMX = {"HTTP_HX_REQUEST": "true"}


# --- viewers -----------------------------------------------------------------------------------------------


def test_markdown_never_passes_raw_html_or_script_urls():
    html = render_markdown(
        "# Title\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
        "[click](javascript:alert(3)) [tab](java\tscript:alert(4)) [ok](https://example.com) ![pic](http://evil/x.png)"
    )
    assert "<h1>Title</h1>" in html
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html and "[image: pic]" in html
    assert "javascript:" not in html and "java\tscript" not in html
    assert '<a href="https://example.com"' in html


def test_view_file_picks_a_viewer_by_extension_and_content():
    assert view_file("a.md", b"# Hi").kind == "markdown"
    assert view_file("a.json", b'{"b":1}').lines == ["{", '  "b": 1', "}"]
    broken = view_file("a.json", b"{nope")
    assert broken.kind == "text" and "Not valid JSON" in broken.note
    assert view_file("a.txt", b"one\ntwo\n").lines == ["one", "two"]
    assert view_file("a.txt", b"\x00\x01").kind == "binary"
    assert view_file("latin.txt", "café".encode("latin-1")).kind == "binary"
    tsv = view_file("a.tsv", b"x\ty\n1\t2\n")
    assert tsv.kind == "csv" and tsv.header == ["x", "y"] and tsv.rows == [["1", "2"]]


def test_csv_viewer_cuts_long_files_and_says_how_many_rows():
    data = "n\n" + "".join(f"{i}\n" for i in range(MAX_CSV_ROWS + 25))
    view = view_file("big.csv", data.encode())
    assert view.total_rows == MAX_CSV_ROWS + 25
    assert len(view.rows) == MAX_CSV_ROWS
    assert view.rows_cut == 25


# --- dashboard ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_dashboard_counts_tasks_by_status_category_and_source(viewer_client, admin_user):
    make_task("t1", metadata={"category": "analysis-reasoning"})
    make_task("t2", metadata={"category": "analysis-reasoning"}, status=Task.Status.DRAFT)
    make_task("t3", metadata={"category": "software-development"}, source=Task.Source.PERSONA)
    make_task("t4", metadata={"category": "no-such-category"})
    JobRun.objects.create(
        kind="tasks.import_upload",
        engine="django_q",
        status=JobRun.Status.SUCCEEDED,
        message="4 imported",
        created_by=admin_user,
    )
    running = JobRun.objects.create(
        kind="tasks.import_upload", engine="django_q", status=JobRun.Status.RUNNING, progress_done=3, progress_total=10
    )
    response = viewer_client.get(reverse("dashboard"))
    assert response.status_code == 200
    page = response.content.decode()
    ctx = response.context_data
    assert ctx["grand_total"] == 4
    rows = {(row["category"].slug if row["category"] else None): row for row in ctx["category_rows"]}
    assert dict(rows["analysis-reasoning"]["cells"]) == {"draft": 1, "ready": 1, "rejected": 0, "archived": 0}
    assert rows["software-development"]["total"] == 1
    assert rows[None]["total"] == 1  # the uncategorised task has its own row
    assert dict((v, n) for v, _, n in ctx["sources"]) == {"imported": 3, "persona": 1, "skill": 0, "manual": 0}
    assert "?category=analysis-reasoning&amp;status=ready" in page
    assert "4 imported" in page
    # An unfinished job shows the jobs app's live progress partial (which polls for itself).
    assert reverse("jobs:progress", args=[running.pk]) in page and "3/10" in page


# --- task list ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_task_list_filters_and_searches(viewer_client):
    make_task("alpha-1", instruction="Plan the offsite agenda")
    make_task("beta-2", metadata={"category": "software-development"}, status=Task.Status.DRAFT)
    make_task("gamma-3", source=Task.Source.SKILL)
    url = reverse("tasks:list")

    def ids(**params):
        response = viewer_client.get(url, params)
        assert response.status_code == 200
        return sorted(t.external_id for t in response.context_data["page"].object_list)

    assert ids() == ["alpha-1", "beta-2", "gamma-3"]
    assert ids(category="software-development") == ["beta-2"]
    assert ids(status="draft") == ["beta-2"]
    assert ids(source="skill") == ["gamma-3"]
    assert ids(q="GAMMA") == ["gamma-3"]  # external id, any case
    assert ids(q="offsite") == ["alpha-1"]  # title
    assert ids(q="offsite", status="draft") == []
    # A bad value drops only its own filter.
    assert ids(status="bogus", category="software-development") == ["beta-2"]


@pytest.mark.django_db
def test_task_list_htmx_gets_only_the_results_and_paginates(viewer_client):
    for i in range(PAGE_SIZE + 3):
        make_task(f"task-{i:03d}", files=[])
    url = reverse("tasks:list")
    full = viewer_client.get(url)
    assert b"<html" in full.content and b'id="task-filters"' in full.content
    assert full["Vary"] and "HX-Request" in full["Vary"]

    partial = viewer_client.get(url, {"q": "task-", "page": 2}, **HTMX)
    assert b"<html" not in partial.content and b'id="task-filters"' not in partial.content
    assert len(partial.context_data["page"].object_list) == 3
    assert b"page 2 of 2" in partial.content
    assert b"?q=task-&amp;page=1" in partial.content  # pagination keeps the filters

    # A history restore (back button) needs the whole page even though htmx asks.
    restore = viewer_client.get(url, **HTMX, HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert b"<html" in restore.content


def _list_queries(client, n_tasks):
    for i in range(Task.objects.count(), n_tasks):
        make_task(f"q-{i:03d}", files=[PackageFile("a.txt", b"x")])
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse("tasks:list"), {"status": "ready"})
    assert len(response.context_data["page"].object_list) == min(n_tasks, PAGE_SIZE)
    return [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db
def test_task_list_query_count_does_not_grow_with_the_page(viewer_client):
    few = _list_queries(viewer_client, 2)
    many = _list_queries(viewer_client, PAGE_SIZE)
    assert len(few) == len(many)
    counts = [sql for sql in many if "COUNT(" in sql.upper()]
    assert counts, "the paginator counts the tasks"
    assert all("taskrevision" not in sql.lower() for sql in counts), counts
    # The instruction (long text) is not loaded for the list.
    assert not any('"instruction"' in sql for sql in many)


# --- detail, files, diff -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_task_detail_shows_header_instruction_files_checker_rubric_history(viewer_client, admin_user):
    task = make_task(
        "sales-report",
        metadata={"category": "analysis-reasoning"},
        files=SAMPLE_FILES,
        rubric=RUBRIC,
        stage="import",
        message="first import",
    )
    revise_task(task, user=admin_user, message="reworded", instruction="Summarise the sales by region.")
    response = viewer_client.get(reverse("tasks:detail", args=["sales-report"]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Analysis &amp; Reasoning" in page
    assert "r2" in page and "(current)" in page
    assert "Summarise the sales by region." in page
    # file tree grouped by role, with sizes and htmx links to the viewer
    assert (
        "Input file (starting workspace)" in page and "Checker file (reward/)" in page and "Reference solution" in page
    )
    assert "data/sales.csv" in page and "31\xa0bytes" in page
    assert reverse("tasks:file", args=["sales-report", 2, "input", "data/sales.csv"]) in page
    assert 'hx-target="#file-viewer"' in page
    # checker code and entry command
    assert "bash reward/reward.sh" in page and "print(json.dumps({&#x27;exists&#x27;: 1.0}))" in page
    # rubric with weights and all five levels
    assert "Report clarity" in page and "weight 2" in page and "crisp and complete" in page
    # history, compare form
    assert "first import" in page and "reworded" in page and admin_user.username in page
    assert reverse("tasks:diff", args=["sales-report"]) in page


@pytest.mark.django_db
def test_task_detail_query_count_does_not_grow_with_files_or_revisions(viewer_client, admin_user):
    make_task("small")
    big = make_task(
        "big",
        files=[PackageFile(f"data/f{i}.txt", b"row %d" % i) for i in range(30)]
        + [PackageFile(f"check{i}.py", b"print(%d)" % i, role="reward") for i in range(5)],
    )
    for i in range(4):
        revise_task(big, user=admin_user, message=f"edit {i}", instruction=f"Version {i}")

    def queries(external_id):
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(reverse("tasks:detail", args=[external_id])).status_code == 200
        return [q["sql"] for q in ctx.captured_queries]

    small_sql, big_sql = queries("small"), queries("big")
    assert len(small_sql) == len(big_sql), big_sql
    # Only the checker files' contents are read; input file contents stay in the database.
    blob_reads = [sql for sql in big_sql if '"tasks_blob"."data"' in sql]
    assert len(blob_reads) == 1
    assert Blob.digest(b"print(0)") in blob_reads[0] and Blob.digest(b"row 0") not in blob_reads[0]


@pytest.mark.django_db
def test_any_revision_can_be_viewed(viewer_client, admin_user):
    task = make_task("sales-report", "Summarise the sales for sales-report.")
    revise_task(task, user=admin_user, message="reworded", instruction="Completely new words.")
    url = reverse("tasks:detail", args=["sales-report"])
    old = viewer_client.get(url, {"rev": 1}).content.decode()
    assert "Summarise the sales for sales-report." in old and "View the current revision" in old
    assert viewer_client.get(url, {"rev": 9}).status_code == 404
    assert viewer_client.get(url, {"rev": "x"}).status_code == 404
    assert viewer_client.get(reverse("tasks:detail", args=["nope"])).status_code == 404


@pytest.mark.django_db
def test_script_in_instruction_or_file_is_never_rendered(viewer_client):
    evil = "<script>alert('x')</script>"
    make_task(
        "xss",
        instruction=f"Do it {evil}\n\n<img src=x onerror=alert(1)>",
        files=[
            PackageFile("page.html", evil.encode()),
            PackageFile("notes.md", f"# N\n{evil}".encode()),
            PackageFile("t.csv", f"a\n{evil}\n".encode()),
        ],
    )
    detail = viewer_client.get(reverse("tasks:detail", args=["xss"])).content.decode()
    assert evil not in detail and "onerror=alert(1)>" not in detail
    assert "&lt;script&gt;alert(" in detail  # shown as text in the instruction
    assert detail.count("Do it ") == 1  # the instruction once: the head shows no title line repeating it
    for path in ("page.html", "notes.md", "t.csv"):
        body = viewer_client.get(reverse("tasks:file", args=["xss", 1, "input", path]), **HTMX).content.decode()
        assert "<script>" not in body, path
        assert "&lt;script&gt;" in body, path


@pytest.mark.django_db
def test_the_instruction_is_shown_as_the_agent_gets_it_not_as_markdown(viewer_client):
    # Underscores and stars in a file-name pattern are the instruction's words, not emphasis.
    pattern = "receipts/<YYYY>/<YYYY-MM-DD>_<vendor>_<amount>.txt"
    make_task("literal", instruction=f"File each receipt as {pattern}.\n\n* keep *every* line\n# not a heading")
    detail = viewer_client.get(reverse("tasks:detail", args=["literal"])).content.decode()
    shown = (
        '<div class="instruction-text">File each receipt as receipts/&lt;YYYY&gt;/&lt;YYYY-MM-DD&gt;_&lt;vendor&gt;_'
    )
    assert shown in detail
    assert "\n\n* keep *every* line\n# not a heading</div>" in detail
    assert "<em>" not in detail


@pytest.mark.django_db
def test_file_viewer_kinds(viewer_client):
    make_task("sales-report", files=SAMPLE_FILES)

    def view(path, **extra):
        response = viewer_client.get(reverse("tasks:file", args=["sales-report", 1, "input", path]), **extra)
        assert response.status_code == 200
        return response.content.decode()

    csv_page = view("data/sales.csv", **HTMX)
    assert "<html" not in csv_page and '<table class="csv">' in csv_page and "<td>south</td>" in csv_page
    assert "2 rows" in csv_page
    assert '<div class="markdown rendered"><h1>Notes</h1>' in view("README.md", **HTMX)
    assert "&quot;currency&quot;: &quot;EUR&quot;," in view("config.json", **HTMX)
    binary = view("logo.png", **HTMX)
    assert "Binary, 16 bytes." in binary
    assert reverse("tasks:file_raw", args=["sales-report", 1, "input", "logo.png"]) in binary
    # Without htmx the viewer is a whole page of its own.
    full = view("data/sales.csv")
    assert "<html" in full and "<td>south</td>" in full
    missing = reverse("tasks:file", args=["sales-report", 1, "input", "nope.txt"])
    assert viewer_client.get(missing).status_code == 404
    reward = reverse("tasks:file", args=["sales-report", 1, "reward", "check.py"])
    assert "reward/check.py" in viewer_client.get(reward).content.decode()


@pytest.mark.django_db
def test_raw_download_is_an_attachment_never_rendered(viewer_client):
    make_task("sales-report", files=[PackageFile("site/index.html", b"<script>alert(1)</script>")])
    response = viewer_client.get(reverse("tasks:file_raw", args=["sales-report", 1, "input", "site/index.html"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="index.html"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == b"<script>alert(1)</script>"


@pytest.mark.django_db
def test_diff_page(viewer_client, admin_user):
    task = make_task("sales-report", files=SAMPLE_FILES)
    revise_task(
        task,
        user=admin_user,
        message="fix data",
        instruction="Summarise the sales by region.",
        code_weight=0.5,
        file_changes={("input", "data/sales.csv"): b"region,total\nnorth,10\nsouth,25\n", ("input", "README.md"): None},
    )
    url = reverse("tasks:diff", args=["sales-report"])
    # No choice made: what the latest revision changed.
    page = viewer_client.get(url).content.decode()
    assert "+Summarise the sales by region." in page
    assert "λ (code weight)" in page and "0.5" in page
    assert "-south,20" in page and "+south,25" in page
    assert "removed" in page and "README.md" in page
    assert "5 unchanged" in page

    reverse_page = viewer_client.get(url, {"a": 2, "b": 1}).content.decode()
    assert "-Summarise the sales by region." in reverse_page

    same = viewer_client.get(url, {"a": 1, "b": 1})
    assert same.status_code == 400 and b"Pick two different revisions." in same.content
    assert viewer_client.get(url, {"a": 1, "b": 7}).status_code == 400


@pytest.mark.django_db
def test_diff_page_of_a_single_revision_task(viewer_client):
    make_task("solo")
    response = viewer_client.get(reverse("tasks:diff", args=["solo"]))
    assert response.status_code == 200
    assert b"only one revision" in response.content


# --- Django admin ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_admin_lists_tasks_and_keeps_revisions_and_blobs_read_only(admin_client):
    task = make_task("sales-report", files=SAMPLE_FILES)
    revision = task.current_revision
    assert admin_client.get(reverse("admin:tasks_task_changelist"), {"q": "sales"}).status_code == 200
    change = admin_client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert change.status_code == 200 and b"r1" in change.content

    rev_url = reverse("admin:tasks_taskrevision_change", args=[revision.pk])
    page = admin_client.get(rev_url)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.post(rev_url, {"message": "tampered"}).status_code == 403
    delete = reverse("admin:tasks_taskrevision_delete", args=[revision.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert TaskRevision.objects.get(pk=revision.pk).message == ""

    blob = Blob.objects.get(size=len(b"region,total\nnorth,10\nsouth,20\n"))
    blob_page = admin_client.get(reverse("admin:tasks_blob_change", args=[blob.pk])).content
    assert b"north,10" not in blob_page and blob.sha256.encode() in blob_page
    assert admin_client.get(reverse("admin:tasks_blob_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:tasks_revisionfile_changelist")).status_code == 200


@pytest.mark.django_db
def test_admin_changes_task_status_and_edits_the_taxonomy(admin_client):
    task = make_task("sales-report")
    response = admin_client.post(
        reverse("admin:tasks_task_change", args=[task.pk]),
        {
            "status": "archived",
            "revisions-TOTAL_FORMS": "1",
            "revisions-INITIAL_FORMS": "1",
            "revisions-MIN_NUM_FORMS": "0",
            "revisions-MAX_NUM_FORMS": "1000",
            "revisions-0-id": str(task.current_revision_id),
            "revisions-0-task": str(task.pk),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    task.refresh_from_db()
    assert task.status == "archived"
    assert task.current_revision.number == 1  # no new revision, content untouched

    add = admin_client.post(
        reverse("admin:tasks_scenariocategory_add"),
        {
            "name": "Travel",
            "slug": "travel",
            "description": "",
            "subcategories-TOTAL_FORMS": "1",
            "subcategories-INITIAL_FORMS": "0",
            "subcategories-MIN_NUM_FORMS": "0",
            "subcategories-MAX_NUM_FORMS": "1000",
            "subcategories-0-name": "Itineraries",
            "subcategories-0-slug": "itineraries",
            "subcategories-0-description": "",
        },
    )
    assert add.status_code == 302, add.content.decode()[:2000]
    assert list(ScenarioCategory.objects.get(slug="travel").subcategories.values_list("slug", flat=True)) == [
        "itineraries"
    ]


# --- import page -------------------------------------------------------------------------------------------


def _upload(name, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def _jsonl_line(task_id="imported-1"):
    return (
        json.dumps(
            {
                "prompt": f"Do {task_id}",
                "hook_code": "print('{}')",
                "input_files": [],
                "rule": None,
                "origin_template": task_id,
            }
        ).encode()
        + b"\n"
    )


@pytest.mark.django_db
def test_import_form_refuses_other_files(admin_client):
    url = reverse("tasks:import")
    page = admin_client.get(url)
    assert page.status_code == 200 and b'enctype="multipart/form-data"' in page.content
    response = admin_client.post(url, {"archive": _upload("tasks.exe", b"MZ"), "format": "auto"})
    assert response.status_code == 400
    assert "is not a .zip, .tar.gz or .jsonl file" in response.content.decode()
    missing = admin_client.post(url, {"format": "auto"}, **HTMX)
    assert missing.status_code == 200  # htmx would not swap an error status in
    assert b"<html" not in missing.content and b"This field is required." in missing.content
    assert JobRun.objects.count() == 0


@pytest.mark.django_db
def test_import_upload_starts_a_job(admin_client):
    url = reverse("tasks:import")
    response = admin_client.post(url, {"archive": _upload("tasks.jsonl", _jsonl_line()), "format": "clawgym-jsonl"})
    run = JobRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("jobs:detail", args=[run.pk])
    assert run.status == JobRun.Status.QUEUED

    htmx = admin_client.post(url, {"archive": _upload("more.jsonl", _jsonl_line("x")), "format": "auto"}, **HTMX)
    assert htmx.status_code == 200 and b"<html" not in htmx.content
    second = JobRun.objects.order_by("-pk").first()
    body = htmx.content.decode()
    # The started job's live progress in the panel, and the recent-imports list refreshed out of band.
    assert f'id="job-progress-{second.pk}"' in body and reverse("jobs:progress", args=[second.pk]) in body
    refreshing = f'id="recent-imports-card" class="card" hx-get="{url}" hx-trigger="job-finished from:body"'
    assert refreshing + ' hx-swap="outerHTML" hx-swap-oob="true"' in body
    assert reverse("jobs:detail", args=[run.pk]) in body
    listing = admin_client.get(url).content.decode()
    assert reverse("jobs:detail", args=[run.pk]) in listing
    # The recent imports refresh themselves when a job finishes: that request gets their card alone.
    recent = admin_client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="recent-imports-card").content.decode()
    assert recent.lstrip().startswith(f"<section {refreshing}") and "hx-swap-oob" not in recent
    assert reverse("jobs:detail", args=[second.pk]) in recent and "<form" not in recent


@pytest.mark.django_db
def test_sanity_failures_show_no_server_paths_to_non_admins(viewer_client, admin_client):
    task = make_task("path-leak")
    reason = (
        "could not install the checker in the workspace: [Errno 28] No space left: '/var/clawgym/scratch/ws-9/reward'"
    )
    run = {
        "score": 0.0,
        "status": "sandbox_error",
        "reason": reason,
        "subscores": {},
        "duration": 0.1,
        "stderr": 'File "/var/clawgym/scratch/ws-9/reward/check.py", line 3',
    }
    SanityReport.objects.create(
        revision=task.current_revision,
        runs={"empty": run, "initial": run},
        crashed=True,
        over_lenient=False,
        solvable=None,
        tolerance=0.0,
        backend="process",
        isolated=False,
    )
    url = reverse("tasks:detail", args=["path-leak"])
    page = viewer_client.get(url).content.decode()
    assert "No space left: &#x27;…/reward&#x27;" in page and 'File "…/check.py", line 3' in page.replace("&quot;", '"')
    assert "/var/clawgym" not in page
    assert "/var/clawgym/scratch/ws-9/reward" in admin_client.get(url).content.decode()
    # The API's sanity report, the same way.
    api = viewer_client.get("/api/tasks/path-leak/revisions/1/").json()["sanity"]
    assert api["runs"]["empty"]["reason"].endswith("No space left: '…/reward'") and "/var/" not in json.dumps(api)
    admin_api = admin_client.get("/api/tasks/path-leak/revisions/1/").json()["sanity"]
    assert admin_api["runs"]["empty"]["reason"] == reason
