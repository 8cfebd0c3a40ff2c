"""bubblewrap: the default backend. Every namespace unshared, nothing of the host visible but an allow-list.

How each limit is enforced:
- wall clock: the parent's supervisor kills the sandbox's PID-1 (bubblewrap's init). When a PID namespace's init
  dies the kernel kills every process in it, so detached daemons (setsid, double fork) go with it. When the command
  exits on its own, bubblewrap exits and --die-with-parent kills that init; `run` returns only once the init is gone.
- CPU, memory, file size, open files: rlimits set by /usr/bin/prlimit inside the sandbox, just before the command
  (RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CORE=0). They apply per process.
- processes: RLIMIT_NPROC, set after the sandbox's user namespace exists. Since Linux 5.14 that count is kept per
  user namespace, so it counts this sandbox's processes only, not every process of the uid on the machine. The
  kernel ignores RLIMIT_NPROC for host root, which is why root callers run the sandbox as an unprivileged uid.
- output: the supervisor's caps.
- memory held in tmpfs (/tmp, /root, /dev/shm): each is mounted with a size, `Limits.tmpfs_bytes`.
Needs unprivileged user namespaces (a root caller drops to `uid` before starting bubblewrap); where the host forbids
them (e.g. Ubuntu's AppArmor restriction) `run` raises SandboxError with bubblewrap's message.
Not bounded: memory summed over processes (each may use memory_bytes; a cgroup would bound the sum, but the cgroup
trees here belong to the host's process manager, so that is left to a deployment that delegates one) and disk used
in the workspace (bounded only by max_file_bytes per file and by the wall clock).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from ..errors import SandboxError, SandboxUnavailable
from ..limits import Limits
from ..result import ExecResult, classify
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
from .supervise import supervise

NOBODY = 65534

# Top-level system folders made visible read-only (a symlink on the host, as /lib -> usr/lib, stays a symlink).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few /etc files programs need: the dynamic linker's cache, name-service and locale basics, certificates.
# passwd, group and hosts are written fresh for each sandbox instead, so no host account or name leaks in.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ca-certificates.conf",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
)


class BwrapBackend(Backend):
    name = "bwrap"
    isolated = True

    def __init__(self, bwrap: str | None = None, prlimit: str | None = None, uid: int = NOBODY, gid: int = NOBODY):
        """uid/gid: who runs the sandbox when the caller is root (ignored otherwise: it then runs as the caller)."""
        if uid == 0 or gid == 0:
            raise SandboxError("the bubblewrap sandbox never runs as root: pick an unprivileged uid and gid")
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.prlimit = prlimit or shutil.which("prlimit", path="/usr/bin:/bin") or "/usr/bin/prlimit"
        self.as_root = os.geteuid() == 0
        self.uid, self.gid = (uid, gid) if self.as_root else (os.getuid(), os.getgid())

    def check_available(self) -> None:
        for tool, package in ((self.bwrap, "bubblewrap"), (self.prlimit, "util-linux")):
            if not os.access(tool, os.X_OK):
                raise SandboxUnavailable(f"{tool} is missing: install the {package} package (scripts/system-deps.sh)")

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
        self.check_available()
        limits = limits or Limits()
        options = {
            "env": base_env(WORKSPACE_PATH, "/root", env),
            "limits": limits,
            "cwd": sandbox_cwd(cwd),
            "ro_binds": checked_binds(ro_binds),
            "extra_binds": checked_binds(extra_binds),
        }
        if self.as_root:
            workspace.chown_tree(self.uid, self.gid)
        status_read, status_write = os.pipe()
        data_fds: list[int] = []
        try:
            args = self.bwrap_args(
                argv(command),
                workspace,
                status_fd=status_write,
                data_fd=lambda text: _data_fd(text, data_fds),
                **options,
            )
            started = time.monotonic()
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # bubblewrap gets an empty environment: its init stays PID 1 inside, and /proc/1/environ is
                # readable there. The command's environment is passed with --setenv instead.
                env={},
                pass_fds=[status_write, *data_fds],
                user=self.uid if self.as_root else None,
                group=self.gid if self.as_root else None,
                extra_groups=[] if self.as_root else None,
            )
        except BaseException:
            os.close(status_read)
            raise
        finally:
            os.close(status_write)
            for fd in data_fds:
                os.close(fd)
        sandbox = _SandboxInit(proc)
        try:
            watched = supervise(
                proc, limits, sandbox.kill, started=started, extra_readers={status_read: sandbox.feed_status}
            )
        finally:
            try:
                sandbox.wait_gone()
            finally:
                sandbox.close()
                os.close(status_read)
            proc.stdout.close()
            proc.stderr.close()
        stderr = watched.stderr.text()
        # bubblewrap reports the child's pid before the child mounts anything, so a failed mount or chdir shows
        # only as exit 1 with bubblewrap's own message first on stderr. A command that fakes that message only
        # turns its own run into an error for the caller.
        setup_failed = watched.returncode == 1 and not watched.killed_for and stderr.startswith("bwrap: ")
        if not sandbox.started or setup_failed:
            hint = ""
            if self.as_root and "Permission denied" in stderr:
                hint = (
                    f" (the sandbox runs as uid {self.uid}: the workspace and every bound path must be reachable by it)"
                )
            raise SandboxError(f"bubblewrap could not set up the sandbox: {stderr.strip()}{hint}")
        status, reason = classify(
            returncode=watched.returncode,
            killed_for=watched.killed_for,
            stderr=stderr,
            limits=limits,
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
            # bubblewrap exits without reaping its init, so the CPU time of the sandbox's processes never
            # reaches us: unknown rather than wrong.
            cpu_seconds=None,
            backend=self.name,
            isolated=True,
        )

    def bwrap_args(self, command, workspace, *, env, limits, cwd, ro_binds, extra_binds, status_fd, data_fd):
        """The bubblewrap command line; data_fd(text) returns an fd bubblewrap reads a file's contents from."""
        args = [
            self.bwrap,
            "--unshare-all",  # user, pid, net, ipc, uts, cgroup: no network at all, only loopback
            "--unshare-user",
            "--disable-userns",  # no nested user namespaces, so no regaining capabilities inside
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into the caller's terminal
            "--cap-drop", "ALL",
            "--hostname", "sandbox",
        ]  # fmt: skip
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in ETC_FILES:
            args += ["--ro-bind-try", path, path]
        for path, text in self._identity_files().items():
            args += ["--perms", "0444", "--ro-bind-data", str(data_fd(text)), path]
        size = str(limits.tmpfs_bytes)
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", size, "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",  # bwrap's /dev is an unbounded tmpfs: only /dev/shm, sized, stays writable
            "--size", size, "--tmpfs", "/tmp",
            "--size", size, "--tmpfs", "/root",
            "--bind", str(workspace.root), WORKSPACE_PATH,
            "--bind", str(workspace.root), OPENCLAW_WORKSPACE_PATH,
        ]  # fmt: skip
        for source, target in ro_binds:
            args += ["--ro-bind", source, target]
        for source, target in extra_binds:
            args += ["--bind", source, target]
        args += ["--remount-ro", "/", "--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--json-status-fd", str(status_fd), "--", self.prlimit, *rlimit_options(limits), "--", *command]
        return args

    def _identity_files(self) -> dict[str, str]:
        users = {0: "root", NOBODY: "nobody"}
        users.setdefault(self.uid, "sandbox")
        groups = {0: "root", NOBODY: "nogroup"}
        groups.setdefault(self.gid, "sandbox")
        return {
            "/etc/passwd": "".join(f"{name}:x:{uid}:{uid}:{name}:/root:/bin/sh\n" for uid, name in users.items()),
            "/etc/group": "".join(f"{name}:x:{gid}:\n" for gid, name in groups.items()),
            "/etc/hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n",
        }


