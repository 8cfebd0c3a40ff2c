"""A per-endpoint bound on calls in flight that holds across processes and machines sharing the database.

Each endpoint has `max_concurrent` EndpointLease rows (slots). A caller claims a free slot with a conditional
UPDATE (free = no holder, or the holder's lease expired) and frees it when the call ends. Both SQLite and
PostgreSQL run a single-row conditional UPDATE atomically, so two processes never hold the same slot, and no
Redis is needed for the embedded default. A crashed holder's slot frees itself when its lease expires.

Do not hold a slot inside a database transaction: other processes would not see the claim until it commits.
"""

import os
import random
import socket
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .models import EndpointLease, ModelEndpoint

POLL_START_SECONDS = 0.02
POLL_MAX_SECONDS = 0.5


class EndpointBusy(Exception):
    """No slot of the endpoint came free within the wait limit."""


def _holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _ensure_slots(endpoint: ModelEndpoint) -> None:
    wanted = [EndpointLease(endpoint=endpoint, slot=n) for n in range(endpoint.max_concurrent)]
    EndpointLease.objects.bulk_create(wanted, ignore_conflicts=True)


def _free(now):
    return Q(holder="") | Q(expires_at__lt=now)


def try_claim(endpoint: ModelEndpoint, holder: str, hold_seconds: float) -> int | None:
    """Claim one free slot now; its pk, or None when all `max_concurrent` slots are held."""
    now = timezone.now()
    slots = EndpointLease.objects.filter(endpoint=endpoint, slot__lt=endpoint.max_concurrent)
    free = list(slots.filter(_free(now)).values_list("pk", flat=True))
    if not free and slots.count() < endpoint.max_concurrent:
        _ensure_slots(endpoint)  # first use, or max_concurrent was raised
        free = list(slots.filter(_free(now)).values_list("pk", flat=True))
    # Random order: concurrent claimers rarely race for the same row.
    random.shuffle(free)
    expires = now + timedelta(seconds=hold_seconds)
    for pk in free:
        # The free condition is repeated in the UPDATE: only one of two racing claimers matches the row.
        claimed = EndpointLease.objects.filter(_free(now), pk=pk).update(holder=holder, expires_at=expires)
        if claimed:
            return pk
    return None


def release(lease_pk: int, holder: str) -> None:
    EndpointLease.objects.filter(pk=lease_pk, holder=holder).update(holder="", expires_at=None)


@contextmanager
def endpoint_slot(endpoint: ModelEndpoint, *, hold_seconds: float, wait_seconds: float | None = None):
    """Hold one of the endpoint's slots for the block; wait (polling with backoff) until one is free.

    `hold_seconds` bounds how long a dead holder can keep the slot: use the call's timeout plus a margin.
    Raises EndpointBusy after `wait_seconds` (settings.CLAWGYM_LLM_SLOT_WAIT_SECONDS by default).
    """
    wait = settings.CLAWGYM_LLM_SLOT_WAIT_SECONDS if wait_seconds is None else wait_seconds
    holder = _holder_name()
    deadline = time.monotonic() + wait
    pause = POLL_START_SECONDS
    while True:
        lease_pk = try_claim(endpoint, holder, hold_seconds)
        if lease_pk is not None:
            break
        if time.monotonic() >= deadline:
            raise EndpointBusy(
                f"endpoint {endpoint.name!r}: all {endpoint.max_concurrent} call slots stayed busy for {wait:.0f} s"
            )
        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(POLL_MAX_SECONDS, pause * 2)
    try:
        yield lease_pk
    finally:
        release(lease_pk, holder)


def slots_in_use(endpoint: ModelEndpoint) -> int:
    now = timezone.now()
    return EndpointLease.objects.filter(endpoint=endpoint).exclude(_free(now)).count()
