""" "Diagnose all" answers the queue with the batch's progress, named as started work (data-started); the progress
of the finished batch says so (data-finished), and static/js/started.js then drops the panel: the queue's rows show
the diagnoses."""

from django.urls import reverse
from django.utils import timezone

from jobs.models import JobRun
from review.tests.helpers import HTMX


def test_the_diagnose_all_panel_goes_once_its_batch_has_finished(admin_client, candidate):
    response = admin_client.post(reverse("review:diagnose_all"), {"benchmark": candidate.benchmark.name}, **HTMX)
    [run] = JobRun.objects.filter(parent__isnull=True)
    html = response.content.decode()
    assert f'<div data-started="job-{run.pk}">' in html and "data-finished" not in html

    JobRun.objects.update(status=JobRun.Status.SUCCEEDED, finished_at=timezone.now())
    progress = admin_client.get(reverse("jobs:batch_progress", args=[run.pk]), **HTMX).content.decode()
    assert f'data-finished="job-{run.pk}"' in progress
