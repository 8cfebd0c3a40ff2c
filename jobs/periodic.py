"""Periodic jobs: the housekeeping that runs off the request path, on a schedule, as ordinary jobs.

One table, PERIODIC, says which registered job kinds run and how often; both engines' schedulers come from it:

- django-q2 (embedded default): `manage.py schedule_periodic` writes one django-q Schedule per entry (named
  "clawgym:<kind>"), fired by the cluster's own scheduler (it looks every 30 s; intervals are whole minutes there).
  scripts/run.sh runs the command before it starts the cluster.
- Celery (deployment): clawgym_site.celery builds its `beat_schedule` from the table (`beat_schedule()`); one
  `celery -A clawgym_site beat` process sends the ticks, a `default` worker takes them.

Either way a tick calls `tick(kind)`, which queues the job with `jobs.enqueue`, so every run is a JobRun on the jobs
page with its log and result, on the job's own queue (idle model servers are stopped by a `gpu` worker, on the host
that started them). A tick queues nothing while a run of its kind is still queued or running, so ticks never pile up
behind a busy or missing worker; a run left queued for SUPERSEDE_AFTER_TICKS intervals (its message lost with a
broker) is cancelled and replaced. Of each kind only the newest KEEP_FINISHED finished runs are kept.

Intervals are the table's, unless CLAWGYM_PERIODIC_SECONDS (a JSON object, kind → seconds) says otherwise; 0 turns
an entry off.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.checks import Error
from django.utils import timezone

from . import enqueue, registry
from .job_kinds import RECOVER_LOST_JOB

# Models (JobRun, django-q's Schedule) and what imports them are imported inside the functions below:
# clawgym_site.celery imports this module before Django's apps are loaded.

SCHEDULE_PREFIX = "clawgym:"
KEEP_FINISHED = 100
SUPERSEDE_AFTER_TICKS = 6
CELERY_TICK_TASK = "clawgym.periodic_tick"


@dataclass(frozen=True)
class Periodic:
    kind: str  # a job kind registered with jobs.registry.job
    every: int  # seconds between ticks, unless CLAWGYM_PERIODIC_SECONDS overrides it
    what: str  # what it does, for people (the jobs page)


PERIODIC = (
    Periodic("review.expire_claims", 300, "Hands back review claims that ran out (the queue pages also do on read)."),
    Periodic(
        RECOVER_LOST_JOB,
        300,
        "Queues again, or fails, the runs of workers that died; hands held batch jobs over; forgets workers gone.",
    ),
    Periodic(
        "evaluation.top_up_runs", 120, "Gives queued rollouts of running evaluation runs a job where there is room."
    ),
    Periodic("training.stop_idle_servers", 600, "Stops checkpoint servers with no model call for a while (gpu)."),
    Periodic("llm.close_stale_sessions", 900, "Closes proxy sessions past their expiry that nobody closed."),
    Periodic("studies.advance_running", 60, "Moves running studies on (training runs and served checkpoints)."),
)


class UnknownPeriodicJob(LookupError):
    pass


def get(kind: str) -> Periodic:
    for entry in PERIODIC:
        if entry.kind == kind:
            return entry
    raise UnknownPeriodicJob(f"{kind!r} is not a periodic job (known: {', '.join(e.kind for e in PERIODIC)})")


def every(entry: Periodic) -> int:
    """Seconds between its ticks; 0 when it is turned off."""
    overrides = settings.CLAWGYM_PERIODIC_SECONDS
    seconds = overrides.get(entry.kind, entry.every)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
        raise ValueError(
            f"CLAWGYM_PERIODIC_SECONDS[{entry.kind!r}] must be a whole number of seconds ≥ 0, got {seconds!r}"
        )
    return seconds


def enabled() -> list[tuple[Periodic, int]]:
    """The entries that run, with their interval. Fails loudly on an override naming no entry (a typo)."""
    if not isinstance(settings.CLAWGYM_PERIODIC_SECONDS, dict):
        raise ValueError("CLAWGYM_PERIODIC_SECONDS must be a JSON object of job kind → seconds")
    unknown = set(settings.CLAWGYM_PERIODIC_SECONDS) - {e.kind for e in PERIODIC}
    if unknown:
        raise ValueError(f"CLAWGYM_PERIODIC_SECONDS names no periodic job: {', '.join(sorted(unknown))}")
    return [(entry, every(entry)) for entry in PERIODIC if every(entry)]


def tick(kind: str) -> int | None:
    """Queue a run of the periodic job `kind`, unless one is still queued or running. The new run's id, or None.

    What both schedulers call (django-q's Schedule and Celery beat's task).
    """
    # Imported here: clawgym_site.celery imports this module before Django's apps are loaded.
    from .models import JobRun
    from .services import cancel_job

    entry = get(kind)
    active = JobRun.objects.filter(kind=kind, status__in=JobRun.ACTIVE).order_by("-id").first()
    if active is not None:
        seconds = every(entry) or entry.every
        lost = active.status == JobRun.Status.QUEUED and (
            active.created_at < timezone.now() - timedelta(seconds=SUPERSEDE_AFTER_TICKS * seconds)
        )
        if not lost:
            return None
        cancel_job(active, user=None)  # its message is gone (a broker lost it), or no worker takes its queue
    run = enqueue(kind)
    _prune(kind)
    return run.pk


def _prune(kind: str) -> int:
    """Keep the newest KEEP_FINISHED finished runs of a periodic kind: a tick every 5 minutes is 288 runs a day."""
    from .models import JobRun

    finished = JobRun.objects.filter(kind=kind, status__in=JobRun.FINISHED, parent=None)
    beyond = list(finished.order_by("-id").values_list("id", flat=True)[KEEP_FINISHED : KEEP_FINISHED + 1])
    if not beyond:
        return 0
    return finished.filter(id__lte=beyond[0]).delete()[0]


def beat_schedule() -> dict:
    """Celery beat's schedule, from the table: one entry per enabled job, sent to the `default` queue."""
    return {
        f"{SCHEDULE_PREFIX}{entry.kind}": {
            "task": CELERY_TICK_TASK,
            "schedule": timedelta(seconds=seconds),
            "args": (entry.kind,),
            "options": {"queue": "default", "expires": seconds},  # a tick nobody took in time is dropped
        }
        for entry, seconds in enabled()
    }


