"""Per-run cgroups: the sandbox's memory and processes bounded in total, and its OOM kills counted.

Rlimits bound each process; a cgroup bounds their sum (four processes of 800 MiB each are 3.2 GiB). Each run gets
its own cgroup, `<parent>/run-<pid>-<start>-<random>`, under one parent for ClawGym (CLAWGYM_CGROUP_PARENT, default
`clawgym`), the way Docker keeps its containers under `docker/`:
- cgroup v1 (memory and pids hierarchies mounted and writable, as for root here): memory.limit_in_bytes and
  memory.memsw.limit_in_bytes (memory and swap together, so no swapping past it) in the memory hierarchy, pids.max
  in the pids one. OOM kills: the `oom_kill` line of memory.oom_control.
- cgroup v2 where a subtree is delegated to us (systemd's Delegate=yes): CLAWGYM_CGROUP_PARENT then names that
  subtree (absolute, or relative to the v2 mount), with memory and pids available in it; we enable both for its
  children. memory.max, memory.swap.max 0, pids.max; OOM kills: the `oom_kill` line of memory.events.
- neither: no cgroup. detect() says why; the backend then falls back to rlimits and lists the limit as unenforced.

Joining before the command starts. The sandbox must be in its cgroup before anything untrusted runs, and moving a
process only moves that process, not what it already forked. A preexec_fn could write the pid between fork and exec,
but is unsafe in a process with threads (which web workers are). bubblewrap's own `--block-fd` is used instead: its
child, the sandbox's PID 1, waits on that pipe after building the sandbox and before it forks the command; the host
pid of that child arrives first on `--json-status-fd`. The backend then writes the pid into this cgroup's
cgroup.procs and only then releases the pipe, so the command and everything it forks start inside the cgroup.
bubblewrap's outer process stays outside: it is ours and only waits.

Removal. When run returns, the PID namespace is empty, so the cgroup is removed (rmdir). A cgroup left behind by a
process that died on the way (its pid and start time name it) is removed by the next run made under the same parent.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxError
from ..limits import Limits

PARENT_ENV = "CLAWGYM_CGROUP_PARENT"
DEFAULT_PARENT = "clawgym"
_RUN_NAME = re.compile(r"^run-(\d+)-(\d+)-[0-9a-f]+$")


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, filesystem type, options) of every cgroup filesystem."""
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as handle:
        for line in handle:
            _source, point, fstype, options, *_ = line.split()
            if fstype in ("cgroup", "cgroup2"):
                found.append((point.replace("\\040", " "), fstype, set(options.split(","))))
    return found


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot: with the pid, it names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class CgroupTree:
    """Where this host's run cgroups are made: cgroup v1 (two hierarchies) or v2 (one)."""

    version: int
    memory_parent: Path
    pids_parent: Path  # the same folder as memory_parent under v2

    def create(self, limits: Limits) -> RunCgroup:
        self.remove_stale()
        name = f"run-{os.getpid()}-{_start_time(os.getpid())}-{secrets.token_hex(4)}"
        return RunCgroup(self, name, limits)

    @property
    def parents(self) -> list[Path]:
        return (
            [self.memory_parent] if self.pids_parent == self.memory_parent else [self.memory_parent, self.pids_parent]
        )

    def remove_stale(self) -> None:
        """Remove the run cgroups of processes that are gone (a worker killed while its sandbox ran)."""
        for parent in self.parents:
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            for name in names:
                match = _RUN_NAME.match(name)
                if match and _start_time(int(match[1])) != int(match[2]):
                    try:
                        os.rmdir(parent / name)
                    except OSError:
                        pass  # still holds processes: a later sweep will try again


class RunCgroup:
    """One run's cgroup, with its limits written. add() the sandbox's PID 1, read oom_kills(), then remove()."""

    def __init__(self, tree: CgroupTree, name: str, limits: Limits) -> None:
        self.tree = tree
        self.paths = [parent / name for parent in tree.parents]
        self.memory = tree.memory_parent / name
        self.pids = tree.pids_parent / name
        try:
            for path in self.paths:
                path.mkdir()
            if tree.version == 1:
                _write(self.memory / "memory.limit_in_bytes", str(limits.memory_bytes))
                # Memory plus swap, where swap accounting is on; must come after the memory limit (it may not be lower).
                if (self.memory / "memory.memsw.limit_in_bytes").exists():
                    _write(self.memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            else:
                _write(self.memory / "memory.max", str(limits.memory_bytes))
                if (self.memory / "memory.swap.max").exists():
                    _write(self.memory / "memory.swap.max", "0")
            _write(self.pids / "pids.max", str(limits.max_processes))
        except OSError as exc:
            self.remove()
            raise SandboxError(f"could not set up the sandbox's cgroup {self.memory}: {exc}") from exc

    def add(self, pid: int) -> None:
        for path in self.paths:
            _write(path / "cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this cgroup."""
        stats = self.memory / ("memory.oom_control" if self.tree.version == 1 else "memory.events")
        try:
            for line in stats.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """rmdir, retried briefly: the last exiting tasks of a namespace may still be leaving the cgroup."""
        for path in self.paths:
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.01)
            # Still there: remove_stale() of a later run takes it once this process is gone.


def detect() -> tuple[CgroupTree | None, str]:
    """The cgroup tree runs can use here, or None and why not (a sentence)."""
    parent = os.environ.get(PARENT_ENV) or DEFAULT_PARENT
    try:
        mounts = _mounts()
    except OSError as exc:
        return None, f"cannot read the cgroup mounts: {exc}"
    v1 = {}
    for point, fstype, options in mounts:
        for controller in ("memory", "pids"):
            if fstype == "cgroup" and controller in options:
                v1[controller] = Path(point)
    if len(v1) == 2 and not os.path.isabs(parent):
        paths = {controller: root / parent for controller, root in v1.items()}
        try:
            for path in paths.values():
                path.mkdir(exist_ok=True)
                if not os.access(path, os.W_OK):
                    raise PermissionError(errno.EACCES, "not writable", str(path))
        except OSError as exc:
            return None, f"the cgroup v1 memory and pids hierarchies are not writable here ({exc})"
        return CgroupTree(1, paths["memory"], paths["pids"]), ""
    v2 = [Path(point) for point, fstype, _ in mounts if fstype == "cgroup2"]
    if not v2:
        return None, "no cgroup v1 memory and pids hierarchies and no cgroup v2 mount"
    path = Path(parent) if os.path.isabs(parent) else v2[0] / parent
    try:
        available = (path / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(available):
            return None, f"cgroup v2 {path} does not offer the memory and pids controllers (delegate them to it)"
        enabled = (path / "cgroup.subtree_control").read_text().split()
        missing = [f"+{c}" for c in ("memory", "pids") if c not in enabled]
        if missing:
            _write(path / "cgroup.subtree_control", " ".join(missing))
    except OSError as exc:
        return None, f"no delegated cgroup v2 subtree at {path} (set {PARENT_ENV} to one; {exc})"
    return CgroupTree(2, path, path), ""
