"""What /healthz reports: the database, the broker, the workers seen recently per queue, the var folder's free disk.

Each check returns (ok, detail); `report()` puts them together. The checks are cheap: one query, one broker round
trip, one statvfs; the worker lookup (one query) is cached in the process for CLAWGYM_HEALTH_CACHE_SECONDS, so a load
balancer polling every second costs a query every few seconds.
"""

import shutil
import threading
import time

import redis
from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string
from django_q.models import OrmQ

from jobs.workers import seen_by_queue

BROKER_TIMEOUT_SECONDS = 2.0

_workers_cache: tuple[float, dict] | None = None
_workers_lock = threading.Lock()


def check_database() -> tuple[bool, dict]:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return False, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return True, {"vendor": connection.vendor, "ms": round((time.perf_counter() - started) * 1000, 1)}


def check_broker() -> tuple[bool, dict]:
    """django-q2's ORM broker is the database itself (its queue table must answer); Celery's is Redis."""
    started = time.perf_counter()
    engine = settings.CLAWGYM_JOB_ENGINE
    try:
        if engine == "django_q":
            OrmQ.objects.exists()
        else:
            ping_celery_broker(settings.CELERY_BROKER_URL)
    except Exception as exc:
        return False, {"engine": engine, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return True, {"engine": engine, "ms": round((time.perf_counter() - started) * 1000, 1)}


def ping_celery_broker(url: str) -> None:
    if url.startswith(("redis://", "rediss://", "unix://")):
        client = redis.Redis.from_url(
            url, socket_timeout=BROKER_TIMEOUT_SECONDS, socket_connect_timeout=BROKER_TIMEOUT_SECONDS
        )
        try:
            client.ping()
        finally:
            client.close()
        return
    app = import_string(settings.CLAWGYM_CELERY_APP)

    with app.connection_for_write(url=url) as conn:  # another transport: kombu connects (and fails) in ~2 s
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)


def workers_seen() -> dict:
    """{queue: workers seen recently}, cached briefly in this process."""
    global _workers_cache

    with _workers_lock:
        now = time.monotonic()
        if _workers_cache is None or now - _workers_cache[0] >= settings.CLAWGYM_HEALTH_CACHE_SECONDS:
            _workers_cache = (now, seen_by_queue())
        return dict(_workers_cache[1])


def forget_cache() -> None:
    global _workers_cache
    with _workers_lock:
        _workers_cache = None


def check_workers() -> tuple[bool, dict]:
    try:
        seen = workers_seen()
    except Exception as exc:
        return False, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    required = list(settings.CLAWGYM_HEALTH_QUEUES)
    missing = [queue for queue in required if not seen.get(queue)]
    detail = {"seen": seen, "required": required, "within_seconds": settings.CLAWGYM_WORKER_SEEN_SECONDS}
    if missing:
        detail["error"] = f"no worker seen on queue{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    return not missing, detail


def check_disk() -> tuple[bool, dict]:
    try:
        usage = shutil.disk_usage(settings.VAR_DIR)
    except OSError as exc:
        return False, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    free_mb = usage.free // (1024 * 1024)
    detail = {"free_mb": free_mb, "min_free_mb": settings.CLAWGYM_HEALTH_MIN_FREE_MB}
    if free_mb < settings.CLAWGYM_HEALTH_MIN_FREE_MB:
        detail["error"] = "the var folder's disk is nearly full"
    return free_mb >= settings.CLAWGYM_HEALTH_MIN_FREE_MB, detail


CHECKS = {"database": check_database, "broker": check_broker, "workers": check_workers, "disk": check_disk}


def report() -> dict:
    """{"status": "ok"|"unhealthy", "checks": {name: {"ok": …, …}}}."""
    checks = {}
    for name, check in CHECKS.items():
        if name == "workers" and not checks["database"]["ok"]:
            checks[name] = {"ok": False, "error": "the database does not answer"}  # no query to wait on
            continue
        ok, detail = check()
        checks[name] = {"ok": ok, **detail}
    healthy = all(check["ok"] for check in checks.values())
    return {"status": "ok" if healthy else "unhealthy", "checks": checks}
