"""How many rollouts may run at once on one machine, held across every worker process on it.

OpenClaw needs about 1 GB of memory per run; the job engines' worker counts know nothing of that (and one django-q
cluster serves every queue). So each rollout holds a SandboxSlot row of its host while its agent's sandbox runs:
claimed with a conditional UPDATE (atomic on SQLite and PostgreSQL), freed when the agent stops (the checker that
scores it then runs in a small sandbox of its own, beside the next rollout's agent). A slot whose holder process died is
free again at once on the same host, and anywhere once its lease expired.

Slot count: settings.CLAWGYM_ROLLOUT_SLOTS, or when 0 the machine's memory divided by CLAWGYM_ROLLOUT_SLOT_MEMORY_MB
(keeping 2 GiB for the rest), at most twice its cores (an agent mostly waits for its model, but OpenClaw's start-up
takes about 10 CPU-seconds), and at least 1.
"""

from __future__ import annotations

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

from jobs.runner import worker_gone, worker_id

from .models import SandboxSlot

RESERVED_MEMORY_BYTES = 2 * 1024**3
POLL_START_SECONDS = 0.1
POLL_MAX_SECONDS = 0.5  # a slot that frees is taken within half a second (a poll is one small query)


class NoSlotFree(RuntimeError):
    """No slot came free within the wait limit."""


def memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * 1024**3  # unknown: assume a small machine


def slot_count() -> int:
    if settings.CLAWGYM_ROLLOUT_SLOTS > 0:
        return settings.CLAWGYM_ROLLOUT_SLOTS
    per_slot = settings.CLAWGYM_ROLLOUT_SLOT_MEMORY_MB * 1024 * 1024
    by_memory = (memory_bytes() - RESERVED_MEMORY_BYTES) // per_slot
    return max(1, min(by_memory, 2 * (os.cpu_count() or 1)))


def _host() -> str:
    return socket.gethostname()


def _free(now) -> Q:
    return Q(holder="") | Q(expires_at__lt=now)


def _release_dead_holders(host: str) -> None:
    """Free this host's slots whose holder process has exited (a killed worker)."""
    for slot in SandboxSlot.objects.filter(host=host).exclude(holder=""):
        process = slot.holder.rsplit(":", 1)[0]  # holder = worker id + ":" + a nonce
        if worker_gone(process):
            SandboxSlot.objects.filter(pk=slot.pk, holder=slot.holder).update(holder="", expires_at=None)


def try_claim(holder: str, hold_seconds: float, count: int | None = None) -> int | None:
    """Claim a free slot of this host now: its pk, or None when all are held."""
    host = _host()
    count = count or slot_count()
    SandboxSlot.objects.bulk_create([SandboxSlot(host=host, slot=n) for n in range(count)], ignore_conflicts=True)
    now = timezone.now()
    slots = SandboxSlot.objects.filter(host=host, slot__lt=count)
    free = list(slots.filter(_free(now)).values_list("pk", flat=True))
    if not free:
        _release_dead_holders(host)
        free = list(slots.filter(_free(now)).values_list("pk", flat=True))
    random.shuffle(free)  # concurrent claimers rarely race for the same row
    expires = now + timedelta(seconds=hold_seconds)
    for pk in free:
        # The free condition is repeated in the UPDATE: of two racing claimers only one matches the row.
        if SandboxSlot.objects.filter(_free(now), pk=pk).update(holder=holder, expires_at=expires):
            return pk
    return None


def release(pk: int, holder: str) -> None:
    SandboxSlot.objects.filter(pk=pk, holder=holder).update(holder="", expires_at=None)


def in_use() -> int:
    now = timezone.now()
    return SandboxSlot.objects.filter(host=_host(), slot__lt=slot_count()).exclude(_free(now)).count()


class HeldSlot:
    """A claimed slot, freed when its block ends or earlier by `release()` (a rollout frees it when its agent stops:
    the checker that scores the workspace runs in a sandbox of its own, and the next agent need not wait for it)."""

    def __init__(self, pk: int, holder: str):
        self.pk, self.holder, self.released = pk, holder, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            release(self.pk, self.holder)


@contextmanager
def rollout_slot(*, hold_seconds: float, wait_seconds: float | None = None, on_wait=None):
    """Hold one of this machine's slots for the block, waiting (polling with backoff) until one is free.

    hold_seconds bounds how long a holder on another host that vanished keeps it; on_wait(seconds_waited) is
    called between polls (a job passes its progress report, which also notices a cancel). Raises NoSlotFree.
    """
    wait = settings.CLAWGYM_ROLLOUT_SLOT_WAIT_SECONDS if wait_seconds is None else wait_seconds
    holder = f"{worker_id()}:{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    pause = POLL_START_SECONDS
    while True:
        pk = try_claim(holder, hold_seconds)
        if pk is not None:
            break
        waited = time.monotonic() - started
        if waited >= wait:
            raise NoSlotFree(f"all {slot_count()} rollout slots of {_host()} stayed busy for {wait:.0f} s")
        if on_wait is not None:
            on_wait(waited)
        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(POLL_MAX_SECONDS, pause * 2)
    held = HeldSlot(pk, holder)
    try:
        yield held
    finally:
        held.release()
