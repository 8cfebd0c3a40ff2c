"""The job engine facade. `jobs.enqueue(kind, ...)` is the one way to start background work."""


def enqueue(kind: str, *, created_by=None, parent=None, queue: str | None = None, total: int = 0, **params):
    # Imported here, not at the top: Django imports this package while it loads the apps, before models (the
    # engine's JobRun) may be imported.
    from .engine import enqueue as _enqueue

    return _enqueue(kind, created_by=created_by, parent=parent, queue=queue, total=total, **params)
