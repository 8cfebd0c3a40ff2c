"""Watch one started child: read stdout and stderr with caps, enforce the wall clock, reap it.

Shared by the bubblewrap and process backends. One thread, one selector: the child's pipes and a pidfd (readable
once the child exits), so nothing is polled and nothing is read past the caps into memory.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import SandboxError
from ..limits import Limits
from ..result import Status

_CHUNK = 64 * 1024
# After the child is gone (or killed), how long orphaned writers may keep a pipe open before we stop reading.
_DRAIN_SECONDS = 2.0
# How long a killed child may take to disappear before we give up and report it.
_REAP_SECONDS = 10.0


@dataclass
class Capture:
    limit: int
    data: bytearray = field(default_factory=bytearray)  # the first `limit` bytes
    total: int = 0  # every byte seen, kept or not

    def feed(self, chunk: bytes) -> bool:
        """Keep what fits under the limit; True once the stream has gone past it."""
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)
        return self.total > self.limit

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class Supervised:
    stdout: Capture
    stderr: Capture
    returncode: int  # shell convention: 128+N for death by signal N
    killed_for: Status | None
    duration: float
    cpu_seconds: float


def supervise(
    proc: subprocess.Popen,
    limits: Limits,
    kill: Callable[[], None],
    *,
    started: float,
    after_exit: Callable[[], None] = lambda: None,
    extra_readers: dict[int, Callable[[bytes], None]] | None = None,
) -> Supervised:
    """Run the loop until the child has exited and its pipes are drained.

    kill: stops everything the command started; called on the wall clock or output limit, may be called twice.
    after_exit: called once the child has exited on its own (the process backend kills leftovers there).
    extra_readers: further fds to read (bubblewrap's status pipe), each chunk handed to its callback.
    """
    stdout = Capture(limits.max_output_bytes)
    stderr = Capture(limits.max_output_bytes)
    deadline = started + limits.wall_seconds
    pidfd = os.pidfd_open(proc.pid)
    selector = selectors.DefaultSelector()
    readers: dict[int, Callable[[bytes], None]] = dict(extra_readers or {})
    captures = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
    for fd in [*captures, *readers]:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    selector.register(pidfd, selectors.EVENT_READ)
    killed_for: Status | None = None
    exit_status: int | None = None
    exited_at = reap_by = drain_by = 0.0
    cpu = 0.0

    def stop(reason: Status) -> None:
        nonlocal killed_for, reap_by
        killed_for = reason
        reap_by = time.monotonic() + _REAP_SECONDS
        kill()

    try:
        while True:
            now = time.monotonic()
            if exit_status is not None:  # exited: drain what is left in the pipes, for a short while
                pipes_open = any(key.fd != pidfd for key in selector.get_map().values())
                if not pipes_open or now >= drain_by:
                    break
                until = drain_by
            elif killed_for is None:  # running
                if now >= deadline:
                    stop(Status.TIMEOUT)
                    continue
                until = deadline
            else:  # killed, waiting for it to be gone
                if now >= reap_by:
                    raise SandboxError(f"sandboxed process {proc.pid} did not exit {_REAP_SECONDS:g} s after SIGKILL")
                until = reap_by
            for key, _ in selector.select(timeout=max(until - now, 0.0)):
                fd = key.fd
                if fd == pidfd:
                    selector.unregister(pidfd)
                    _, exit_status, rusage = os.wait4(proc.pid, 0)
                    proc.returncode = os.waitstatus_to_exitcode(exit_status)
                    exited_at = time.monotonic()
                    drain_by = exited_at + _DRAIN_SECONDS
                    cpu = rusage.ru_utime + rusage.ru_stime
                    if killed_for is None:
                        after_exit()
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(fd)
                elif fd in readers:
                    readers[fd](chunk)
                elif captures[fd].feed(chunk) and killed_for is None and exit_status is None:
                    stop(Status.OUTPUT_LIMIT)
    finally:
        selector.close()
        os.close(pidfd)
        if exit_status is None:  # only on an exception: never leave a child behind
            kill()
            proc.wait()
    returncode = proc.returncode
    return Supervised(
        stdout=stdout,
        stderr=stderr,
        returncode=128 - returncode if returncode < 0 else returncode,
        killed_for=killed_for,
        duration=exited_at - started,
        cpu_seconds=cpu,
    )
