"""Job kinds. Each app registers its background entry points in `<app>/jobs.py`:

    @job("tasks.import_archive", queue="default")
    def import_archive(ctx: JobContext, *, upload_path: str, fmt: str | None = None): ...

A job function receives a JobContext and the JSON parameters given to `jobs.enqueue`. A job over many items that
carries on past the ones that fail tells its run how many of how many failed (`ctx.items_failed(n, of=total)`): the
run then shows as completed with failures, or as failed when every item did. `report` names a template that shows the
run's result to people (job page, progress); `subject(params) -> (text, url)` says what a run is about
("count-orders r2"), stored on the run when it is queued, so that a list of many runs of one kind tells them apart.
"""

from collections.abc import Callable
from dataclasses import dataclass

QUEUES = ("default", "sandbox", "gpu")


@dataclass(frozen=True)
class JobSpec:
    kind: str
    func: Callable
    queue: str
    title: str
    report: str = ""  # a template showing the run's result to people; it gets `run` and `report` (the result)
    # What the run is about, from its params, as (text, url or ""): "fruit-summary r3", shown in job lists.
    subject: Callable[[dict], tuple[str, str]] | None = None


_REGISTRY: dict[str, JobSpec] = {}


class UnknownJobKind(LookupError):
    pass


def job(kind: str, *, queue: str = "default", title: str = "", report: str = "", subject=None):
    if queue not in QUEUES:
        raise ValueError(f"job {kind!r}: unknown queue {queue!r}; choose one of {QUEUES}")

    def decorator(func):
        existing = _REGISTRY.get(kind)
        if existing and existing.func is not func and existing.func.__qualname__ != func.__qualname__:
            raise ValueError(f"job kind {kind!r} is registered twice")
        _REGISTRY[kind] = JobSpec(
            kind=kind, func=func, queue=queue, title=title or kind, report=report, subject=subject
        )
        return func

    return decorator


def get(kind: str) -> JobSpec:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise UnknownJobKind(f"no job kind {kind!r} is registered (known: {', '.join(sorted(_REGISTRY))})") from None


def kinds() -> list[str]:
    return sorted(_REGISTRY)
