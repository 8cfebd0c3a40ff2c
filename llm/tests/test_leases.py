"""The per-endpoint bound on calls in flight, within one process and across worker processes."""

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.testing import database_url
from llm.leases import EndpointBusy, endpoint_slot, release, slots_in_use, try_claim
from llm.models import EndpointLease, ModelCall, ModelEndpoint
from llm.testing import Reply

BASE_DIR = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def endpoint(db):
    return ModelEndpoint.objects.create(name="bounded", base_url="http://127.0.0.1:9/v1", model="m", max_concurrent=2)


def test_no_more_than_max_concurrent_slots_are_held(endpoint):
    first = try_claim(endpoint, "a", 60)
    second = try_claim(endpoint, "b", 60)
    assert first and second and first != second
    assert try_claim(endpoint, "c", 60) is None and slots_in_use(endpoint) == 2
    release(first, "a")
    assert try_claim(endpoint, "c", 60) == first


def test_release_only_frees_the_holders_own_slot(endpoint):
    slot = try_claim(endpoint, "a", 60)
    release(slot, "someone-else")
    assert slots_in_use(endpoint) == 1


def test_an_expired_lease_is_taken_over(endpoint):
    for holder in ("dead-1", "dead-2"):
        try_claim(endpoint, holder, 60)
    EndpointLease.objects.filter(holder="dead-1").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert EndpointLease.objects.get(pk=try_claim(endpoint, "alive", 60)).holder == "alive"


def test_raising_max_concurrent_adds_slots(endpoint):
    try_claim(endpoint, "a", 60)
    try_claim(endpoint, "b", 60)
    endpoint.max_concurrent = 3
    assert try_claim(endpoint, "c", 60) is not None


def test_waiting_gives_up_with_a_clear_error(endpoint):
    try_claim(endpoint, "a", 60)
    try_claim(endpoint, "b", 60)
    with pytest.raises(EndpointBusy, match="all 2 call slots stayed busy"):
        with endpoint_slot(endpoint, hold_seconds=60, wait_seconds=0.2):
            pass


def test_the_slot_is_given_back_when_the_block_fails(endpoint):
    with pytest.raises(RuntimeError):
        with endpoint_slot(endpoint, hold_seconds=60):
            assert slots_in_use(endpoint) == 1
            raise RuntimeError("the call failed")
    assert slots_in_use(endpoint) == 0


CALLER = """
from llm.client import complete
from llm.models import ModelEndpoint
endpoint = ModelEndpoint.objects.get(name="bounded")
for n in range(3):
    complete(endpoint, [{"role": "user", "content": "hi"}], purpose="lease-test")
"""


@pytest.mark.workers
def test_the_bound_holds_across_processes(transactional_db, scripted_upstream):
    """4 processes make 3 slow calls each against an endpoint allowing 2 at once: never more than 2 in flight."""
    # Each answer waits 5 s (under the client's 10 s timeout) unless a call past the bound comes, so the two slots are
    # held together however the machine's load spreads the processes' starts, and a third call in flight is seen.
    scripted_upstream.default = Reply.text("slow", delay=5, until_in_flight=3)
    ModelEndpoint.objects.create(
        name="bounded", base_url=scripted_upstream.base_url, model="m", max_concurrent=2, timeout_seconds=10
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
        "LOG_LEVEL": "WARNING",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", CALLER],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=120)[0].decode() for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, outputs
    assert ModelCall.objects.filter(purpose="lease-test", error="").count() == 12
    assert len(scripted_upstream.requests) == 12
    assert scripted_upstream.max_in_flight == 2  # the bound was reached, and never passed
    assert slots_in_use(ModelEndpoint.objects.get(name="bounded")) == 0
