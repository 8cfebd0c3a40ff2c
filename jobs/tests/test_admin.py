"""JobRun in the Django admin: listed and filtered, never added or edited, cancellable by admins."""

import pytest
from django.urls import reverse

from jobs.models import JobRun

pytestmark = pytest.mark.django_db


def test_changelist_filters_by_status(admin_client):
    failed = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.FAILED)
    JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.SUCCEEDED)

    response = admin_client.get(reverse("admin:jobs_jobrun_changelist"), {"status__exact": "failed"})

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [failed]


def test_runs_are_read_only(admin_client):
    run = JobRun.objects.create(kind="jobs.ping", engine="django_q", params={"steps": 1})

    assert admin_client.get(reverse("admin:jobs_jobrun_add")).status_code == 403
    page = admin_client.get(reverse("admin:jobs_jobrun_change", args=[run.pk]))
    assert page.status_code == 200 and 'name="kind"' not in page.content.decode()
    admin_client.post(reverse("admin:jobs_jobrun_change", args=[run.pk]), {"kind": "other"})
    run.refresh_from_db()
    assert run.kind == "jobs.ping"


def test_cancel_action(admin_client):
    queued = JobRun.objects.create(kind="jobs.ping", engine="django_q")
    running = JobRun.objects.create(kind="jobs.ping", engine="django_q", status=JobRun.Status.RUNNING, worker="w")

    admin_client.post(
        reverse("admin:jobs_jobrun_changelist"),
        {"action": "cancel_selected", "_selected_action": [queued.pk, running.pk]},
    )

    assert JobRun.objects.get(pk=queued.pk).status == JobRun.Status.CANCELLED
    assert JobRun.objects.get(pk=running.pk).cancel_requested
