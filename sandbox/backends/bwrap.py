"""bubblewrap: the default backend. Every namespace unshared, nothing of the host visible but an allow-list.

What the command finds: the sandbox runtime (sandbox.runtime), a Debian root folder built by `make runtime`, not the
host's system. Its /usr, /bin, /sbin, /lib* and a few /etc files are mounted read-only where the host's would be;
without a built runtime `run` raises SandboxUnavailable (there is no falling back to the host's /usr).

How each limit is enforced:
- wall clock: the parent's supervisor kills the sandbox's PID-1 (bubblewrap's init). When a PID namespace's init
  dies the kernel kills every process in it, so detached daemons (setsid, double fork) go with it. When the command
  exits on its own, bubblewrap exits and --die-with-parent kills that init; `run` returns only once the init is gone.
- memory and processes in total: the run's own cgroup (sandbox.backends.cgroups: memory and swap, pids), joined by
  the sandbox's PID 1 before it starts the command; an OOM kill there is status "oom". Where no cgroup can be made
  (not root, no delegated cgroup v2), memory_bytes falls back to an RLIMIT_AS per process and processes to
  RLIMIT_NPROC (counted per user namespace since Linux 5.14, so also a total), and ExecResult.unenforced says so.
- CPU, file size, open files, and address space where asked (Limits.address_space_bytes): rlimits set by the
  runtime's /usr/bin/prlimit inside the sandbox, just before the command (RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE,
  RLIMIT_AS, RLIMIT_CORE=0). They apply per process.
- disk: the workspace is a size-limited filesystem for the run (sandbox.backends.volume: a loop-mounted ext4 image
  of the workspace's size plus disk_bytes, copied back afterwards, then emptied and kept for this process's next run
  once the sandbox is seen gone, or unmounted and deleted by a thread of this process); full at the end is status
  "disk_full". Without
  root the workspace folder is bound as it is and disk_bytes is listed in ExecResult.unenforced.
- output: the supervisor's caps.
- memory held in tmpfs (/tmp, /root, /dev/shm): each is mounted with a size, `Limits.tmpfs_bytes`, and its pages
  count towards the cgroup's memory.
Needs unprivileged user namespaces (a root caller drops to `uid` before starting bubblewrap); where the host forbids
them (e.g. Ubuntu's AppArmor restriction) `run` raises SandboxError with bubblewrap's message. The kernel ignores
RLIMIT_NPROC for host root, which is one reason root callers run the sandbox as an unprivileged uid.
Writable extra_binds are the caller's: they are not on the size-limited filesystem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import SandboxError, SandboxUnavailable
from ..limits import Limits
from ..result import ExecResult, classify
from ..runtime import built_version, require_built, runtime_root, runtime_version
from ..workspace import Workspace
from . import cgroups, volume
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
log = logging.getLogger("sandbox")

# The runtime's top-level system folders, made visible read-only (a symlink there, as /lib -> usr/lib, stays one).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few /etc files of the runtime that programs need: the dynamic linker's cache, name-service and locale basics,
# certificates, MIME and magic data, Python's Debian configuration, the runtime's own version. passwd, group and
# hosts are written fresh for each sandbox instead, so no account or name of any machine is in it.
ETC_FILES = (
    "/etc/clawgym-runtime",
    "/etc/clawgym-runtime.packages",
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
    "/etc/ssl",
    "/etc/ca-certificates.conf",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/os-release",
    "/etc/debian_version",
)
# Where the runtime's /etc files and the sandbox's own passwd, group and hosts are gathered into one folder per runtime
# and identity (ETC_VIEWS/<key> inside the runtime), bound at /etc in one mount: a mount for each of its 25 files cost
# about 2.6 ms of CPU a run. A rebuilt runtime folder takes its views with it.
ETC_VIEWS = ".sandbox-etc"
# Inside the sandbox, from the runtime.
PRLIMIT = "/usr/bin/prlimit"
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


class BwrapBackend(Backend):
    name = "bwrap"
    isolated = True

    def __init__(
        self, bwrap: str | None = None, runtime: str | Path | None = None, uid: int = NOBODY, gid: int = NOBODY
    ):
        """runtime: a built runtime folder (default: this code's runtime version under sandbox.runtime.runtimes_dir()).
        uid/gid: who runs the sandbox when the caller is root (ignored otherwise: it then runs as the caller)."""
        if uid == 0 or gid == 0:
            raise SandboxError("the bubblewrap sandbox never runs as root: pick an unprivileged uid and gid")
        self.bwrap = bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.runtime = Path(runtime) if runtime else runtime_root()
        self.runtime_version = (built_version(self.runtime) or "unbuilt") if runtime else runtime_version()
        self.as_root = os.geteuid() == 0
        self.uid, self.gid = (uid, gid) if self.as_root else (os.getuid(), os.getgid())
        self.setpriv = shutil.which("setpriv", path="/usr/bin:/bin") if self.as_root else None
        self._totals: tuple[cgroups.CgroupTree | None, bool] | None = None
        self._mounts: list[str] | None = None
        self._etc_whole = False  # /etc is one bound folder (_etc_view) holding the identity files too

    def check_available(self) -> None:
        if not os.access(self.bwrap, os.X_OK):
            raise SandboxUnavailable(
                f"{self.bwrap} is missing: install the bubblewrap package (scripts/system-deps.sh)"
            )
        require_built(self.runtime, self.runtime_version)
        if not os.access(self.runtime / PRLIMIT.lstrip("/"), os.X_OK):
            raise SandboxUnavailable(
                f"the sandbox runtime at {self.runtime} has no {PRLIMIT}: rebuild it (make runtime)"
            )

    def _bounds(self) -> tuple[cgroups.CgroupTree | None, bool]:
        """(the cgroup tree for totals or None, whether workspaces get a sized filesystem), found once, with a warning
        for each that this host cannot give."""
        if self._totals is None:
            tree, why = cgroups.detect()
            if tree is None:
                _warn_once(f"sandbox: memory_bytes bounds each process, not their sum (no cgroup: {why})")
            sized, why_not = volume.available()
            if not sized:
                _warn_once(f"sandbox: workspace disk use is not bounded: {why_not}")
            self._totals = (tree, sized)
        return self._totals

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
        tree, sized = self._bounds()
        unenforced = [name for name, held in (("memory_bytes", tree), ("disk_bytes", sized)) if not held]
        cgroup = disk = None
        gone = False  # the sandbox's init was seen to exit, and with it every process of the run
        try:
            cgroup = tree.create(limits) if tree else None
            disk = volume.take(workspace.root, limits.disk_bytes, self.uid, self.gid) if sized else None
            result = self._run(argv(command), disk.mount_point if disk else workspace.root, cgroup, options, limits)
            gone = result[3]
            oom_killed = bool(cgroup and cgroup.oom_kills())
            disk_full = bool(disk and disk.full())
            if disk:
                disk.copy_back()
        finally:
            if disk:
                # The folder holds the result: the volume goes back to the pool, emptied, or is unmounted and deleted
                # off the caller's time.
                volume.release(disk, sandbox_gone=gone)
            if cgroup:
                cgroup.remove()
        watched, stderr, rlimits, _gone = result
        status, reason = classify(
            returncode=watched.returncode,
            killed_for=watched.killed_for,
            stderr=stderr,
            limits=limits,
            oom_killed=oom_killed,
            disk_full=disk_full,
            address_space_limited=any(option.startswith("--as=") for option in rlimits),
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
            runtime=self.runtime_version,
            unenforced=tuple(unenforced),
        )

    def _run(self, command, workspace_dir: Path, cgroup: cgroups.RunCgroup | None, options: dict, limits: Limits):
        """Start bubblewrap, put its sandbox into `cgroup` before the command starts, and supervise it to the end.
        Returns (supervised, stderr, rlimit options, whether the sandbox's init was seen to exit)."""
        rlimits = rlimit_options(limits, totals_by_cgroup=cgroup is not None)
        status_read, status_write = os.pipe()
        # The sandbox's PID 1 waits on this pipe before it starts the command (see cgroups: joining before start).
        release_read, release_fd = os.pipe()
        release = _Release(release_fd)
        data_fds: list[int] = []
        try:
            args = self.bwrap_args(
                command,
                workspace_dir,
                status_fd=status_write,
                block_fd=release_read,
                data_fd=lambda text: _data_fd(text, data_fds),
                rlimits=rlimits,
                **options,
            )
            # A root caller drops to the sandbox's uid, gid and no supplementary groups before bubblewrap starts:
            # through the host's setpriv (which then execs bubblewrap in the same process) where there is one, since
            # Popen's own user=/group= rule out vfork, and forking a worker-sized process cost ~10 ms of CPU a run.
            drop = self.as_root and self.setpriv is None
            if self.as_root and self.setpriv:
                args = [self.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *args]
            started = time.monotonic()
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # bubblewrap gets an empty environment: its init stays PID 1 inside, and /proc/1/environ is
                # readable there. The command's environment is passed with --setenv instead.
                env={},
                pass_fds=[status_write, release_read, *data_fds],
                user=self.uid if drop else None,
                group=self.gid if drop else None,
                extra_groups=[] if drop else None,
            )
        except BaseException:
            os.close(status_read)
            release.close()
            raise
        finally:
            os.close(status_write)
            os.close(release_read)
            for fd in data_fds:
                os.close(fd)

        def start(pid: int) -> None:
            if cgroup:
                try:
                    cgroup.add(pid)
                except ProcessLookupError:
                    pass  # it died setting up (a failed mount): bubblewrap reports that on stderr
                except OSError as exc:
                    raise SandboxError(f"could not move the sandbox into its cgroup: {exc}") from exc
            release()

        sandbox = _SandboxInit(proc, start)
        gone = False
        try:
            watched = supervise(
                proc, limits, sandbox.kill, started=started, extra_readers={status_read: sandbox.feed_status}
            )
        finally:
            try:
                sandbox.wait_gone()
                gone = sandbox.pidfd is not None  # seen to exit, rather than never reported
            finally:
                sandbox.close()
                os.close(status_read)
                release.close()
            proc.stdout.close()
            proc.stderr.close()
        stderr = watched.stderr.text()
        # bubblewrap reports the child's pid before the child mounts anything, so a failed mount or chdir shows
        # only as exit 1 with bubblewrap's own message first on stderr. A command that fakes that message only
        # turns its own run into an error for the caller.
        setup_failed = watched.returncode == 1 and not watched.killed_for and stderr.startswith("bwrap: ")
        # The wall clock counts the sandbox's start too: a run killed for it before bubblewrap reported its child
        # (a tiny limit on a busy host) is a timeout, not a broken sandbox.
        if (not sandbox.started and not watched.killed_for) or setup_failed:
            hint = ""
            if self.as_root and "Permission denied" in stderr:
                hint = (
                    f" (the sandbox runs as uid {self.uid}: the workspace and every bound path must be reachable by it)"
                )
            raise SandboxError(f"bubblewrap could not set up the sandbox: {stderr.strip()}{hint}")
        return watched, stderr, rlimits, gone

    def bwrap_args(
        self, command, workspace_dir, *, env, limits, cwd, ro_binds, extra_binds, status_fd, block_fd, data_fd, rlimits
    ):
        """The bubblewrap command line; data_fd(text) returns an fd bubblewrap reads a file's contents from."""
        args = [
            self.bwrap,
            "--unshare-all",  # user, pid, net, ipc, uts, cgroup: no network at all, only loopback
            "--unshare-user",
            "--disable-userns",  # no nested user namespaces, so no regaining capabilities inside
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into the caller's terminal
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
        ]
        args += self._runtime_mounts()
        if not self._etc_whole:
            for path, text in self._identity_files().items():
                args += ["--perms", "0444", "--ro-bind-data", str(data_fd(text)), path]
        size = str(limits.tmpfs_bytes)
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",  # bwrap's /dev is an unbounded tmpfs: only /dev/shm, sized, stays writable
            "--size",
            size,
            "--tmpfs",
            "/tmp",
            "--size",
            size,
            "--tmpfs",
            "/root",
            "--bind",
            str(workspace_dir),
            WORKSPACE_PATH,
            "--bind",
            str(workspace_dir),
            OPENCLAW_WORKSPACE_PATH,
        ]
        for source, target in ro_binds:
            args += ["--ro-bind", source, target]
        for source, target in extra_binds:
            args += ["--bind", source, target]
        args += ["--remount-ro", "/", "--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--json-status-fd", str(status_fd), "--block-fd", str(block_fd)]
        args += ["--", PRLIMIT, *rlimits, "--", *command]
        return args

    def _runtime_mounts(self) -> list[str]:
        """The runtime's system folders and /etc as bubblewrap options, read from the runtime once per backend (a built
        runtime never changes: a new definition is a new version in a new folder)."""
        if self._mounts is None:
            mounts = []
            view = self._etc_view()
            for path in SYSTEM_DIRS + (() if view else ETC_FILES):
                source = self.runtime / path.lstrip("/")
                # A link is made again inside (it then resolves in the runtime, as /etc/localtime must), never
                # followed on the host.
                if source.is_symlink():
                    mounts += ["--symlink", os.readlink(source), path]
                elif source.exists():
                    mounts += ["--ro-bind", str(source), path]
            if view:
                mounts += ["--ro-bind", str(view), "/etc"]
            self._etc_whole = view is not None
            self._mounts = mounts
        return list(self._mounts)

    def _etc_view(self) -> Path | None:
        """A folder holding what the sandbox's /etc shows: the runtime's ETC_FILES (links kept as links) and this
        backend's passwd, group and hosts. Made once inside the runtime, named by a digest of that list, the identity
        files and each source's inode, mtime and size (a runtime rebuilt in place gets a new view); None where it
        cannot be made (a runtime the caller may not write), and the files are then bound one by one."""
        identity = self._identity_files()
        key = hashlib.sha256(json.dumps([ETC_FILES, identity]).encode())
        for path in ETC_FILES:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(self.runtime / path.lstrip("/"))
                key.update(f"\0{path}\0{st.st_ino}\0{st.st_mtime_ns}\0{st.st_size}".encode())
        views = self.runtime / ETC_VIEWS
        view = views / key.hexdigest()[:16]
        if view.is_dir():
            return view
        try:
            views.mkdir(mode=0o755, exist_ok=True)
            building = Path(tempfile.mkdtemp(prefix=".building-", dir=views))
            try:
                os.chmod(building, 0o755)
                for path in ETC_FILES:
                    source = self.runtime / path.lstrip("/")
                    target = building / source.name
                    if source.is_symlink():
                        os.symlink(os.readlink(source), target)
                    elif source.is_dir():
                        shutil.copytree(source, target, symlinks=True)
                    elif source.exists():
                        shutil.copy2(source, target)
                for path, text in identity.items():
                    target = building / Path(path).name
                    target.write_text(text)
                    target.chmod(0o444)
                try:
                    building.rename(view)  # whole or not at all; another process may have made the same one first
                except OSError:
                    if not view.is_dir():
                        raise
            finally:
                shutil.rmtree(building, ignore_errors=True)
        except OSError as exc:
            _warn_once(f"sandbox: the runtime's /etc files are bound one by one (no folder for them in {views}: {exc})")
            return None
        return view

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


