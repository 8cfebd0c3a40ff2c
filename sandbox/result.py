"""ExecResult: what one sandboxed command did, and how its status is decided."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from enum import StrEnum

from .limits import Limits


class Status(StrEnum):
    OK = "ok"  # exited 0
    ERROR = "error"  # exited non-zero for any other reason
    TIMEOUT = "timeout"  # wall-clock or CPU-time limit hit; everything was killed
    OOM = "oom"  # the memory limit was hit: the cgroup's OOM killer, or an address-space limit (MEMORY_PATTERNS)
    DISK_FULL = "disk_full"  # the workspace's filesystem was full when the command ended
    OUTPUT_LIMIT = "output_limit"  # stdout or stderr went past max_output_bytes; everything was killed
    KILLED = "killed"  # ended by a signal that no limit explains (kill -9 from inside, a crash, SIGXFSZ)


@dataclass(frozen=True)
class ExecResult:
    status: Status
    reason: str  # one human-readable line; never empty
    # Exit code; death by signal N reads 128+N in every backend (bubblewrap and Docker can only report it so).
    # None when the command was killed by the sandbox before it could exit on its own.
    returncode: int | None
    stdout: str  # decoded as UTF-8 (undecodable bytes replaced), at most max_output_bytes of it
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float  # wall seconds from start until the command ended
    cpu_seconds: float | None  # user+system time of all processes, where the backend can measure it
    backend: str
    isolated: bool  # False only for the `process` backend: pages must say the run was not sandboxed
    # The sandbox runtime that ran the command (sandbox.runtime_version() for bubblewrap, the image for docker):
    # what the command found installed is part of its result, so callers keep this beside it.
    runtime: str = ""
    # Limits fields this run could not enforce as documented (e.g. "memory_bytes" where no cgroup was available,
    # so it bounded each process, not their sum; "disk_bytes" where the workspace could not be given its own
    # filesystem). Empty when every limit held as documented.
    unenforced: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


# How an address-space limit hit shows itself (RLIMIT_AS, where there is no cgroup or address_space_bytes is set):
# allocation fails and the program reports it on stderr.
# Python raises MemoryError, C/C++ print strerror(ENOMEM) or bad_alloc, V8 and Go say "out of memory".
# A program that prints one of these for another reason is misread as oom; that is the accepted cost.
MEMORY_PATTERNS = re.compile(
    r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory|memory exhausted|failed to allocate",
    re.IGNORECASE,
)
_STDERR_TAIL = 4096


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(
    *,
    returncode: int | None,
    killed_for: Status | None,
    stderr: str,
    limits: Limits,
    cpu_seconds: float | None = None,
    oom_killed: bool = False,
    disk_full: bool = False,
    address_space_limited: bool = True,
) -> tuple[Status, str]:
    """Decide (status, reason). `killed_for` is set when the supervisor itself killed the run for a limit.

    oom_killed: the cgroup's OOM killer ended a process of the run. disk_full: the workspace's filesystem was full at
    the end. address_space_limited: an RLIMIT_AS was in force, so a failed allocation on stderr is read as oom.
    """
    if killed_for is Status.TIMEOUT:
        return Status.TIMEOUT, f"wall-clock limit of {limits.wall_seconds:g} s reached; all processes killed"
    if killed_for is Status.OUTPUT_LIMIT:
        return Status.OUTPUT_LIMIT, (
            f"output went past {limits.max_output_bytes} bytes on stdout or stderr; all processes killed"
        )
    if oom_killed:
        return Status.OOM, f"killed by the kernel for going past the memory limit of {limits.memory_bytes} bytes"
    if disk_full:
        return Status.DISK_FULL, f"the workspace is full: it may grow by {limits.disk_bytes} bytes in a run"
    if returncode is None:
        return Status.KILLED, "the command was killed before it exited"
    if returncode == 0:
        return Status.OK, "exited 0"
    signum = returncode - 128 if returncode > 128 else None
    # The soft CPU limit sends SIGXCPU; a process that ignores it gets SIGKILL at the hard limit a second later.
    used_cpu = cpu_seconds is not None and cpu_seconds >= limits.cpu_seconds
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and used_cpu):
        return Status.TIMEOUT, f"CPU-time limit of {limits.cpu_seconds} s reached ({signal_name(signum)})"
    if address_space_limited and MEMORY_PATTERNS.search(stderr[-_STDERR_TAIL:]):
        bound = limits.address_space_bytes or limits.memory_bytes
        return Status.OOM, f"exit code {returncode}: memory limit of {bound} bytes reached"
    if signum == signal.SIGXFSZ:
        return Status.KILLED, f"file-size limit of {limits.max_file_bytes} bytes reached (SIGXFSZ)"
    if signum is not None and 0 < signum < signal.NSIG:
        return Status.KILLED, f"exit code {returncode}: killed by {signal_name(signum)}"
    if returncode == 127:
        return Status.ERROR, "exit code 127: command not found"
    hint = "; file-size limit reached" if "File too large" in stderr[-_STDERR_TAIL:] else ""
    return Status.ERROR, f"exit code {returncode}{hint}"
