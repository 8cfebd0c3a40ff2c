import base64
import hashlib
import io
from urllib.parse import quote

import pytest
from django.core.management import call_command

from tasks.models import BenchmarkCategory, Task, TaskRevision
from tasks.package import PackageFile
from tasks.testing import make_task

RUBRIC = [
    {
        "name": "tone",
        "target_file": "reply.md",
        "scores": {"0": "rude", "0.25": "curt", "0.5": "neutral", "0.75": "warm", "1": "warm and precise"},
        "weight": 2,
    }
]
BINARY = bytes(range(256)) + b"\x00\xff\x00"


ANALYSIS = {"category": "analysis-reasoning"}
EXPENSE_FILES = [
    PackageFile("data/expenses.csv", b"date,amount\n2026-01-01,3\n"),
    PackageFile("check.py", b"print('{}')\n", role="reward"),
]


@pytest.fixture
def category(db):
    return BenchmarkCategory.objects.get(slug="analysis-reasoning")  # loaded by a migration


@pytest.fixture
def task(category):
    return make_task(
        "expense-summary",
        "Summarise expenses.csv\nper category.",
        metadata=ANALYSIS,
        files=EXPENSE_FILES,
        stage="import",
    )


@pytest.fixture
def reviewer_api(api_as, reviewer):
    return api_as(reviewer)


@pytest.fixture
def admin_api(api_as, admin_user):
    return api_as(admin_user)


def revision_url(task, number):
    return f"/api/tasks/{task.external_id}/revisions/{number}/"


def content_url(task, number):
    return f"{revision_url(task, number)}files/content/"


# --- list and detail -------------------------------------------------------------------------------------


def test_list_filters_searches_orders_and_paginates(api_as, viewer, category):
    make_task("alpha-report", "Write the alpha report", metadata=ANALYSIS)
    make_task("beta-cleanup", "Clean the beta folder", metadata={}, status=Task.Status.DRAFT)
    make_task("gamma-report", "Gamma report, please", metadata=ANALYSIS, source=Task.Source.PERSONA)
    api = api_as(viewer)

    def ids(query):
        response = api.get(f"/api/tasks/{query}")
        assert response.status_code == 200, response.content
        return [row["external_id"] for row in response.json()["results"]]

    assert ids("?ordering=external_id") == ["alpha-report", "beta-cleanup", "gamma-report"]
    assert ids("?ordering=-external_id") == ["gamma-report", "beta-cleanup", "alpha-report"]
    assert ids("?category=analysis-reasoning&ordering=external_id") == ["alpha-report", "gamma-report"]
    assert ids("?status=draft") == ["beta-cleanup"]
    assert ids("?source=persona") == ["gamma-report"]
    assert ids("?search=report&ordering=external_id") == ["alpha-report", "gamma-report"]
    assert ids("?search=BETA") == ["beta-cleanup"]  # external_id or title, any case

    page = api.get("/api/tasks/?ordering=external_id").json()
    assert page["count"] == 3 and page["next"] is None
    row = page["results"][0]
    assert row["title"] == "Write the alpha report"
    assert row["benchmark_category"] == "analysis-reasoning" and row["current_revision"] == 1
    assert row["url"].endswith("/api/tasks/alpha-report/")

    bad = api.get("/api/tasks/?status=finished")
    assert bad.status_code == 400 and "status" in bad.json()


def test_lists_take_a_fixed_number_of_queries(api_as, viewer, category, django_assert_max_num_queries):
    for i in range(25):
        make_task(f"task-{i:02d}", f"Task {i}", metadata=ANALYSIS, files=EXPENSE_FILES)
    api = api_as(viewer)
    api.get("/api/tasks/")  # warm caches (content types, the user's groups) out of the count
    with django_assert_max_num_queries(6):
        assert len(api.get("/api/tasks/").json()["results"]) == 25
    with django_assert_max_num_queries(8):
        assert len(api.get("/api/tasks/task-00/revisions/1/").json()["files"]) == 2


