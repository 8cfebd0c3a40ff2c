"""A message that announces started work names it (data-started), and the page that shows the work says when it
has finished (data-finished), so the message goes then (static/js/started.js; the browser test watches it go). A
finished batch offers Resume only when resuming would retry something."""

import pytest
from django.urls import reverse

from synthesis.models import SynthesisBatch
from synthesis.testing import make_batch

Status = SynthesisBatch.Status
RETRYABLE = ("failed", "files", {"files": {"retryable": True}}, "the generator timed out")
FOR_GOOD = ("failed", "files", {"files": {"retryable": False}}, "the files could not be parsed")
KEPT = ("kept", "qa", {}, "")


def page(client, batch) -> str:
    return client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()


@pytest.mark.parametrize(
    "status, items, offered",
    [
        (Status.COMPLETE, [KEPT, FOR_GOOD], False),
        (Status.COMPLETE, [KEPT, RETRYABLE], True),
        (Status.RUNNING, [KEPT, ("pending", "files", {}, "")], False),
        (Status.PAUSED, [KEPT, ("pending", "files", {}, "")], True),
        (Status.CANCELLED, [KEPT, ("pending", "files", {}, "")], True),
    ],
)
def test_resume_is_offered_only_where_it_would_do_something(admin_client, endpoints, status, items, offered):
    batch = make_batch(*endpoints, status=status, items=items)
    html = page(admin_client, batch)
    assert (reverse("synthesis:resume", args=[batch.pk]) in html) is offered
    assert (f'data-finished="batch-{batch.pk}"' in html) is batch.is_finished


def test_the_resume_message_names_its_batch_until_it_has_finished(admin_client, endpoints):
    batch = make_batch(*endpoints, status=Status.PAUSED, items=[KEPT, ("pending", "files", {}, "")])
    response = admin_client.post(reverse("synthesis:resume", args=[batch.pk]), follow=True)
    html = response.content.decode()
    assert f'<li class="msg-success" data-started="batch-{batch.pk}">Batch #{batch.pk} goes on' in html
    assert "data-finished" not in html and "js/started.js" in html

    SynthesisBatch.objects.filter(pk=batch.pk).update(status=Status.COMPLETE)
    assert f'data-finished="batch-{batch.pk}"' in page(admin_client, batch)