def rlimit_options(limits: Limits, *, totals_by_cgroup: bool) -> list[str]:
    """prlimit flags. The hard CPU limit is one second past the soft one: SIGXCPU first, then SIGKILL.

    With a cgroup bounding memory and processes in total, no per-process stand-ins for them are set (only an address
    space limit when one is asked for); without one, memory_bytes becomes each process's address space limit.
    """
    options = [
        f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--fsize={limits.max_file_bytes}",
        f"--nofile={limits.max_open_files}",
        "--core=0",
    ]
    address_space = limits.address_space_bytes or (None if totals_by_cgroup else limits.memory_bytes)
    if address_space:
        options.append(f"--as={address_space}")
    if not totals_by_cgroup:
        options.append(f"--nproc={limits.max_processes}")
    return options


class _Release:
    """The write end of bubblewrap's --block-fd pipe: one byte lets the sandbox's PID 1 start the command."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def __call__(self) -> None:
        """Release (at most once; closing the pipe unblocks it too, so close() is also a release)."""
        if self.fd is None:
            return
        try:
            os.write(self.fd, b"1")
        except OSError:
            pass  # bubblewrap is gone already: nothing is waiting
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


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

    def __init__(self, proc: subprocess.Popen, on_start: Callable[[int], None]) -> None:
        self.proc = proc
        self.on_start = on_start  # called with the init's host pid, which waits for it to return
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
                self.on_start(pid)

    def kill(self) -> None:
        """SIGKILL the namespace's init: the kernel then kills everything in it, and bubblewrap exits."""
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                return
            except ProcessLookupError:
                pass
        # Not reported yet (or init already gone): kill bubblewrap, and first the child it may have cloned already.
        # That child waits for bubblewrap's go-ahead before it sets --die-with-parent, so killing bubblewrap alone
        # would leave it blocked for ever (seen with a 1 ms wall clock). Stopped, bubblewrap cannot clone again and
        # does not reap, so the pids read from its children list cannot be recycled before they are killed.
        # os.kill, not Popen.send_signal: that polls, and a reap there would take the rusage the supervisor reads.
        if self.proc.returncode is None:
            pid = self.proc.pid
            os.kill(pid, signal.SIGSTOP)
            for child in _children(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)

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


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # The command name (field 2) may hold spaces and parentheses: split after its closing one.
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
