"""In a browser: the message that a batch goes on leaves the page by itself once the batch has finished (the page
polls the batch; no reload), and the finished batch offers no Resume."""

import pytest
from django.urls import reverse

from lib.browser_testing import log_in
from synthesis.models import SynthesisBatch
from synthesis.testing import make_batch, make_endpoints

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_started_message_goes_when_the_batch_finishes(page, live_server, admin_user, scripted_upstream):
    batch = make_batch(
        *make_endpoints(scripted_upstream),
        status=SynthesisBatch.Status.PAUSED,
        items=[("kept", "qa", {}, ""), ("pending", "files", {}, "")],
    )
    log_in(page, live_server, admin_user)
    page.goto(f"{live_server.url}{reverse('synthesis:detail', args=[batch.pk])}")
    page.locator("button", has_text="Resume").click()
    message = page.locator(f'.messages li[data-started="batch-{batch.pk}"]')
    message.wait_for()
    assert "goes on" in message.inner_text()

    # What the worker does at the end: the batch is complete. The page's next poll shows it, and the message goes.
    SynthesisBatch.objects.filter(pk=batch.pk).update(status=SynthesisBatch.Status.COMPLETE)
    page.locator(f'#batch-live[data-finished="batch-{batch.pk}"]').wait_for()
    message.wait_for(state="detached")
    assert page.locator(".messages").count() == 0
    assert page.locator("button", has_text="Resume").count() == 0
