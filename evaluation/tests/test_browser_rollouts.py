"""The rollout pages in a real browser while a rollout runs: they follow it to its end without a reload.

A builtin-harness rollout runs for real (scripted model on loopback -> recording proxy under uvicorn -> bubblewrap
sandbox -> the real checker), in a thread of the test process, as its job would run it. The model's first answer is
held back until the test lets it go, so the pages are open while the rollout is queued and then while it runs.
"""

import asyncio
import threading

import pytest
from django.db import connections
from django.urls import reverse

from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT_SUMMARY, needs_bwrap
from lib.browser_testing import assert_no_reload, log_in, mark_document, screenshot
from llm.testing import Reply, ScriptedUpstream

pytestmark = [
    needs_bwrap,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("taxonomy"),
]

HELD_SECONDS = 60  # the most the model's first answer is held; the test lets it go long before


class HeldUpstream(ScriptedUpstream):
    """The scripted model, answering only once `go` is set (the builtin agent does not stream, so no gate)."""

    def __init__(self):
        super().__init__()
        self.go = threading.Event()
        self.asked = threading.Event()

    async def _answer(self, send, path, reply, received):
        self.asked.set()
        for _ in range(HELD_SECONDS * 100):
            if self.go.is_set():
                break
            await asyncio.sleep(0.01)
        await super()._answer(send, path, reply, received)


@pytest.fixture
def scripted_upstream():
    """Replaces llm.testing's fixture: the endpoint fixture (agent_endpoint) points at this held upstream."""
    upstream = HeldUpstream().start()
    yield upstream
    upstream.go.set()
    upstream.stop()


class RolloutThread(threading.Thread):
    """execute_rollout in a thread, with its own database connection, closed at the end."""

    def __init__(self, rollout_id: int):
        super().__init__(daemon=True)
        self.rollout_id, self.error = rollout_id, None

    def run(self):
        try:
            execute_rollout(self.rollout_id)
        except BaseException as exc:  # noqa: BLE001  (shown by the test)
            self.error = exc
        finally:
            connections.close_all()


def badge(page, selector: str) -> str:
    return page.locator(selector).inner_text()


def test_the_rollout_page_and_list_follow_a_rollout_from_queued_to_scored(
    browser, page, live_server, live_server_asgi, scripted_upstream, fruit_task, agent_endpoint, viewer
):
    scripted_upstream.push(
        Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY}),
        Reply.text("Done: summary.txt holds the counts."),
    )
    [rollout] = create_rollouts(fruit_task, agent_endpoint, harness="builtin", user=None)
    log_in(page, live_server, viewer)
    detail = page
    detail.goto(live_server.url + reverse("evaluation:detail", args=[rollout.pk]))
    assert badge(detail, "#summary .badge") == "Queued"
    mark_document(detail)
    listing = detail.context.new_page()
    listing.goto(live_server.url + reverse("evaluation:list"))
    row = listing.locator(".rollout-table tbody tr", has=listing.locator(f"a[href$='/rollouts/{rollout.pk}/']"))
    assert row.locator(".badge").first.inner_text() == "Queued"
    mark_document(listing)

    worker = RolloutThread(rollout.pk)
    worker.start()
    assert scripted_upstream.asked.wait(60), "the agent never asked the model"
    # Running: both pages notice on their own (the list polls while a rollout on it is unfinished).
    detail.wait_for_function("document.querySelector('#summary .badge').innerText === 'Running'")
    listing.wait_for_function(
        f"document.querySelector(\"a[href$='/rollouts/{rollout.pk}/']\").closest('tr')"
        ".querySelector('.badge').innerText === 'Running'"
    )
    screenshot(detail, "rollout-running")

    scripted_upstream.go.set()
    worker.join(120)
    assert not worker.is_alive() and worker.error is None, worker.error
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.SCORED and rollout.score == 1.0, rollout.error

    # Scored: the page shows the score, the checker's sub-scores and the transcript, then stops polling.
    detail.wait_for_function("document.querySelector('#summary .badge').innerText === 'Scored'", timeout=20_000)
    assert detail.inner_text("#summary .score") == "1.000"
    assert "summary_right" in detail.inner_text("#scores")
    assert "Done: summary.txt holds the counts." in detail.inner_text("#final")
    assert detail.locator("[hx-trigger^=every]").count() == 0
    assert_no_reload(detail)
    listing.wait_for_function(
        f"document.querySelector(\"a[href$='/rollouts/{rollout.pk}/']\").closest('tr')"
        ".querySelector('.badge').innerText === 'Scored'",
        timeout=20_000,
    )
    assert row.locator("td.num").first.inner_text() == "1.000"
    assert listing.locator("[hx-trigger^=every]").count() == 0
    assert_no_reload(listing)
    screenshot(detail, "rollout-scored")