def django_q_minutes(seconds: int) -> int:
    """django-q2 schedules count whole minutes."""
    return max(1, round(seconds / 60))


def sync_django_q_schedules() -> dict:
    """Make the django-q Schedule rows match the table: create, update intervals, delete ours that left it.

    A schedule that exists keeps its next run (a restart does not postpone it). Returns {"created", "updated",
    "deleted", "unchanged"} lists of kinds.
    """
    from django_q.models import Schedule

    done = {"created": [], "updated": [], "deleted": [], "unchanged": []}
    wanted = {}
    for entry, seconds in enabled():
        wanted[f"{SCHEDULE_PREFIX}{entry.kind}"] = (entry, django_q_minutes(seconds))
    for name, (entry, minutes) in wanted.items():
        fields = {
            "func": "jobs.periodic.tick",
            "args": repr(entry.kind),
            "schedule_type": Schedule.MINUTES,
            "minutes": minutes,
            "repeats": -1,
        }
        schedule = Schedule.objects.filter(name=name).first()
        if schedule is None:
            Schedule.objects.create(name=name, next_run=timezone.now(), **fields)
            done["created"].append(entry.kind)
        elif any(getattr(schedule, key) != value for key, value in fields.items()):
            Schedule.objects.filter(pk=schedule.pk).update(**fields)
            done["updated"].append(entry.kind)
        else:
            done["unchanged"].append(entry.kind)
    for name in Schedule.objects.filter(name__startswith=SCHEDULE_PREFIX).values_list("name", flat=True):
        if name not in wanted:
            Schedule.objects.filter(name=name).delete()
            done["deleted"].append(name.removeprefix(SCHEDULE_PREFIX))
    return done


@dataclass
class PeriodicStatus:
    """One periodic job as the jobs page shows it."""

    entry: Periodic
    every: int
    title: str
    last_run: object  # the newest JobRun of its kind, or None
    last_finished: object  # the newest finished one (its result), or None
    next_run: object  # a datetime, or None when not scheduled
    next_is_estimate: bool  # Celery beat keeps its state on its own host: next = last tick + interval
    scheduled: bool


def statuses(engine: str | None = None) -> list[PeriodicStatus]:
    """Every entry of the table (also those turned off), with its last run, last result and next run."""
    from django_q.models import Schedule

    from .models import JobRun

    engine = engine or settings.CLAWGYM_JOB_ENGINE
    schedules = {}
    if engine == "django_q":
        schedules = dict(Schedule.objects.filter(name__startswith=SCHEDULE_PREFIX).values_list("name", "next_run"))
    rows = []
    for entry in PERIODIC:
        seconds = every(entry)
        runs = JobRun.objects.filter(kind=entry.kind)
        last = runs.order_by("-id").first()
        last_finished = runs.filter(status__in=JobRun.FINISHED).order_by("-id").first()
        try:
            title = registry.get(entry.kind).title
        except registry.UnknownJobKind:
            title = entry.kind
        if engine == "django_q":
            next_run = schedules.get(f"{SCHEDULE_PREFIX}{entry.kind}")
            scheduled, estimate = next_run is not None, False
        else:
            scheduled, estimate = bool(seconds), True
            next_run = last.created_at + timedelta(seconds=seconds) if last and seconds else None
        rows.append(PeriodicStatus(entry, seconds, title, last, last_finished, next_run, estimate, scheduled))
    return rows


def check_table(app_configs=None, **kwargs):
    """System check (registered by jobs.apps): every entry names a registered job, and the overrides are sound."""
    errors = []
    for entry in PERIODIC:
        if entry.kind not in registry.kinds():
            errors.append(Error(f"periodic job {entry.kind!r} is not a registered job kind", id="jobs.E001"))
    try:
        enabled()
    except ValueError as exc:
        errors.append(Error(str(exc), id="jobs.E002"))
    return errors
