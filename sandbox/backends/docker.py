"""docker: one throw-away container per command, through the Docker SDK, for hosts that run a Docker engine.

The container has no network (network_mode "none"), a read-only root filesystem, no capabilities,
no-new-privileges, and runs as an unprivileged uid. Limits: the wall clock and output caps in this process, memory
and process count through the container's cgroup (which, unlike rlimits, bound the sum over all processes and
report an OOM kill), CPU time, file size and open files as ulimits, /tmp and /root as sized tmpfs. The container is
removed whatever happens, so nothing it started outlives `run`.

The workspace is bind-mounted, so the engine must see the same filesystem as this process (a local engine, which is
how sandbox workers run: one per Docker host). The `docker` package is imported only when this backend is used.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SandboxError, SandboxUnavailable
from ..limits import Limits
from ..result import ExecResult, Status, classify
from ..workspace import Workspace
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
from .supervise import Capture

# Debian's python3 lives in /usr/local/bin in the official image, so the PATH here includes it.
DEFAULT_IMAGE = "python:3.11-slim-bookworm"
DOCKER_PATH = "/usr/local/bin:/usr/bin:/bin"


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


class DockerBackend(Backend):
    name = "docker"
    isolated = True

    def __init__(self, image: str = DEFAULT_IMAGE, client: Any = None, uid: int = NOBODY, gid: int = NOBODY):
        self.image = image
        self._client = client
        self.uid, self.gid = uid, gid

    @property
    def client(self) -> Any:
        if self._client is None:
            self.check_available()
        return self._client

    def check_available(self) -> None:
        try:
            import docker
        except ImportError as exc:
            raise SandboxUnavailable("the docker package is not installed (pip install -r requirements.txt)") from exc
        try:
            client = self._client or docker.from_env()
            client.ping()
        except Exception as exc:  # the SDK raises DockerException, requests errors or OSError alike
            raise SandboxUnavailable(f"no Docker engine answers at {engine_address()}: {exc}") from exc
        self._client = client

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
        import docker.errors

        limits = limits or Limits()
        client = self.client
        if os.geteuid() == 0:
            workspace.chown_tree(self.uid, self.gid)
        options = container_options(
            argv(command),
            workspace,
            env=base_env(WORKSPACE_PATH, "/root", env) | {"PATH": DOCKER_PATH},
            limits=limits,
            cwd=sandbox_cwd(cwd),
            ro_binds=checked_binds(ro_binds),
            extra_binds=checked_binds(extra_binds),
            user=f"{self.uid}:{self.gid}",
        )
        try:
            container = client.containers.create(self.image, **options)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(f"Docker image {self.image} is not present: docker pull {self.image}") from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"Docker could not create the container: {exc}") from exc
        try:
            return self._run_container(client, container, limits)
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)

    def _run_container(self, client: Any, container: Any, limits: Limits) -> ExecResult:
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

        # Attach before starting (as the docker CLI does), so not a byte of output is missed.
        stream = client.api.attach(container.id, stdout=True, stderr=True, stream=True, demux=True)
        started = time.monotonic()
        container.start()

        def read() -> None:
            for out, err in stream:
                for capture, chunk in ((stdout, out), (stderr, err)):
                    if chunk and capture.feed(chunk):
                        stop(Status.OUTPUT_LIMIT)

        reader = threading.Thread(target=read, name=f"sandbox-docker-{container.short_id}", daemon=True)
        reader.start()
        try:
            container.wait(timeout=limits.wall_seconds)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            # The SDK reports a wait that outlived its timeout as one of these two.
            stop(Status.TIMEOUT)
            container.wait(timeout=30)
        duration = time.monotonic() - started
        reader.join(timeout=5)
        container.reload()
        state = container.attrs["State"]
        killed = killed_for[0] if killed_for else None
        text = stderr.text()
        status, reason = classify(
            returncode=state.get("ExitCode"),
            killed_for=killed,
            stderr=text,
            limits=limits,
            oom_killed=bool(state.get("OOMKilled")),
        )
        return ExecResult(
            status=status,
            reason=reason,
            returncode=None if killed else state.get("ExitCode"),
            stdout=stdout.text(),
            stderr=text,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
            duration=duration,
            cpu_seconds=None,
            backend=self.name,
            isolated=True,
            # The image is the runtime here; once the runtime folder is imported as the image (the deployment
            # issue), its tag names the runtime version.
            runtime=self.image,
            # The workspace is a bind mount of the host folder: only max_file_bytes and the wall clock bound it.
            unenforced=("disk_bytes",),
        )


def container_options(command, workspace, *, env, limits, cwd, ro_binds, extra_binds, user) -> dict[str, Any]:
    """Keyword arguments for containers.create: everything that makes the container a sandbox."""
    from docker.types import Mount, Ulimit

    root = str(workspace.root)
    mounts = [
        Mount(WORKSPACE_PATH, root, type="bind"),
        Mount(OPENCLAW_WORKSPACE_PATH, root, type="bind"),
        *(Mount(target, source, type="bind", read_only=True) for source, target in ro_binds),
        *(Mount(target, source, type="bind") for source, target in extra_binds),
    ]
    tmpfs = f"size={limits.tmpfs_bytes},mode=1777"
    return {
        "command": command,
        "user": user,
        "working_dir": cwd,
        "environment": env,
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,  # a reaping PID 1, so zombies do not eat the pids limit
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,  # the same value: no swap on top
        "pids_limit": limits.max_processes,
        "shm_size": limits.tmpfs_bytes,
        "ulimits": [
            Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 1),
            Ulimit(name="fsize", soft=limits.max_file_bytes, hard=limits.max_file_bytes),
            Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "tmpfs": {"/tmp": tmpfs, "/root": tmpfs},
        "mounts": mounts,
        "hostname": "sandbox",
        "labels": {"clawgym.sandbox": "1"},
    }
