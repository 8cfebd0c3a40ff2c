"""What a process keeps between sandbox runs (idle pooled volumes, ready Docker containers), released as it ends.

The modules that keep something register how to release it with on_exit(); release() runs those, the last
registered first (the Docker backend's ready containers before the volumes their removal hands over).

It is one of multiprocessing's exit finalizers, which run as every process ends: through atexit in a process that
exits normally, and also in a worker process of a multiprocessing pool (django-q2's workers, forked), which ends with
os._exit once its target returns, where atexit does not run. It is registered at import and again in every
multiprocessing child (a child's finalizers are cleared after the fork). Celery's prefork children (billiard, with finalizers of its own) call release() from its
worker_process_shutdown signal (clawgym_site.celery). A killed process runs none of these: what it left is taken by
the stale sweeps (volume.remove_stale, the Docker backend's remove_stale) once the next run on the host starts.
"""

from __future__ import annotations

import logging
import multiprocessing.util
from collections.abc import Callable

# Among multiprocessing's exit finalizers (those of priority 0 and up run at exit, the highest first).
_PRIORITY = 100
_callbacks: list[Callable[[], None]] = []


def on_exit(callback: Callable[[], None]) -> None:
    """Run `callback` (idempotent: it may run more than once) when this process ends."""
    _callbacks.append(callback)


def release() -> None:
    """Release what this process keeps, now (the last registered first). Idempotent."""
    for callback in reversed(_callbacks):
        try:
            callback()
        except Exception:  # one failing release does not keep the others
            logging.getLogger("sandbox").exception("could not release %s at exit", callback)


def _register(_owner=None) -> None:
    multiprocessing.util.Finalize(None, release, exitpriority=_PRIORITY)


class _Owner:
    """register_after_fork keeps its callbacks by a weak reference to an object: this module's, for its life."""


_owner = _Owner()
_register()
multiprocessing.util.register_after_fork(_owner, _register)
