"""Who may open which page: every catalog page against every kind of user."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from accounts.testing import make_user
from jobs.models import JobRun
from tasks.testing import SAMPLE_FILES, make_task

ANON, OUTSIDER, VIEWER, REVIEWER, ADMIN = "anonymous", "outsider", "viewer", "reviewer", "admin"
USERS = [ANON, OUTSIDER, VIEWER, REVIEWER, ADMIN]

JOB = object()  # stands for the pk of a job run made by the fixture

# (url name, args, query, lowest role that may open it)
PAGES = [
    ("dashboard", [], "", VIEWER),
    ("tasks:list", [], "?q=sales", VIEWER),
    ("tasks:detail", ["sales-report"], "", VIEWER),
    ("tasks:detail", ["sales-report"], "?rev=1", VIEWER),
    ("tasks:file", ["sales-report", 1, "input", "data/sales.csv"], "", VIEWER),
    ("tasks:file_raw", ["sales-report", 1, "input", "data/sales.csv"], "", VIEWER),
    ("tasks:diff", ["sales-report"], "", VIEWER),
    ("tasks:import", [], "", ADMIN),
    ("jobs:list", [], "", VIEWER),
    ("jobs:detail", [JOB], "", VIEWER),
    ("jobs:progress", [JOB], "", VIEWER),
]
RANK = {VIEWER: 0, REVIEWER: 1, ADMIN: 2}


def expected_status(who: str, needed: str) -> int:
    if who == ANON:
        return 302
    if who == OUTSIDER:
        return 403
    return 200 if RANK[who] >= RANK[needed] else 403


@pytest.fixture
def job(db):
    return JobRun.objects.create(kind="tasks.import_upload", engine="django_q", status=JobRun.Status.RUNNING)


@pytest.fixture
def clients(db, settings):
    # Four users a test: a fast hasher keeps the matrix quick (the passwords are never checked here).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_task("sales-report", files=SAMPLE_FILES)
    out = {ANON: Client()}
    for who, role in [(OUTSIDER, None), (VIEWER, "viewer"), (REVIEWER, "reviewer"), (ADMIN, "admin")]:
        client = Client()
        client.force_login(make_user(f"user_{who}", role))
        out[who] = client
    return out


@pytest.mark.parametrize("name,args,query,needed", PAGES, ids=[f"{p[0]}{p[2]}" for p in PAGES])
def test_page_access_matrix(clients, job, name, args, query, needed):
    url = reverse(name, args=[job.pk if arg is JOB else arg for arg in args]) + query
    for who in USERS:
        response = clients[who].get(url)
        expected = expected_status(who, needed)
        assert response.status_code == expected, f"{who} GET {url}: {response.status_code}, expected {expected}"
        if expected == 302:
            assert response["Location"].startswith(reverse("login") + "?next="), response["Location"]


@pytest.mark.parametrize("who", [ANON, OUTSIDER, VIEWER, REVIEWER])
def test_only_admins_may_post_an_import(clients, who):
    response = clients[who].post(reverse("tasks:import"), {"format": "auto"})
    assert response.status_code == (302 if who == ANON else 403)


def test_forbidden_page_says_which_role_is_needed(clients):
    response = clients[VIEWER].get(reverse("tasks:import"))
    assert response.status_code == 403
    assert b"admin role" in response.content


def test_inactive_users_are_treated_as_anonymous(clients):
    user = get_user_model().objects.get(username="user_admin")
    user.is_active = False
    user.save()
    response = clients[ADMIN].get(reverse("dashboard"))
    assert response.status_code == 302
