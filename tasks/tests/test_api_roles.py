"""Every API endpoint and method against every kind of caller.

Reads need the viewer role; content changes the reviewer role; creating and deleting tasks, importing and
cancelling jobs the admin role. Anonymous callers get 401, signed-in callers without the role 403, and a
refused write changes nothing.
"""

import io

import pytest
from rest_framework.test import APIClient

from accounts.roles import ADMIN, REVIEWER, VIEWER
from accounts.testing import make_user
from jobs.models import JobRun
from lib.testing import token_client
from tasks.models import Task, TaskRevision
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

TASK = "/api/tasks/role-check/"
REVISION = f"{TASK}revisions/1/"
FILE = f"{REVISION}files/content/?role=input&path=notes/a.txt"


def _upload():
    upload = io.BytesIO(b'{"prompt": "Say hi", "hook_code": "", "input_files": [], "rule": null}\n')
    upload.name = "tasks.jsonl"
    return {"file": upload}


# (method, url, body, body format, role needed, status when allowed)
ENDPOINTS = [
    ("get", "/api/", None, None, VIEWER, 200),
    ("get", "/api/schema/", None, None, VIEWER, 200),
    ("get", "/api/docs/", None, None, VIEWER, 200),
    ("get", "/api/tasks/", None, None, VIEWER, 200),
    ("post", "/api/tasks/", {"external_id": "new-task", "instruction": "Do it"}, "json", ADMIN, 201),
    ("get", TASK, None, None, VIEWER, 200),
    ("patch", TASK, {"instruction": "Changed", "message": "edit"}, "json", REVIEWER, 200),
    ("patch", TASK, {"status": "rejected"}, "json", REVIEWER, 200),
    ("delete", TASK, None, None, ADMIN, 204),
    ("get", f"{TASK}revisions/", None, None, VIEWER, 200),
    ("get", REVISION, None, None, VIEWER, 200),
    ("get", f"{REVISION}files/", None, None, VIEWER, 200),
    ("get", FILE, None, None, VIEWER, 200),
    ("put", FILE, {"content": "new text"}, "json", REVIEWER, 200),
    ("delete", FILE, None, None, REVIEWER, 200),
    ("get", "/api/imports/", None, None, VIEWER, 200),
    ("get", "/api/imports/{import_run}/", None, None, VIEWER, 200),
    ("post", "/api/imports/", _upload, "multipart", ADMIN, 202),
    ("get", "/api/jobs/", None, None, VIEWER, 200),
    ("get", "/api/jobs/{job_run}/", None, None, VIEWER, 200),
    ("post", "/api/jobs/{job_run}/cancel/", None, None, ADMIN, 200),
]
CALLERS = ["anonymous", "outsider", VIEWER, REVIEWER, ADMIN]
RANK = {VIEWER: 1, REVIEWER: 2, ADMIN: 3}


@pytest.fixture
def world(db, settings, tmp_path):
    settings.CLAWGYM_UPLOAD_DIR = tmp_path
    save_package(
        TaskPackage(
            external_id="role-check",
            instruction="Check roles",
            files=[PackageFile("notes/a.txt", b"old text"), PackageFile("check.py", b"print('{}')", role="reward")],
        )
    )
    return {
        "job_run": JobRun.objects.create(kind="jobs.ping", engine="django_q").pk,
        "import_run": JobRun.objects.create(kind="tasks.import_upload", engine="django_q").pk,
    }


def _state():
    return (
        sorted(Task.objects.values_list("external_id", "status")),
        TaskRevision.objects.count(),
        sorted(JobRun.objects.values_list("id", "status", "cancel_requested")),
    )


def _client(caller) -> APIClient:
    if caller == "anonymous":
        return APIClient()
    return token_client(make_user(f"{caller}_user", None if caller == "outsider" else caller))


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize(
    "method, url, body, fmt, needed, allowed_status",
    ENDPOINTS,
    ids=[f"{m.upper()} {u.split('?')[0]}{' ' + str(b)[:30] if m == 'patch' else ''}" for m, u, b, *_ in ENDPOINTS],
)
def test_role_matrix(world, caller, method, url, body, fmt, needed, allowed_status):
    client = _client(caller)
    url = url.format(**world)
    data = body() if callable(body) else body
    before = _state()
    response = getattr(client, method)(url, data, format=fmt) if data is not None else getattr(client, method)(url)

    if caller == "anonymous":
        assert response.status_code == 401, response.content
        assert response["WWW-Authenticate"] == "Token"
    elif caller == "outsider" or RANK[caller] < RANK[needed]:
        assert response.status_code == 403, response.content
    else:
        assert response.status_code == allowed_status, response.content
        return
    assert _state() == before, "a refused request changed something"
    if method == "get":
        assert b"role-check" not in response.content and b"Check roles" not in response.content
