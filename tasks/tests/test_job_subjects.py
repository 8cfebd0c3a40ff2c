"""The jobs list names a task's job runs by their subject (the task and revision), linked to the task's page."""

import pytest
from django.urls import reverse

import jobs
from jobs.models import JobRun
from tasks.testing import make_task

pytestmark = pytest.mark.django_db


def test_the_list_tells_runs_of_one_kind_apart_by_their_subject(viewer_client):
    first, second = make_task("count-orders"), make_task("sum-sales")
    runs = [jobs.enqueue("tasks.sanity_check", revision_id=t.current_revision_id) for t in (first, second)]
    assert [r.subject for r in runs] == ["count-orders r1", "sum-sales r1"]
    assert runs[0].subject_url == reverse("tasks:detail", args=["count-orders"]) + "?rev=1"
    old = JobRun.objects.create(
        kind="review.diagnose", engine="django_q", params={"candidate_id": 12}
    )  # queued before runs had subjects

    listed = viewer_client.get(reverse("jobs:list")).content.decode()
    assert '<a href="/tasks/count-orders/?rev=1">count-orders r1</a>' in listed
    assert '<a href="/tasks/sum-sales/?rev=1">sum-sales r1</a>' in listed
    assert '<div class="job-subject" data-testid="job-subject">candidate_id 12</div>' in listed
    assert old.about == "candidate_id 12"