def test_detail_has_the_instruction_and_the_current_revision_summary(api_as, viewer, reviewer_api, task):
    body = api_as(viewer).get(f"/api/tasks/{task.external_id}/").json()
    assert body["external_id"] == "expense-summary" and body["status"] == "ready" and body["source"] == "imported"
    assert body["instruction"] == "Summarise expenses.csv\nper category."
    current = body["current_revision"]
    assert current["number"] == 1 and current["parent"] is None and current["author"] == "import"
    assert current["file_count"] == 2
    assert body["revisions_url"].endswith("/api/tasks/expense-summary/revisions/")
    assert api_as(viewer).get("/api/tasks/no-such-task/").status_code == 404
    changed = reviewer_api.patch(
        f"/api/tasks/{task.external_id}/", {"instruction": "Total per month.", "message": "m"}, format="json"
    )
    assert changed.json()["instruction"] == "Total per month."
    assert api_as(viewer).get(f"/api/tasks/{task.external_id}/").json()["instruction"] == "Total per month."


def test_revisions_list_and_detail(api_as, viewer, reviewer_api, task):
    reviewer_api.patch(
        f"/api/tasks/{task.external_id}/", {"instruction": "New words", "message": "reword"}, format="json"
    )
    api = api_as(viewer)
    listed = api.get(f"/api/tasks/{task.external_id}/revisions/").json()["results"]
    assert [r["number"] for r in listed] == [2, 1]
    assert listed[0]["parent"] == 1 and listed[0]["author"] == "rita_reviewer" and listed[0]["message"] == "reword"

    detail = api.get(revision_url(task, 1)).json()
    assert detail["instruction"] == "Summarise expenses.csv\nper category."
    assert detail["code_weight"] == 0.7 and detail["checker_entry"] == "bash reward/reward.sh"
    assert detail["rubric"] == [] and detail["metadata"] == {"category": "analysis-reasoning"}
    data = b"date,amount\n2026-01-01,3\n"
    assert {(f["role"], f["path"], f["size"], f["sha256"]) for f in detail["files"]} == {
        ("input", "data/expenses.csv", len(data), hashlib.sha256(data).hexdigest()),
        ("reward", "check.py", 12, hashlib.sha256(b"print('{}')\n").hexdigest()),
    }
    files = api.get(f"{revision_url(task, 1)}files/").json()
    assert [f["path"] for f in files] == ["data/expenses.csv", "check.py"]
    download = api.get(files[0]["content_url"])
    assert download.status_code == 200 and download.content == data
    assert download["Content-Disposition"] == 'attachment; filename="expenses.csv"'
    assert api.get(revision_url(task, 9)).status_code == 404
    assert api.get("/api/tasks/nope/revisions/").status_code == 404


@pytest.mark.parametrize(
    "path, header",
    [
        ('notes/q"uote.txt', 'attachment; filename="q\\"uote.txt"'),
        ("notes/semi;colon.txt", 'attachment; filename="semi;colon.txt"'),
        ("notes/résumé 1.txt", "attachment; filename*=utf-8''r%C3%A9sum%C3%A9%201.txt"),
    ],
)
def test_a_download_names_the_file_in_a_properly_encoded_header(api_as, viewer, category, path, header):
    task = make_task(files=[PackageFile(path, b"x\n")])
    response = api_as(viewer).get(f"{content_url(task, 1)}?role=input&path={quote(path)}")
    assert response.status_code == 200 and response.content == b"x\n"
    assert response["Content-Disposition"] == header


# --- create and delete -----------------------------------------------------------------------------------


