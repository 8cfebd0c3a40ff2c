"""Pytest fixtures that start real job workers, as subprocesses, against the current test database.

Mark tests `@pytest.mark.workers` and `@pytest.mark.django_db(transaction=True)`: the worker is another
process and sees only committed rows (the fixtures ask for a transactional database anyway).

- `django_q_worker`: `manage.py qcluster` (django-q2, ORM broker), one per test module.
- `celery_worker`: `celery -A clawgym_site worker -Q default,sandbox,gpu --pool prefork -c 1`, one per test
  module, on a Redis database this test session holds alone (`celery_broker_url`), so that parallel
  sessions never take each other's messages.
- `use_engine(name)`: switch settings.CLAWGYM_JOB_ENGINE in the test process (a context manager and
  decorator when imported, a switch for the rest of the test when asked for as a fixture).
- `wait_for_job_run(run)`: poll a JobRun until it finishes (or reaches given statuses), bounded.
- Each test session has a scratch root of its own (CLAWGYM_SCRATCH_DIR with "-test-<pid>"), for this process and the
  workers it starts: sessions on one machine have test databases of their own, so their rollouts share ids, and one
  session's rollout #1 must not find another's workspace folders.

Both worker fixtures switch the test process to their engine for the test, and yield a WorkerProcess.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import override_settings

from .job_kinds import PING_JOB

BASE_DIR = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 60  # cold start of Django + the worker on a busy CI machine
REDIS_URL = os.environ.get("CLAWGYM_TEST_REDIS_URL", "redis://127.0.0.1:6379")
REDIS_LOCK_KEY = "clawgym:test-session"
REDIS_LOCK_SECONDS = 6 * 3600  # a crashed session's database is free again after this

_live_workers: list["WorkerProcess"] = []  # their logs go into wait_for_job_run's failure message


def pytest_configure(config):
    # Not setdefault: an xdist worker inherits the controller's environment, and must have a root of its own too.
    root = f"{settings.CLAWGYM_SCRATCH_DIR}-test-{os.getpid()}"
    os.environ["CLAWGYM_SCRATCH_DIR"] = root
    settings.CLAWGYM_SCRATCH_DIR = Path(root)


def pytest_unconfigure(config):
    from .scratch import remove_tree

    remove_tree(Path(settings.CLAWGYM_SCRATCH_DIR))


def use_engine(name: str) -> override_settings:
    """`with use_engine("celery"): ...` (or as a decorator) runs the block with that job engine."""
    from .engine import ENGINES

    if name not in ENGINES:
        raise ValueError(f"unknown job engine {name!r}; choose one of {sorted(ENGINES)}")
    return override_settings(CLAWGYM_JOB_ENGINE=name)


@pytest.fixture(name="use_engine")
def use_engine_fixture(settings):
    """`use_engine("celery")` inside a test switches the engine until the test ends."""

    def switch(name: str) -> None:
        from .engine import ENGINES

        if name not in ENGINES:
            raise ValueError(f"unknown job engine {name!r}; choose one of {sorted(ENGINES)}")
        settings.CLAWGYM_JOB_ENGINE = name

    return switch


def wait_for_job_run(run, *, timeout: float = 20.0, statuses=None):
    """Refresh `run` until its status is in `statuses` (default: finished); fail the test after `timeout` s."""
    from .models import JobRun

    wanted = set(statuses or JobRun.FINISHED)
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        if run.status in wanted:
            return run
        if time.monotonic() > deadline:
            workers = "".join(f"\n--- {w.name} worker {w.pid} log:\n{w.log_tail(3000)}" for w in _live_workers)
            raise AssertionError(
                f"job run #{run.pk} ({run.kind}) is {run.status} after {timeout} s, expected one of {sorted(wanted)}; "
                f"progress {run.progress_done}/{run.progress_total}, log:\n{run.log_tail}{workers}"
            )
        time.sleep(0.1)


def database_url() -> str:
    """The URL of the database the test process uses now (the test database), for a worker subprocess."""
    from django.db import connection

    db = connection.settings_dict
    engine = db["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        if not name or name == ":memory:" or name.startswith("file:"):
            raise RuntimeError("worker tests need the SQLite test database in a file, not in memory")
        return f"sqlite:///{Path(name).resolve()}"
    if engine == "django.db.backends.postgresql":
        user = quote(db.get("USER") or "", safe="")
        password = quote(db.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = db.get("HOST") or "127.0.0.1"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(db['NAME'], safe='')}"
    raise RuntimeError(f"worker tests do not support the database engine {engine}")


class WorkerProcess:
    """A worker subprocess in its own process group, its output in a log file (read on failure)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]):
        self.name, self.args, self.env = name, args, env
        fd, path = tempfile.mkstemp(prefix=f"clawgym-{name}-", suffix=".log")
        os.close(fd)
        self.log_path = Path(path)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "WorkerProcess":
        try:
            with open(self.log_path, "ab") as out:
                self.proc = subprocess.Popen(
                    self.args, cwd=BASE_DIR, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
        except BaseException:
            self.cleanup()
            raise
        _live_workers.append(self)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal_group(self, sig) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the worker and its children: one group (start_new_session)
        except ProcessLookupError:
            pass

    def _group_members(self) -> list[int]:
        """The processes of the worker's group that have not exited yet (a zombie has: it only awaits its reaping)."""
        from .runner import process_stat

        members = []
        for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
            fields = process_stat(pid)
            if fields and int(fields[2]) == self.proc.pid and fields[0] not in ("Z", "X"):
                members.append(pid)
        return members

    def kill(self) -> None:
        """kill -9 the worker and its children at once, as a crash would, and return once every one of them has
        exited: a killed process takes a moment to die (the worker's children are not this process's to wait for),
        and until then its rollouts are rightly not taken for lost."""
        self._signal_group(signal.SIGKILL)
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (left := self._group_members()) and time.monotonic() < deadline:
            time.sleep(0.01)
        if left:
            raise RuntimeError(f"{self.name}: processes {left} outlived kill -9 by 10 s")

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the worker to shut down; kill what is left after `timeout` seconds."""
        if self.proc is None:
            return
        # Only the main process: it stops its children itself (qcluster hangs when they all get SIGTERM).
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self._signal_group(signal.SIGKILL)  # also children that outlived their parent
        self.proc.wait(timeout=10)
        if self in _live_workers:
            _live_workers.remove(self)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        self.log_path.unlink(missing_ok=True)

    def wait_ready(
        self, engine: str, broker_url: str | None = None, queue: str = "default", timeout: float = READY_TIMEOUT
    ) -> None:
        """Block until this worker has run a ping job; raise with the worker's log if it does not."""
        from . import enqueue
        from .models import JobRun

        overrides = {"CLAWGYM_JOB_ENGINE": engine}
        if broker_url:
            overrides["CELERY_BROKER_URL"] = broker_url
        with override_settings(**overrides):
            run = enqueue(PING_JOB, queue=queue, steps=1)
        deadline = time.monotonic() + timeout
        try:
            while run.status not in JobRun.FINISHED:
                if not self.alive():
                    raise RuntimeError(f"the {self.name} worker exited ({self.proc.returncode}):\n{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {self.name} worker ran no ping within {timeout} s:\n{self.log_tail()}")
                time.sleep(0.1)
                run.refresh_from_db()
            if run.status != JobRun.Status.SUCCEEDED:
                raise RuntimeError(f"the {self.name} worker's ping ended {run.status}: {run.error}")
        finally:
            run.delete()  # tests count their own runs


def _worker_env(engine: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        # Not settings.SETTINGS_MODULE: inside override_settings it is None.
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "clawgym_site.settings"),
        "DATABASE_URL": database_url(),
        "CLAWGYM_JOB_ENGINE": engine,
        "CLAWGYM_JOB_STALE_SECONDS": str(settings.CLAWGYM_JOB_STALE_SECONDS),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def start_django_q_worker(
    workers: int = 1, *, proxy_url: str | None = None, env: dict[str, str] | None = None
) -> WorkerProcess:
    """Start `manage.py qcluster` on the test database and wait until it runs jobs.

    proxy_url: where its rollouts reach the recording proxy (CLAWGYM_PROXY_PUBLIC_URL), e.g. the test process's
    live ASGI server. env: more variables for the worker's environment only (this process's is left as it is)."""
    extra = {**(env or {}), "CLAWGYM_Q_WORKERS": str(workers)}
    if proxy_url is not None:
        extra["CLAWGYM_PROXY_PUBLIC_URL"] = proxy_url
    worker = WorkerProcess(
        "django-q", [sys.executable, "manage.py", "qcluster"], _worker_env("django_q", **extra)
    ).start()
    try:
        worker.wait_ready("django_q")
    except BaseException:
        worker.stop()
        worker.cleanup()  # the error carries the log's tail
        raise
    return worker


_celery_workers_started = 0


def start_celery_worker(broker_url: str, *, queues: str = "default,sandbox,gpu", wait: bool = True) -> WorkerProcess:
    """Start a Celery worker on `queues` against the test database and `broker_url`.

    With `wait`, block until it has run a ping (on the first of its queues).
    """
    global _celery_workers_started
    _celery_workers_started += 1
    node = f"clawgym-test-{os.getpid()}-{_celery_workers_started}@{socket.gethostname()}"
    args = [sys.executable, "-m", "celery", "-A", "clawgym_site", "worker", "-Q", queues]
    # No gossip/mingle/heartbeat: they only slow the start-up of a lone test worker.
    args += ["--pool", "prefork", "-c", "1", "-n", node, "--loglevel", "INFO"]
    args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    worker = WorkerProcess("celery", args, _worker_env("celery", CELERY_BROKER_URL=broker_url)).start()
    if wait:
        try:
            worker.wait_ready("celery", broker_url, queue=queues.split(",")[0])
        except BaseException:
            worker.stop()
            worker.cleanup()  # the error carries the log's tail
            raise
    return worker


@pytest.fixture(scope="session")
def celery_broker_url():
    """A Redis database (1-15) this session holds alone, emptied before and after; yields its URL."""
    import redis

    token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    for number in range(1, 16):
        url = f"{REDIS_URL}/{number}"
        client = redis.Redis.from_url(url)
        try:
            claimed = client.set(REDIS_LOCK_KEY, token, nx=True, ex=REDIS_LOCK_SECONDS)
        except redis.ConnectionError as exc:
            raise RuntimeError(f"Celery worker tests need Redis at {REDIS_URL}: {exc}") from exc
        if not claimed:
            client.close()
            continue
        _empty_but_lock(client)
        try:
            yield url
        finally:
            client.flushdb()
            client.close()
        return
    raise RuntimeError(f"every Redis database 1-15 at {REDIS_URL} is held by another test session")


def _empty_but_lock(client) -> None:
    for key in client.scan_iter(count=500):
        if key != REDIS_LOCK_KEY.encode():
            client.delete(key)


@pytest.fixture(scope="module")
def django_q_worker_process(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        worker = start_django_q_worker()
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture(scope="module")
def proxied_django_q_worker_process(_live_server_asgi_module, django_db_setup, django_db_blocker):
    """A django-q cluster (one worker process) whose rollouts reach the proxy of this test process: the live ASGI
    server of llm.testing."""
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=1, proxy_url=_live_server_asgi_module.url)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture(scope="module")
def celery_worker_process(django_db_setup, django_db_blocker, celery_broker_url):
    with django_db_blocker.unblock():
        worker = start_celery_worker(celery_broker_url)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def django_q_worker(django_q_worker_process, transactional_db):
    """A running django-q2 cluster on the test database; the test process enqueues on django_q."""
    if not django_q_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{django_q_worker_process.log_tail()}")
    with use_engine("django_q"):
        yield django_q_worker_process


@pytest.fixture
def proxied_django_q_worker(proxied_django_q_worker_process, live_server_asgi):
    """proxied_django_q_worker_process, alive, with the test process enqueueing on django_q."""
    if not proxied_django_q_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{proxied_django_q_worker_process.log_tail()}")
    with use_engine("django_q"):
        yield proxied_django_q_worker_process


@pytest.fixture
def celery_worker(celery_worker_process, celery_broker_url, transactional_db):
    """A running Celery worker (queues default, sandbox, gpu); the test process enqueues on celery."""
    if not celery_worker_process.alive():
        pytest.fail(f"the Celery worker died:\n{celery_worker_process.log_tail()}")
    with override_settings(CLAWGYM_JOB_ENGINE="celery", CELERY_BROKER_URL=celery_broker_url):
        yield celery_worker_process


def run_now(kind: str):
    """Tick the periodic job `kind`, then run the queued run here as a worker would; the finished JobRun.

    (Imports inside: pytest loads this plugin before Django's apps are ready, as the fixtures above do.)"""
    from . import periodic
    from .models import JobRun
    from .runner import execute

    pk = periodic.tick(kind)
    assert execute(pk) == JobRun.Status.SUCCEEDED, JobRun.objects.get(pk=pk).error
    return JobRun.objects.get(pk=pk)
