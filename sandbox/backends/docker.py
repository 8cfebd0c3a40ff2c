"""docker: one throw-away container per command, through the Docker SDK, for hosts that run a Docker engine.

What the command finds: the image clawgym/sandbox:<runtime version> (scripts/images/sandbox.sh, `make images`), which
is the sandbox runtime folder the bubblewrap backend mounts, cut to what bubblewrap shows of it, plus the OpenClaw
harness at /opt/node and /opt/openclaw. So both backends run the same runtime, and results name it the same way
(ExecResult.runtime is the image's clawgym.runtime label). Without the image `run` raises SandboxUnavailable.

The container has no network at all (network_mode "none": only loopback, so the host's services, the outside and DNS
are unreachable; a caller gives it a route by binding a Unix socket in, as rollouts do for the proxy), a read-only
root filesystem, no capabilities, no-new-privileges, and runs as an unprivileged uid (nobody when the caller is root,
the caller's own uid otherwise). How each limit is enforced:
- memory and processes in total: the container's cgroup (memory and memory+swap at the same value, pids.max). An
  OOM kill in it, of any of its processes, is status "oom": Docker's State.OOMKilled, set from the cgroup's OOM
  event, never guessed from stderr.
- CPU: RLIMIT_CPU per process (SIGXCPU, then SIGKILL a second later: status "timeout"), and, when the backend is
  made with cpus=N, a CFS quota of N cores for the container as a whole.
- wall clock and output caps: this process; on either, the container is killed. Its PID 1 is Docker's init, so
  when the command ends or is killed, every process it left (daemons included) goes with the PID namespace; the
  container is removed whatever happens.
- file size, open files, address space where asked: ulimits. /tmp, /root and /dev/shm: tmpfs of tmpfs_bytes.
- disk: as in bubblewrap, the workspace is a size-limited filesystem for the run (sandbox.backends.volume), bound
  into the container; where that cannot be made (not root), the folder itself is bound and disk_bytes is listed in
  ExecResult.unenforced.
Output is read from the container's attach stream, never stored by the engine (logging driver "none").

Where the workspace is size-limited (root), a run takes a ready container instead (sandbox.backends.docker_pool):
created and started ahead with the same options, its workspace mounted in once the run is asked for, the command
sent to its shell, which execs it as Docker's init's child: the same sandbox, used by that run only, without the
engine's start (most of a throw-away run's time) on the run's time. `ready_containers=False` turns it off. Used
containers (and their workspace filesystems) are removed in a background thread once the result is known;
docker_pool.settle(), also run at exit, waits for that and removes the ready ones.

Every bind (the workspace, ro_binds, extra_binds) is a host path, so the engine must see this process's filesystem:
a local engine, which is how sandbox workers run (one per Docker host, `scripts/docker-engine.sh start`). The
`docker` package is imported only when this backend is used.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SandboxError, SandboxUnavailable
from ..limits import Limits
from ..result import ExecResult, Status, classify
from ..runtime import runtime_version
from ..workspace import Workspace
from . import docker_pool, volume
from .base import (
    OPENCLAW_WORKSPACE_PATH,
    WORKSPACE_PATH,
    Backend,
    Bind,
    Command,
    argv,
    base_env,
    checked_binds,
    sandbox_cwd,
)
from .bwrap import NOBODY
from .cgroups import _start_time
from .supervise import Capture

IMAGE_ENV = "CLAWGYM_SANDBOX_IMAGE"
IMAGE_REPOSITORY = "clawgym/sandbox"
# Labels scripts/images/sandbox.sh puts on the image.
RUNTIME_LABEL = "clawgym.runtime"
PROVIDES_LABEL = "clawgym.provides"
# Who made a container, "<hostname>:<pid namespace>:<pid>:<start time>", and when it must be gone by (epoch seconds:
# the wall clock plus a margin). A worker killed mid-run leaves its containers behind (they are the engine's, not its
# children); the next backend made on that engine removes those whose owner is gone (seen from the same host and PID
# namespace) or whose deadline has passed (a worker elsewhere, or in a container restarted since).
OWNER_LABEL = "clawgym.sandbox.owner"
DEADLINE_LABEL = "clawgym.sandbox.deadline"
_DEADLINE_MARGIN_SECONDS = 120
# How long a killed container may take to stop before the run is reported as a broken sandbox.
_STOP_SECONDS = 30
_HOSTNAME = "sandbox"


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        return "unknown"


def owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{_pid_namespace()}:{pid}:{_start_time(pid)}"


def _stale(labels: Mapping[str, str], now: float) -> bool:
    try:
        if now > float(labels.get(DEADLINE_LABEL, "")):
            return True
    except ValueError:
        pass
    host, namespace, pid, started = (labels.get(OWNER_LABEL, "").split(":") + ["", "", "", ""])[:4]
    if (host, namespace) != (socket.gethostname(), _pid_namespace()) or not pid.isdigit():
        return False  # another host's (or namespace's) worker: only it can tell before the deadline
    return str(_start_time(int(pid))) != started


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def default_image() -> str:
    """CLAWGYM_SANDBOX_IMAGE, or the sandbox image of the runtime this code defines."""
    return os.environ.get(IMAGE_ENV) or f"{IMAGE_REPOSITORY}:{runtime_version()}"


class DockerBackend(Backend):
    name = "docker"
    isolated = True

    def __init__(
        self,
        image: str | None = None,
        client: Any = None,
        uid: int = NOBODY,
        gid: int = NOBODY,
        cpus: float | None = None,
        sized_workspace: bool | None = None,
        ready_containers: bool = True,
    ):
        """uid/gid: who runs the command when the caller is root (otherwise the caller's own ids, so the files it
        writes in the workspace stay the caller's). cpus: a CFS quota in cores for each container (None: none).
        sized_workspace: give the workspace a size-limited filesystem (default: wherever volume.available()).
        ready_containers: run commands in containers started ahead (docker_pool) where the workspace is sized; False:
        every command in a container created and started for it."""
        if uid == 0 or gid == 0:
            raise SandboxError("the Docker sandbox never runs as root: pick an unprivileged uid and gid")
        if cpus is not None and not cpus > 0:
            raise SandboxError(f"cpus must be a positive number of cores, got {cpus!r}")
        self.image = image or default_image()
        self._client = client
        self.as_root = os.geteuid() == 0
        self.uid, self.gid = (uid, gid) if self.as_root else (os.getuid(), os.getgid())
        self.cpus = cpus
        self.sized_workspace = volume.available()[0] if sized_workspace is None else sized_workspace
        self._labels: dict[str, str] | None = None
        self.ready_containers = ready_containers

    @property
    def client(self) -> Any:
        if self._client is None or self._labels is None:
            self.check_available()
        return self._client

    def check_available(self) -> None:
        # The docker SDK is imported by this backend's methods only: a machine that uses bubblewrap needs none of it.
        try:
            import docker
        except ImportError as exc:
            raise SandboxUnavailable("the docker package is not installed (pip install -r requirements.txt)") from exc
        try:
            client = self._client or docker.from_env()
            client.ping()
        except Exception as exc:  # the SDK raises DockerException, requests errors or OSError alike
            raise SandboxUnavailable(
                f"no Docker engine answers at {engine_address()}: {exc} (scripts/docker-engine.sh start)"
            ) from exc
        try:
            image = client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"the Docker image {self.image} is not built here: run `make images` (scripts/images/sandbox.sh)"
            ) from exc
        except docker.errors.APIError as exc:
            raise SandboxUnavailable(f"Docker could not inspect the image {self.image}: {exc}") from exc
        self._client = client
        self._labels = dict(image.labels or {})
        remove_stale(client)

    @property
    def runtime(self) -> str:
        """The sandbox runtime the image holds (its label), or the image's name for an image not built by us."""
        self.client  # noqa: B018 - reads the labels
        return self._labels.get(RUNTIME_LABEL) or self.image

    @property
    def provided_paths(self) -> frozenset[str]:
        """Folders inside the sandbox that the image itself holds (the harness): callers need not bind them in."""
        self.client  # noqa: B018 - reads the labels
        return frozenset(p for p in self._labels.get(PROVIDES_LABEL, "").split(",") if p)

    def run(
        self,
        command: Command,
        workspace: Workspace,
        *,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        cwd: str | None = None,
        ro_binds: Sequence[Bind] = (),
        extra_binds: Sequence[Bind] = (),
    ) -> ExecResult:

        limits = limits or Limits()
        client = self.client
        args = argv(command)
        options = {
            "env": base_env(WORKSPACE_PATH, "/root", env),
            "limits": limits,
            "cwd": sandbox_cwd(cwd),
            "ro_binds": checked_binds(ro_binds),
            "extra_binds": checked_binds(extra_binds),
            "user": f"{self.uid}:{self.gid}",
            "cpus": self.cpus,
        }
        if self.as_root:
            workspace.chown_tree(self.uid, self.gid)
        pooled = (
            self.ready_containers
            and self.sized_workspace
            and docker_pool.launchable(args, options["cwd"], workspace.root, WORKSPACE_PATH)
        )
        disk = container = ready = None
        try:
            if pooled:
                # Creation options alone pick the ready container; the command, environment and cwd go in its line.
                key = _ready_key(self.image, options)
                fixed = {k: v for k, v in options.items() if k not in ("env", "cwd")}
                needed_until = time.time() + limits.wall_seconds + _DEADLINE_MARGIN_SECONDS
                ready = docker_pool.pool.take(key, needed_until, functools.partial(self._make_ready, key, fixed))
                container, connection = ready.container, ready.connection
                disk = volume.Volume(workspace.root, limits.disk_bytes, self.uid, self.gid, ready.mount_point)
                line = docker_pool.launch_line(args, options["env"], options["cwd"], _HOSTNAME)
                watched = self._watch(container, connection, limits, lambda: _send(connection, line))
            else:
                disk = (
                    volume.Volume(workspace.root, limits.disk_bytes, self.uid, self.gid)
                    if self.sized_workspace
                    else None
                )
                container = self._create(
                    args, disk.mount_point if disk else workspace.root, stdin=False, waiting_seconds=0, **options
                )
                connection = _attach(client, container, stdin=False)
                watched = self._watch(container, connection, limits, lambda: _start(container))
            disk_full = bool(disk and disk.full())
            if disk:
                disk.copy_back()
        finally:
            if container is not None:
                # Off the run's time: the command has ended (or been killed) and the workspace is copied back.
                docker_pool.remove_soon(container, ready.slot_dir if ready else None, disk)
            elif disk:
                volume.remove_soon(disk)
        stdout, stderr, exit_code, killed, oom_killed, duration = watched
        text = stderr.text()
        status, reason = classify(
            returncode=exit_code,
            killed_for=killed,
            stderr=text,
            limits=limits,
            oom_killed=oom_killed,
            disk_full=disk_full,
            address_space_limited=limits.address_space_bytes is not None,
        )
        return ExecResult(
            status=status,
            reason=reason,
            returncode=None if killed else exit_code,
            stdout=stdout.text(),
            stderr=text,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            duration=duration,
            # The container's cgroup (and its CPU account) is gone with the container: unknown rather than wrong.
            cpu_seconds=None,
            backend=self.name,
            isolated=True,
            runtime=self.runtime,
            unenforced=() if disk else ("disk_bytes",),
        )

    def _create(self, args: list[str], workspace_dir: Any, *, stdin: bool, waiting_seconds: float, **options) -> Any:
        import docker.errors

        try:
            return self.client.containers.create(
                self.image,
                **container_options(
                    args,
                    workspace_dir,
                    propagation="rslave" if stdin else None,
                    waiting_seconds=waiting_seconds,
                    **options,
                ),
                stdin_open=stdin,
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(f"the Docker image {self.image} is gone: run `make images`") from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker could not create the container: {exc}") from exc

    def _make_ready(self, key: tuple, options: dict[str, Any]) -> docker_pool.Ready:
        """A ready container for these creation options (docker_pool): created, attached, started, waiting."""
        slot = docker_pool.make_slot()
        try:
            container = self._create(
                docker_pool.LAUNCHER,
                slot / "workspace",
                stdin=True,
                waiting_seconds=docker_pool.READY_SECONDS,
                env={},
                cwd=WORKSPACE_PATH,
                **options,
            )
        except BaseException:
            docker_pool.remove_slot(slot)
            raise
        try:
            connection = _attach(self.client, container, stdin=True)
            _start(container)
        except BaseException:
            docker_pool.remove_soon(container, slot)
            raise
        return docker_pool.Ready(key, container, connection, slot, float(container.labels[DEADLINE_LABEL]))

    def _watch(self, container: Any, connection: socket.socket, limits: Limits, begin):
        """begin() the command, read its output under the caps, kill the container at a limit, say how it ended."""
        import docker.errors
        import requests  # the Docker SDK's own transport

        stdout = Capture(limits.max_output_bytes)
        stderr = Capture(limits.max_output_bytes)
        killed_for: list[Status] = []
        lock = threading.Lock()

        def stop(reason: Status) -> None:
            with lock:
                if killed_for:
                    return
                killed_for.append(reason)
            with contextlib.suppress(docker.errors.APIError):  # already exited: nothing to kill
                container.kill()

        def over_limit() -> None:
            # Hang up first: the engine then stops copying output to us (unread output would back up through it
            # into the container's runtime and stall the kill), and everything past the caps is dropped there.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            stop(Status.OUTPUT_LIMIT)

        def read() -> None:
            with contextlib.suppress(OSError):
                for stream_id, chunk in _frames(connection):
                    if (stderr if stream_id == 2 else stdout).feed(chunk):
                        over_limit()
                        return

        reader = threading.Thread(target=read, name=f"sandbox-docker-{container.short_id}", daemon=True)
        started = time.monotonic()
        begin()
        reader.start()
        try:
            container.wait(timeout=limits.wall_seconds)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            # The SDK reports a wait that outlived its timeout as one of these two.
            stop(Status.TIMEOUT)
            try:
                container.wait(timeout=_STOP_SECONDS)
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                raise SandboxError(f"the container did not stop {_STOP_SECONDS} s after it was killed") from exc
        duration = time.monotonic() - started
        reader.join(timeout=5)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
        connection.close()
        container.reload()
        state = container.attrs["State"]
        killed = killed_for[0] if killed_for else None
        return stdout, stderr, state.get("ExitCode"), killed, bool(state.get("OOMKilled")), duration


def _ready_key(image: str, options: Mapping[str, Any]) -> tuple:
    return (
        image,
        repr(options["limits"]),
        tuple(options["ro_binds"]),
        tuple(options["extra_binds"]),
        options["user"],
        options["cpus"],
    )


def _attach(client: Any, container: Any, *, stdin: bool) -> socket.socket:
    # Attached before the start (as the docker CLI does), so not a byte of output is missed.
    params = {"stdin": int(stdin), "stdout": 1, "stderr": 1, "stream": 1}
    attached = client.api.attach_socket(container.id, params=params)
    connection: socket.socket = getattr(attached, "_sock", attached)
    connection.settimeout(None)  # a command may be quiet for longer than the SDK's request timeout
    return connection


def _start(container: Any) -> None:
    import docker.errors

    try:
        container.start()
    except docker.errors.APIError as exc:
        # The engine could not start it (a bind source it cannot see); a missing command is Docker's init's exit 127
        # instead, like a shell's.
        raise SandboxError(f"Docker could not start the container: {exc}") from exc


def _send(connection: socket.socket, line: bytes) -> None:
    """The ready container's command line on its stdin, then end of input (its shell reads no further)."""
    try:
        connection.sendall(line)
        connection.shutdown(socket.SHUT_WR)
    except OSError as exc:
        raise SandboxError(f"the ready container did not take its command: {exc}") from exc


def remove_stale(client: Any) -> list[str]:
    """Remove the sandbox containers left by workers killed mid-run (see OWNER_LABEL); their names."""
    import docker.errors

    removed = []
    now = time.time()
    # ignore_removed: the SDK inspects each listed container, and other runs remove theirs meanwhile (a worker with
    # several slots, or several workers on one engine): without it, one finishing run failed the next one's start.
    for container in client.containers.list(all=True, filters={"label": "clawgym.sandbox=1"}, ignore_removed=True):
        if _stale(container.labels, now):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                container.remove(force=True)
                removed.append(container.name)
    return removed


def _frames(connection: socket.socket, chunk_bytes: int = 256 * 1024):
    """(stream id, bytes) pieces of the engine's multiplexed attach stream (1 stdout, 2 stderr): an 8-byte header
    (stream id, 3 zero bytes, big-endian length) before each frame. Ends when the engine closes the connection."""
    header = bytearray()
    while True:
        while len(header) < 8:
            data = connection.recv(8 - len(header))
            if not data:
                return
            header += data
        stream_id, size = struct.unpack(">BxxxL", header)
        header.clear()
        while size:
            data = connection.recv(min(size, chunk_bytes))
            if not data:
                return
            size -= len(data)
            yield stream_id, data


def container_options(
    command,
    workspace_dir,
    *,
    env,
    limits,
    cwd,
    ro_binds,
    extra_binds,
    user,
    cpus=None,
    propagation=None,
    waiting_seconds=0,
):
    """Keyword arguments for containers.create: everything that makes the container a sandbox. propagation: of the
    workspace binds ("rslave" for a ready container, whose workspace is mounted once it runs); waiting_seconds: how
    long it may wait before its command starts, added to its deadline."""
    from docker.types import LogConfig, Mount, Ulimit

    root = str(workspace_dir)
    mounts = [
        Mount(WORKSPACE_PATH, root, type="bind", propagation=propagation),
        Mount(OPENCLAW_WORKSPACE_PATH, root, type="bind", propagation=propagation),
        *(Mount(target, source, type="bind", read_only=True) for source, target in ro_binds),
        *(Mount(target, source, type="bind") for source, target in extra_binds),
    ]
    # exec: as in bubblewrap, an agent may run a script it wrote to /tmp (Docker mounts tmpfs noexec by default).
    tmpfs = f"size={limits.tmpfs_bytes},mode=1777,exec"
    ulimits = [
        Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 1),
        Ulimit(name="fsize", soft=limits.max_file_bytes, hard=limits.max_file_bytes),
        Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
        Ulimit(name="core", soft=0, hard=0),
    ]
    if limits.address_space_bytes:
        ulimits.append(Ulimit(name="as", soft=limits.address_space_bytes, hard=limits.address_space_bytes))
    options = {
        "command": command,
        "user": user,
        "working_dir": cwd,
        "environment": env,
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,  # Docker's init as PID 1: it reaps zombies, and its end empties the PID namespace
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,  # the same value: no swap on top
        "pids_limit": limits.max_processes,
        "shm_size": limits.tmpfs_bytes,
        "ulimits": ulimits,
        "tmpfs": {"/tmp": tmpfs, "/root": tmpfs},
        "mounts": mounts,
        "hostname": _HOSTNAME,
        "log_config": LogConfig(type="none"),
        "labels": {
            "clawgym.sandbox": "1",
            OWNER_LABEL: owner(),
            DEADLINE_LABEL: str(int(time.time() + waiting_seconds + limits.wall_seconds + _DEADLINE_MARGIN_SECONDS)),
        },
    }
    if cpus:
        options["nano_cpus"] = int(cpus * 1e9)
    return options
