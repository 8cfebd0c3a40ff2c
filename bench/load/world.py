"""What the load bench puts in its database, how it watches the app come back, and what it checks at the end.

Runs in the bench's own process once Django is set up on the bench's PostgreSQL (never a test database: the
instance is the bench's own and is thrown away).
"""

import dataclasses
import time

import httpx
from django.db import InterfaceError, OperationalError, connection

AGENT_MODEL = "load-agent"
ROLLOUT_MODEL = "load-rollout"
CANDIDATES_PER_REVIEWER = 3
ROLLOUT_TASKS = 4


def db_call(fn, *args, tries: int = 120, **kwargs):
    """fn(*args) on the bench's own connection, which a PostgreSQL restart cuts: reconnect and retry (bounded)."""
    for attempt in range(tries):
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            connection.close()
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


# --- the database ------------------------------------------------------------------------------------------------


def seed(*, reviewers: int, agents: int, queue_candidates: int, upstream_url: str, cookie_name: str) -> dict:
    """Users, the review queue, the reviewers' own candidates, the rollouts' tasks, the endpoints and the agents'
    recording sessions. Returns what the children need."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from review_bench import build_queue, queue_urls  # bench/ helpers: the queue in use, and its URLs

    from accounts.roles import REVIEWER, grant_role
    from benchmarks.models import Benchmark
    from evaluation.testing import fruit_package
    from llm.services import create_endpoint, open_proxy_session, proxy_base_url
    from review.models import BenchmarkCandidate
    from tasks.services import save_package

    users = get_user_model().objects
    people = [users.create_user(f"load-reviewer-{n:02d}") for n in range(reviewers + 1)]  # the last one: the probe
    for person in people:
        grant_role(person, REVIEWER)
    began = time.perf_counter()
    built = build_queue(queue_candidates, people[0], people[-1])
    main = Benchmark.objects.get(name="bench-main")
    own = []
    for n in range(reviewers * CANDIDATES_PER_REVIEWER):
        package = fruit_package(f"load-review-{n:03d}")
        task = save_package(dataclasses.replace(package, instruction=f"{package.instruction} (task {n})")).task
        own.append(BenchmarkCandidate.objects.create(task=task, benchmark=main, status="awaiting_review").pk)
    rollout_revisions = [save_package(fruit_package(f"load-rollout-{n}")).revision for n in range(ROLLOUT_TASKS)]

    def session_of(user) -> str:
        client = Client()
        client.force_login(user)
        return client.cookies[cookie_name].value

    agent_endpoint = create_endpoint(
        "load-agents",
        base_url=upstream_url,
        model=AGENT_MODEL,
        max_concurrent=1000,
        roles=["agent"],
        timeout_seconds=60,
    )
    rollout_endpoint = create_endpoint(
        "load-rollouts",
        base_url=upstream_url,
        model=ROLLOUT_MODEL,
        max_concurrent=1000,
        roles=["agent"],
        timeout_seconds=30,
    )
    sessions = [proxy_base_url(open_proxy_session(agent_endpoint, subject=f"load-agent:{n}")) for n in range(agents)]
    return {
        "reviewers": [
            {
                "name": p.username,
                "session": session_of(p),
                "candidates": own[i * CANDIDATES_PER_REVIEWER : (i + 1) * CANDIDATES_PER_REVIEWER],
            }
            for i, p in enumerate(people[:-1])
        ],
        "probe_session": session_of(people[-1]),
        "queue_urls": sorted({url for url, _ in queue_urls()}),
        "sessions": sessions,
        "rollout_revisions": rollout_revisions,
        "rollout_endpoint": rollout_endpoint,
        "queue": {**built, "own_candidates": len(own), "seconds": round(time.perf_counter() - began, 1)},
    }


def start_rollouts(revisions: list, endpoint, count: int) -> list[int]:
    from evaluation.services.rollouts import start_rollouts as start

    ids = []
    for i in range(count):
        ids += [r.pk for r in start(revisions[i % len(revisions)], endpoint, harness="builtin", user=None)]
    return ids


def queue_pings(count: int) -> list[int]:
    import jobs

    return [jobs.enqueue("jobs.ping", queue="default", steps=1, sleep=0.05).pk for _ in range(count)]


def rollouts_in(status: str) -> list[int]:
    from evaluation.models import Rollout

    return list(Rollout.objects.filter(status=status).values_list("pk", flat=True))


# --- watching the app come back ------------------------------------------------------------------------------------


def wait_page(base: str, cookie: tuple[str, str], since: float, timeout: float) -> float | None:
    """Seconds from `since` until the review queue answers 200 again (polled every 0.2 s); None if not in time.
    Each try may take as long as the aim allows: a page slow under load is slow, not down."""
    deadline = time.time() + timeout
    with httpx.Client(base_url=base, cookies=dict([cookie]), timeout=30) as client:
        while time.time() < deadline:
            try:
                if client.get("/review/").status_code == 200:
                    return round(time.time() - since, 2)
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    return None


def wait_enqueue(since: float, timeout: float) -> tuple[float | None, float | None]:
    """(seconds until a job is accepted again, seconds until it has run) from `since`, a ping on `default`."""
    import jobs
    from jobs.engine import JobEngineError
    from jobs.models import JobRun

    deadline = time.time() + timeout
    accepted = ran = None
    run = None
    while time.time() < deadline and run is None:
        try:
            run = jobs.enqueue("jobs.ping", queue="default", steps=1)
            accepted = round(time.time() - since, 2)
        except JobEngineError:
            time.sleep(0.2)
        except (OperationalError, InterfaceError):
            connection.close()
            time.sleep(0.2)
    while run is not None and time.time() < deadline:
        run = db_call(JobRun.objects.get, pk=run.pk)
        if run.status == JobRun.Status.SUCCEEDED:
            ran = round(time.time() - since, 2)
            break
        time.sleep(0.2)
    return accepted, ran


def wait_rollouts_left_running(ids: list[int], since: float, timeout: float) -> float | None:
    """Seconds from `since` until none of `ids` is running any more (the killed worker's rollouts ended)."""
    from evaluation.models import Rollout

    deadline = time.time() + timeout
    while time.time() < deadline:
        if not db_call(lambda: Rollout.objects.filter(pk__in=ids, status=Rollout.Status.RUNNING).exists()):
            return round(time.time() - since, 2)
        time.sleep(0.3)
    return None


def describe_rollouts(ids: list[int]) -> list[dict]:
    """Where rollouts still running stand, for a report whose recovery did not come in time."""
    from evaluation.models import Rollout

    rows = Rollout.objects.filter(pk__in=ids, status=Rollout.Status.RUNNING).select_related("job_run")
    return [
        {
            "rollout": r.pk,
            "worker": r.worker,
            "job_run": r.job_run_id,
            "job_status": r.job_run.status if r.job_run else None,
            "job_worker": r.job_run.worker if r.job_run else None,
            "job_log": (r.job_run.log_tail[-400:] if r.job_run else ""),
        }
        for r in rows
    ]


def wait_running_rollout(revisions, endpoint, timeout: float = 60) -> list[int]:
    """Rollouts running now: queue two more when none is queued or running, then wait until one runs."""
    from evaluation.models import Rollout
    from jobs.runner import redeliver_unclaimed

    active = Rollout.objects.filter(status__in=[Rollout.Status.QUEUED, Rollout.Status.RUNNING])
    if not db_call(active.exists):
        db_call(start_rollouts, revisions, endpoint, 2)
    deadline = time.time() + timeout
    while time.time() < deadline:
        running = db_call(rollouts_in, Rollout.Status.RUNNING)
        if running:
            return running
        # As the periodic recovery does: a rollout whose delivery a Redis restart cut waits for no one otherwise.
        db_call(redeliver_unclaimed)
        time.sleep(0.2)
    return []


# --- the end: everything accounted for -------------------------------------------------------------------------------


def settle(timeout: float, stale_seconds: int) -> dict:
    """Wait until no job run or rollout is queued or running, sweeping lost ones as the periodic jobs do
    (jobs.runner.reap_stale: dead workers' runs; evaluation.services.rollouts.fail_lost_rollouts). Returns what was
    swept."""
    from evaluation.models import Rollout
    from evaluation.services.rollouts import fail_lost_rollouts
    from jobs.models import JobRun
    from jobs.runner import reap_stale, redeliver_unclaimed

    swept = {"job_runs": 0, "rollouts": 0, "redelivered": 0}
    deadline = time.time() + timeout
    unfinished = [JobRun.Status.QUEUED, JobRun.Status.RUNNING]
    while time.time() < deadline:
        swept["job_runs"] += db_call(reap_stale)
        swept["redelivered"] += len(db_call(redeliver_unclaimed))
        swept["rollouts"] += len(db_call(fail_lost_rollouts))
        runs = db_call(lambda: JobRun.objects.filter(status__in=unfinished).count())
        rollouts = db_call(
            lambda: Rollout.objects.filter(status__in=[Rollout.Status.QUEUED, Rollout.Status.RUNNING]).count()
        )
        if not runs and not rollouts:
            break
        time.sleep(min(2.0, stale_seconds / 4))
    return swept


def retry_failed() -> list[int]:
    """A retry of every failed rollout (the explicit, new attempt an operator or an evaluation run starts)."""
    from evaluation.models import Rollout
    from evaluation.services.rollouts import retry_rollout

    failed = list(Rollout.objects.filter(status=Rollout.Status.FAILED))
    for rollout in failed:
        retry_rollout(rollout, user=None)
    return [r.pk for r in failed]


def accounting(acknowledged: list[dict]) -> dict:
    """Every job run and rollout ended, and every edit the site acknowledged is in the catalog, once."""
    from django.db.models import Count

    from evaluation.models import Rollout
    from jobs.models import JobRun
    from review.models import ReviewDecision
    from tasks.models import TaskRevision

    runs = dict(JobRun.objects.values_list("status").annotate(n=Count("id")).order_by())
    by_kind = {}
    for kind, status, n in JobRun.objects.values_list("kind", "status").annotate(n=Count("id")).order_by():
        by_kind.setdefault(kind, {})[status] = n
    rollouts = dict(Rollout.objects.values_list("status").annotate(n=Count("id")).order_by())
    markers = [e["edit"] for e in acknowledged]
    revisions = {}
    for message in TaskRevision.objects.filter(message__startswith="review: edit the instruction: lb-").values_list(
        "message", flat=True
    ):
        marker = message.rsplit(": ", 1)[-1]
        revisions[marker] = revisions.get(marker, 0) + 1
    fixes = ReviewDecision.objects.filter(reason__startswith="review: edit the instruction: lb-").count()
    lost = [m for m in markers if revisions.get(m, 0) == 0]
    twice = [m for m, n in revisions.items() if n > 1]
    worker_lost = Rollout.objects.filter(previous_attempts__contains=[{"exit_reason": "worker_lost"}]).count()
    return {
        "job_runs": runs,
        "job_runs_by_kind": by_kind,
        "job_runs_unfinished": sum(n for s, n in runs.items() if s in ("queued", "running")),
        # where the first few unfinished runs stand, so that a report that missed says which and why
        "job_runs_unfinished_examples": [
            {"job_run": pk, "kind": kind, "status": status, "worker": worker, "log": log[-300:]}
            for pk, kind, status, worker, log in JobRun.objects.filter(
                status__in=[JobRun.Status.QUEUED, JobRun.Status.RUNNING]
            ).values_list("pk", "kind", "status", "worker", "log_tail")[:5]
        ],
        "rollouts": rollouts,
        "rollouts_unfinished": sum(n for s, n in rollouts.items() if s in ("queued", "running")),
        "rollouts_retried_after_worker_lost": worker_lost,
        "edits_acknowledged": len(markers),
        "edits_saved": sum(revisions.values()),
        "edits_lost": len(lost),
        "edits_lost_examples": lost[:5],
        "edits_saved_twice": len(twice),
        "fix_decisions": fixes,
    }
