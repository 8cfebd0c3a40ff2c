"""Resource limits for one sandboxed command.

The defaults suit a checker: a minute of wall and CPU time, 1 GiB of memory in total, 1 GiB more in the workspace.
Agents get larger ones from their caller.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    # Wall clock measured by the parent; on expiry everything in the sandbox is killed (status "timeout").
    wall_seconds: float = 60.0
    # RLIMIT_CPU of each process: SIGXCPU at the soft limit, SIGKILL one second later (status "timeout").
    cpu_seconds: int = 60
    # Memory of everything the command runs, together (its processes, and what it keeps in the sandbox's tmpfs):
    # a cgroup's limit, memory and swap (status "oom" from the cgroup's OOM-kill count). Where the backend has no
    # cgroup it falls back to an RLIMIT_AS of this size on each process, and the run lists it in
    # ExecResult.unenforced.
    memory_bytes: int = 1 * GiB
    # RLIMIT_AS of each process on top of the total; None: none where a cgroup bounds the total. Address space is
    # more than memory in use: node (V8) reserves ranges up front and will not start under a few GiB of it.
    address_space_bytes: int | None = None
    # Processes and threads in the sandbox, together: a pids cgroup; without one, RLIMIT_NPROC in the sandbox's
    # own user namespace (which, since Linux 5.14, counts only the sandbox's processes too).
    max_processes: int = 256
    # RLIMIT_FSIZE: no single file written may grow past this.
    max_file_bytes: int = 64 * MiB
    # How much the workspace may grow during the run: the sandbox sees it on a filesystem of its current size plus
    # this (status "disk_full" when that filesystem is full at the end). Where the backend cannot make one, only
    # max_file_bytes and the wall clock bound it, and the run lists disk_bytes in ExecResult.unenforced.
    disk_bytes: int = 1 * GiB
    # stdout and stderr are each captured up to this; more on either kills the run (status "output_limit").
    max_output_bytes: int = 1 * MiB
    # Size of each private tmpfs (/tmp, /root, /dev/shm). Their pages count towards memory_bytes too.
    tmpfs_bytes: int = 64 * MiB
    # RLIMIT_NOFILE: bounds open files, and with them memory held in unlinked or memfd files.
    max_open_files: int = 1024

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name == "address_space_bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{field.name} must be a positive number, got {value!r}")
        if self.cpu_seconds != int(self.cpu_seconds):
            raise ValueError(f"Limits.cpu_seconds must be whole seconds, got {self.cpu_seconds!r}")