def test_admin_creates_a_manual_task_with_text_and_base64_files(admin_api):
    response = admin_api.post(
        "/api/tasks/",
        {
            "external_id": "inbox-triage",
            "instruction": "Sort the inbox.\n",
            "metadata": {"grading_type": "hybrid"},
            "rubric": RUBRIC,
            "code_weight": 0.5,
            "files": [
                {"path": "inbox/1.txt", "content": "hello\n"},
                {"path": "img/logo.bin", "content": base64.b64encode(BINARY).decode(), "encoding": "base64"},
                {"role": "reward", "path": "check.py", "content": "print('{}')\n"},
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert response["Location"] == body["url"]
    assert body["source"] == "manual" and body["status"] == "draft" and body["current_revision"]["number"] == 1
    revision = Task.objects.get(external_id="inbox-triage").current_revision
    assert revision.instruction == "Sort the inbox.\n" and revision.code_weight == 0.5
    assert revision.rubric[0]["scores"]["1"] == "warm and precise"
    assert revision.author == "ada_admin"

    files = admin_api.get("/api/tasks/inbox-triage/revisions/1/files/").json()
    logo = next(f for f in files if f["path"] == "img/logo.bin")
    assert logo["size"] == len(BINARY) and logo["sha256"] == hashlib.sha256(BINARY).hexdigest()
    assert admin_api.get(logo["content_url"]).content == BINARY


def test_create_refuses_a_taken_id_and_leaves_that_task_alone(admin_api, task):
    response = admin_api.post(
        "/api/tasks/", {"external_id": task.external_id, "instruction": "Something else"}, format="json"
    )
    assert response.status_code == 400
    assert "already exists" in response.json()["external_id"][0]
    assert task.revisions.count() == 1


def error_messages(response) -> list[str]:
    """Every message in a DRF error body, however deeply nested."""

    def walk(node):
        if isinstance(node, dict):
            return [m for value in node.values() for m in walk(value)]
        if isinstance(node, list):
            return [m for value in node for m in walk(value)]
        return [str(node)]

    return walk(response.json())


@pytest.mark.parametrize(
    "file",
    [
        {"path": "../etc/passwd", "content": "x"},
        {"path": "/abs.txt", "content": "x"},
        {"path": "a\\..\\b.txt", "content": "x"},
        {"path": "bin.dat", "content": "not base64!", "encoding": "base64"},
    ],
)
def test_create_with_a_bad_file_is_400_naming_it(admin_api, db, file):
    response = admin_api.post(
        "/api/tasks/",
        {"external_id": "bad", "instruction": "x", "files": [{"path": "fine.txt", "content": ""}, file]},
        format="json",
    )
    assert response.status_code == 400
    assert any(repr(file["path"]) in message for message in error_messages(response)), response.json()
    assert not Task.objects.filter(external_id="bad").exists()


def test_create_validates_id_and_rubric(admin_api, db):
    bad_id = admin_api.post("/api/tasks/", {"external_id": "no spaces", "instruction": "x"}, format="json")
    assert bad_id.status_code == 400 and "task id 'no spaces'" in bad_id.content.decode()
    bad_rubric = admin_api.post(
        "/api/tasks/", {"external_id": "ok", "instruction": "x", "rubric": [{"name": "r"}]}, format="json"
    )
    assert bad_rubric.status_code == 400 and "rubric rule 1 (r)" in bad_rubric.json()["rubric"][0]
    assert not Task.objects.exists()


def test_admin_deletes_a_task(admin_api, task):
    assert admin_api.delete(f"/api/tasks/{task.external_id}/").status_code == 204
    assert not Task.objects.filter(pk=task.pk).exists() and not TaskRevision.objects.exists()


# --- PATCH: revisions, status, conflicts -----------------------------------------------------------------


def test_patch_makes_a_child_revision_and_leaves_the_parent_unchanged(reviewer_api, task):
    response = reviewer_api.patch(
        f"/api/tasks/{task.external_id}/",
        {
            "instruction": "Summarise per month.",
            "rubric": RUBRIC,
            "code_weight": 0.6,
            "message": "monthly",
            "base_revision": 1,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["outcome"] == "updated" and body["current_revision"]["number"] == 2
    assert body["current_revision"]["parent"] == 1 and body["title"] == "Summarise per month."
    r1, r2 = task.revisions.order_by("number")
    assert r1.instruction == "Summarise expenses.csv\nper category." and r1.rubric == [] and r1.code_weight == 0.7
    assert r2.parent == r1 and r2.code_weight == 0.6 and r2.rubric[0]["name"] == "tone" and r2.message == "monthly"
    assert r2.author_user.username == "rita_reviewer"
    assert {(f.role, f.path, f.blob_id) for f in r2.files.all()} == {
        (f.role, f.path, f.blob_id) for f in r1.files.all()
    }


def test_identical_patch_makes_nothing_new(reviewer_api, task):
    response = reviewer_api.patch(
        f"/api/tasks/{task.external_id}/",
        {"instruction": "Summarise expenses.csv\nper category.", "message": "no-op"},
        format="json",
    )
    assert response.status_code == 200 and response.json()["outcome"] == "unchanged"
    assert task.revisions.count() == 1


def test_patch_against_a_stale_revision_is_409_naming_both(reviewer_api, task):
    url = f"/api/tasks/{task.external_id}/"
    assert (
        reviewer_api.patch(
            url, {"instruction": "First edit", "message": "a", "base_revision": 1}, format="json"
        ).status_code
        == 200
    )
    stale = reviewer_api.patch(url, {"instruction": "Second edit", "message": "b", "base_revision": 1}, format="json")
    assert stale.status_code == 409
    assert stale.json() == {
        "detail": "expense-summary changed since you loaded it (you edited r1, current is r2)",
        "base_revision": 1,
        "current_revision": 2,
    }
    status_only = reviewer_api.patch(url, {"status": "rejected", "base_revision": 1}, format="json")
    assert status_only.status_code == 409
    task.refresh_from_db()
    assert task.current_revision.instruction == "First edit" and task.status == "ready"
    unknown = reviewer_api.patch(url, {"instruction": "x", "message": "c", "base_revision": 7}, format="json")
    assert unknown.status_code == 400 and "no revision r7 (current is r2)" in unknown.json()["base_revision"][0]


def test_patch_status_makes_no_revision_and_content_needs_a_message(reviewer_api, admin_api, task):
    url = f"/api/tasks/{task.external_id}/"
    response = reviewer_api.patch(url, {"status": "rejected"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "rejected"
    task.refresh_from_db()
    assert task.status == "rejected" and task.revisions.count() == 1

    no_message = reviewer_api.patch(url, {"instruction": "Reworded"}, format="json")
    assert no_message.status_code == 400 and "message" in no_message.json()
    nothing = reviewer_api.patch(url, {"message": "why"}, format="json")
    assert nothing.status_code == 400 and "nothing to change" in nothing.content.decode()
    bad = reviewer_api.patch(url, {"code_weight": 1.5, "message": "m"}, format="json")
    assert bad.status_code == 400 and "code_weight" in bad.json()
    assert admin_api.put(url, {"status": "ready"}, format="json").status_code == 405  # PATCH only


# --- files -----------------------------------------------------------------------------------------------


def test_put_a_file_makes_a_new_revision_and_binary_round_trips(reviewer_api, task):
    url = content_url(task, 1)
    response = reviewer_api.put(
        f"{url}?role=input&path=img/photo.bin",
        {"content": base64.b64encode(BINARY).decode(), "encoding": "base64", "message": "add photo"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (
        body["outcome"] == "updated" and body["number"] == 2 and body["parent"] == 1 and body["message"] == "add photo"
    )
    assert any(f["path"] == "img/photo.bin" and f["size"] == len(BINARY) for f in body["files"])
    download = reviewer_api.get(f"{content_url(task, 2)}?role=input&path=img/photo.bin")
    assert download.content == BINARY and download["ETag"] == f'"{hashlib.sha256(BINARY).hexdigest()}"'
    assert not task.revisions.get(number=1).files.filter(path="img/photo.bin").exists()

    same = reviewer_api.put(
        f"{content_url(task, 2)}?role=input&path=img/photo.bin",
        {"content": base64.b64encode(BINARY).decode(), "encoding": "base64"},
        format="json",
    )
    assert same.status_code == 200 and same.json()["outcome"] == "unchanged" and task.revisions.count() == 2


def test_file_changes_against_an_old_revision_are_409(reviewer_api, task):
    query = "?role=input&path=data/expenses.csv"
    assert reviewer_api.put(content_url(task, 1) + query, {"content": "a,b\n"}, format="json").status_code == 200
    put = reviewer_api.put(content_url(task, 1) + query, {"content": "c,d\n"}, format="json")
    assert put.status_code == 409 and put.json()["base_revision"] == 1 and put.json()["current_revision"] == 2
    delete = reviewer_api.delete(content_url(task, 1) + query)
    assert delete.status_code == 409
    assert task.revisions.count() == 2


def test_delete_a_file_makes_a_revision_without_it(reviewer_api, task):
    base = content_url(task, 1)
    response = reviewer_api.delete(f"{base}?role=reward&path=check.py&message=drop+checker")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["number"] == 2 and body["message"] == "drop checker"
    assert [(f["role"], f["path"]) for f in body["files"]] == [("input", "data/expenses.csv")]
    assert task.revisions.get(number=1).files.filter(role="reward").exists()
    missing = reviewer_api.delete(f"{content_url(task, 2)}?role=reward&path=check.py")
    assert missing.status_code == 404 and "no reward file 'check.py'" in missing.json()["detail"]
    assert reviewer_api.get(f"{base}?role=reward&path=nope.py").status_code == 404


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a//b.txt", "dir/"])
def test_bad_file_paths_are_400_naming_the_file(reviewer_api, task, path):
    base = content_url(task, 1)
    response = reviewer_api.put(f"{base}?role=input&path={path}", {"content": "x"}, format="json")
    assert response.status_code == 400
    assert repr(path) in response.json()["path"][0]
    assert reviewer_api.get(f"{base}?role=input&path={path}").status_code == 400
    assert reviewer_api.get(f"{base}?role=secret&path=a.txt").status_code == 400
    assert task.revisions.count() == 1


# --- import endpoint, schema and docs ----------------------------------------------------------------------


def test_import_upload_queues_a_job_run(admin_api, db, settings, tmp_path):
    from jobs.models import JobRun

    settings.CLAWGYM_UPLOAD_DIR = tmp_path  # the worker (not run here) would delete the upload
    line = b'{"prompt": "Say hi", "hook_code": "", "input_files": [], "rule": null, "origin_template": "t"}\n'
    upload = io.BytesIO(line)
    upload.name = "tasks.jsonl"
    response = admin_api.post("/api/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    run = JobRun.objects.get(pk=response.json()["id"])
    assert run.kind == "tasks.import_upload" and run.status == JobRun.Status.QUEUED
    assert response.json()["status"] == "queued" and response["Location"].endswith(f"/api/jobs/{run.pk}/")
    assert run.params["fmt"] is None and run.params["upload_path"].startswith(str(tmp_path))
    listed = admin_api.get("/api/imports/").json()["results"]
    assert [r["id"] for r in listed] == [run.pk]

    upload.seek(0)
    bad = admin_api.post("/api/imports/", {"file": upload, "format": "csv"}, format="multipart")
    assert bad.status_code == 400 and "format" in bad.json()
    assert admin_api.post("/api/imports/", {}, format="multipart").status_code == 400
    assert JobRun.objects.count() == 1


def test_import_list_shows_only_import_runs_with_their_report(api_as, viewer):
    from jobs.models import JobRun

    done = JobRun.objects.create(
        kind="tasks.import_upload", engine="django_q", status="succeeded", result={"imported": 3, "failed": 0}
    )
    JobRun.objects.create(kind="jobs.ping", engine="django_q")
    api = api_as(viewer)
    assert [r["id"] for r in api.get("/api/imports/").json()["results"]] == [done.pk]
    assert api.get(f"/api/imports/{done.pk}/").json()["result"] == {"imported": 3, "failed": 0}
    assert api.get("/api/imports/?status=queued").json()["count"] == 0


def test_openapi_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = out.read_text()
    assert "/api/tasks/{task_external_id}/revisions/{number}/files/content/" in schema
    assert "/api/jobs/{id}/cancel/" in schema and "/api/imports/" in schema


def test_swagger_ui_renders_from_local_assets(viewer_client):
    response = viewer_client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist" in html
    assert "cdn." not in html and "unpkg" not in html
    assert viewer_client.get("/api/schema/").status_code == 200
