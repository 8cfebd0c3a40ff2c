"""process: no isolation at all, for development machines without bubblewrap.

The command runs as the caller, sees the whole machine and its network, and reads the real filesystem. It is refused
unless CLAWGYM_ALLOW_UNSANDBOXED=1 is set, and every result says isolated=False.

What it still does: a scrubbed environment, the workspace as working directory, the wall clock and output caps,
and per-process rlimits (CPU, memory as address space, file size, open files) through prlimit. It does not limit the number of
processes (RLIMIT_NPROC would count every process of the caller's uid on the machine), and it kills only the
command's process group: a daemon that left it with setsid survives.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from ..errors import SandboxError, SandboxUnavailable, UnsandboxedRefused
from ..limits import Limits
from ..result import ExecResult, classify
from ..workspace import Workspace
from .base import OPENCLAW_WORKSPACE_PATH, WORKSPACE_PATH, Backend, Bind, Command, argv, base_env, sandbox_cwd
from .supervise import supervise

ALLOW_ENV = "CLAWGYM_ALLOW_UNSANDBOXED"


def unsandboxed_allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip() == "1"


class ProcessBackend(Backend):
    name = "process"
    isolated = False

    def __init__(self, prlimit: str | None = None) -> None:
        self.prlimit = prlimit or shutil.which("prlimit", path="/usr/bin:/bin") or "/usr/bin/prlimit"

    def check_available(self) -> None:
        if not os.access(self.prlimit, os.X_OK):
            raise SandboxUnavailable(f"{self.prlimit} is missing: install the util-linux package")

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
        if not unsandboxed_allowed():
            raise UnsandboxedRefused(
                "the 'process' sandbox backend runs untrusted code without any isolation; "
                f"set {ALLOW_ENV}=1 to allow it on a development machine, or install bubblewrap and use 'bwrap'"
            )
        if ro_binds or extra_binds:
            raise SandboxError("the 'process' backend cannot bind paths: the command sees the real filesystem")
        self.check_available()
        limits = limits or Limits()
        root = str(workspace.root)
        options = [
            f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
            f"--as={limits.address_space_bytes or limits.memory_bytes}",
            f"--fsize={limits.max_file_bytes}",
            f"--nofile={limits.max_open_files}",
            "--core=0",
        ]
        started = time.monotonic()
        proc = subprocess.Popen(
            [self.prlimit, *options, "--", *argv(command)],
            cwd=host_cwd(root, cwd),
            env=base_env(root, root, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so one killpg reaches its children
        )

        def kill_group() -> None:
            with contextlib.suppress(ProcessLookupError):  # the whole group is already gone
                os.killpg(proc.pid, signal.SIGKILL)

        try:
            watched = supervise(proc, limits, kill_group, started=started, after_exit=kill_group)
        finally:
            proc.stdout.close()
            proc.stderr.close()
        stderr = watched.stderr.text()
        status, reason = classify(
            returncode=watched.returncode,
            killed_for=watched.killed_for,
            stderr=stderr,
            limits=limits,
            cpu_seconds=watched.cpu_seconds,
        )
        return ExecResult(
            status=status,
            reason=reason,
            returncode=None if watched.killed_for else watched.returncode,
            stdout=watched.stdout.text(),
            stderr=stderr,
            stdout_truncated=watched.stdout.truncated,
            stderr_truncated=watched.stderr.truncated,
            duration=watched.duration,
            cpu_seconds=watched.cpu_seconds,
            backend=self.name,
            isolated=False,
            # Whatever the host has: no defined runtime. Memory only per process, processes and disk not at all.
            runtime="",
            unenforced=("memory_bytes", "max_processes", "disk_bytes"),
        )


def host_cwd(root: str, cwd: str | None) -> str:
    """Map a sandbox working directory onto the workspace folder (both sandbox mount points name it)."""
    inside = sandbox_cwd(cwd)
    for mount in (WORKSPACE_PATH, OPENCLAW_WORKSPACE_PATH):
        if inside == mount or inside.startswith(mount + "/"):
            return posixpath.join(root, posixpath.relpath(inside, mount))
    raise SandboxError(f"cwd {cwd!r} is outside the workspace, which is all the 'process' backend can offer")
