"""Proposing one task to a benchmark from the task's page (admins)."""

import pytest
from django.urls import reverse

from benchmarks.models import Benchmark
from review.models import BenchmarkCandidate
from tasks.testing import make_task

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def test_an_admin_proposes_a_task_from_its_page(admin_client, benchmark):
    task = make_task("propose-me")
    Benchmark.objects.create(name="another-bench")
    url = reverse("review:propose_task", args=["propose-me"])
    assert f'hx-get="{url}"' in admin_client.get(reverse("tasks:detail", args=["propose-me"])).content.decode()

    form = admin_client.get(url, **HTMX).content.decode()
    assert "<html" not in form and f'<option value="{benchmark.name}"' in form and "another-bench" in form
    assert "<html" in admin_client.get(url).content.decode()  # its own page without JS

    done = admin_client.post(url, {"benchmark": benchmark.name})
    candidate = BenchmarkCandidate.objects.get(task=task, benchmark=benchmark)
    assert done.status_code == 302 and done["Location"] == reverse("review:candidate", args=[candidate.pk])
    assert candidate.status == BenchmarkCandidate.Status.AWAITING_DIAGNOSIS
    again = admin_client.post(url, {"benchmark": benchmark.name}, follow=True)
    assert "Already a candidate: propose-me" in again.content.decode()
    assert BenchmarkCandidate.objects.filter(task=task).count() == 1
    assert "Candidate of" in admin_client.get(url, **HTMX).content.decode()

    unknown = admin_client.post(url, {"benchmark": "nope"})
    assert unknown.status_code == 400 and "Select a valid choice" in unknown.content.decode()


def test_only_admins_propose(reviewer_client, benchmark):
    make_task("not-yours")
    url = reverse("review:propose_task", args=["not-yours"])
    assert reviewer_client.get(url).status_code == 403
    assert reviewer_client.post(url, {"benchmark": benchmark.name}).status_code == 403
    assert (
        "Propose to a benchmark"
        not in reviewer_client.get(reverse("tasks:detail", args=["not-yours"])).content.decode()
    )
    assert not BenchmarkCandidate.objects.exists()