def rlimit_options(limits: Limits) -> list[str]:
    """prlimit flags. The hard CPU limit is one second past the soft one: SIGXCPU first, then SIGKILL."""
    return [
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--as={limits.memory_bytes}",
        f"--nproc={limits.max_processes}",
        f"--fsize={limits.max_file_bytes}",
        f"--nofile={limits.max_open_files}",
        "--core=0",
    ]


def _data_fd(text: str, opened: list[int]) -> int:
    """A pipe already holding `text` and closed for writing (the files are far smaller than a pipe's buffer)."""
    read_end, write_end = os.pipe()
    opened.append(read_end)
    try:
        os.write(write_end, text.encode())
    finally:
        os.close(write_end)
    return read_end


class _SandboxInit:
    """Follows bubblewrap's status pipe to learn the host pid of the sandbox's init, and kills through it."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.buffer = b""
        self.started = False
        self.pidfd: int | None = None

    def feed_status(self, chunk: bytes) -> None:
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if "child-pid" in message:
                if self.started:
                    continue  # only bubblewrap's first report is believed
                self.started = True
                pid = int(message["child-pid"])
                try:
                    # A pidfd names this very process, so a later kill cannot hit a recycled pid.
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue  # already gone: nothing left in the namespace to kill
                if _parent_pid(pid) != self.proc.pid:
                    os.close(pidfd)  # exited and recycled in between: never signal a stranger
                    continue
                self.pidfd = pidfd

    def kill(self) -> None:
        """SIGKILL the namespace's init: the kernel then kills everything in it, and bubblewrap exits."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                return
            except ProcessLookupError:
                pass
        # Not started yet (or init already gone): kill bubblewrap itself; --die-with-parent takes the rest.
        # os.kill, not Popen.send_signal: that polls, and a reap there would take the rusage the supervisor reads.
        if self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)

    def wait_gone(self, timeout: float = 10.0) -> None:
        """Block until the sandbox's init has exited, and with it every process of the namespace.

        bubblewrap returns as soon as the command exits, while its init may still be alive with orphans (daemons);
        --die-with-parent kills that init right after. The kernel empties a PID namespace before its init counts
        as exited, so a readable pidfd means nothing of the sandbox is left.
        """
        if self.pidfd is None:
            return
        if select.select([self.pidfd], [], [], timeout)[0]:
            return
        self.kill()
        if not select.select([self.pidfd], [], [], timeout)[0]:
            raise SandboxError(f"the sandbox's init did not exit {2 * timeout:g} s after bubblewrap")

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # The command name (field 2) may hold spaces and parentheses: split after its closing one.
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
