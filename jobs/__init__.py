"""The job engine facade. `jobs.enqueue(kind, ...)` is the one way to start background work."""


def enqueue(kind: str, *, created_by=None, parent=None, queue: str | None = None, total: int = 0, **params):
    from .engine import enqueue as _enqueue

    return _enqueue(kind, created_by=created_by, parent=parent, queue=queue, total=total, **params)
