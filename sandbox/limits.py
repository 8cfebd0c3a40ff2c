"""Resource limits for one sandboxed command.

The defaults suit a checker: a minute of wall and CPU time, 1 GiB of memory. Agents get larger ones from their caller.
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
    # RLIMIT_AS of each process (address space, so shared and anonymous mappings count too); docker: the cgroup.
    # Address space is more than memory in use: node (V8) reserves ranges up front and will not start under 1 GiB
    # (checked: node 20 needs 2 GiB), so agents running node need a larger value.
    memory_bytes: int = 1 * GiB
    # RLIMIT_NPROC inside the sandbox's own user namespace, so it counts only the sandbox's processes.
    max_processes: int = 256
    # RLIMIT_FSIZE: no single file written may grow past this.
    max_file_bytes: int = 64 * MiB
    # stdout and stderr are each captured up to this; more on either kills the run (status "output_limit").
    max_output_bytes: int = 1 * MiB
    # Size of each private tmpfs (/tmp, /root, /dev/shm): tmpfs lives in memory, so it must be bounded too.
    tmpfs_bytes: int = 64 * MiB
    # RLIMIT_NOFILE: bounds open files, and with them memory held in unlinked or memfd files.
    max_open_files: int = 1024

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{field.name} must be a positive number, got {value!r}")
        if self.cpu_seconds != int(self.cpu_seconds):
            raise ValueError(f"Limits.cpu_seconds must be whole seconds, got {self.cpu_seconds!r}")
