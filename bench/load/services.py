"""The load bench's own PostgreSQL and Redis, and the processes it starts: never the machine's shared services.

PostgreSQL: `initdb` into a temp folder, `pg_ctl` on a free loopback port (socket in that folder too), trust auth for
the local user `postgres`. initdb refuses to run as root, so as root every pg_ctl runs as the `postgres` system user.
Redis: `redis-server` on a free loopback port with append-only persistence in its own folder (as docker-compose.yml
runs it), so a restart keeps the queued job messages, as a deployment's would.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _tool(name: str) -> str:
    """A PostgreSQL program: on PATH, else Debian's versioned folder (the newest)."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    if not versions:
        raise RuntimeError(f"{name} not found: install PostgreSQL's server package (Debian: postgresql)")
    return str(versions[-1])


class PostgresInstance:
    """`root` must be a folder the postgres user can reach (its parents searchable): a temp folder of its own."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "pgdata"
        self.log = root / "postgres.log"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self.name = "clawgym_load"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = list(args)
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:]}{self.log_tail()}"
            )
        return done

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return "\n--- postgres log:\n" + self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def init(self) -> "PostgresInstance":
        self.root.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            _tool("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"
        )
        # fsync off: an operating-system crash is not one of the faults here; a restart is a clean shutdown, and
        # synchronous_commit stays on, so an acknowledged edit is on disk when its page answers.
        settings = [
            f"port = {self.port}",
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.root}'",
            "fsync = off",
            "full_page_writes = off",
            "max_connections = 200",
            "shared_buffers = 128MB",
        ]
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# clawgym load bench\n" + "\n".join(settings) + "\n")
        return self

    def start(self) -> float:
        """Start it and wait until it takes connections; returns when (time.time())."""
        self._run(_tool("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        return time.time()

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(_tool("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self) -> tuple[float, float]:
        """Stop (fast: open connections are cut, as a failover or an upgrade does) and start again: (down, up)."""
        down = time.time()
        self.stop("fast")
        return down, self.start()

    def create_database(self) -> str:
        self._run(_tool("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", self.name)
        return self.url

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.name}"


class RedisInstance:
    def __init__(self, root: Path):
        self.root = root / "redis"
        self.port = free_port()
        self.log = self.root / "redis.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> float:
        self.root.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server not found: install Debian's redis-server package")
        args = [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.root),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--logfile",
            str(self.log),
            "--protected-mode",
            "yes",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        import redis

        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 30
        while True:
            try:
                if client.ping():
                    # loading the append-only file: PING answers LOADING errors until it is read
                    return time.time()
            except redis.RedisError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer within 30 s: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM: Redis writes its append-only file out and exits, as `docker stop` makes it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> tuple[float, float]:
        down = time.time()
        self.stop()
        return down, self.start()

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class Process:
    """A child process in its own process group, its output in a log file."""

    def __init__(self, name: str, args: list[str], *, env: dict, cwd: Path, log_dir: Path):
        self.name, self.args, self.env, self.cwd = name, args, env, cwd
        self.log = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Process":
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.args, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9 of the process and its children at once, as a crash or an OOM kill of a container would."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15.0, sig=signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()  # what is left of its group

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
