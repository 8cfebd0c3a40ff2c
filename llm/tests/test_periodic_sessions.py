"""The periodic job llm.close_stale_sessions (jobs.periodic's table) closes expired proxy sessions."""

from datetime import timedelta

from django.utils import timezone

from jobs.testing import run_now
from llm.models import ModelEndpoint
from llm.services import open_proxy_session


def test_expired_proxy_sessions_are_closed_and_open_ones_kept(db):
    endpoint = ModelEndpoint.objects.create(name="up", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"])
    stale = open_proxy_session(endpoint, subject="rollout:1")
    live = open_proxy_session(endpoint, subject="rollout:2")
    stale.__class__.objects.filter(pk=stale.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    run = run_now("llm.close_stale_sessions")

    assert run.result == {"closed": 1}
    stale.refresh_from_db()
    live.refresh_from_db()
    assert (stale.is_open, stale.closed_at is not None, live.is_open) == (False, True, True)
