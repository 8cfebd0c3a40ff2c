"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import os
import pickle


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds `marker` (a sandbox's PID namespace is visible from here)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue  # exited while we looked
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def as_unprivileged(function):
    """Call `function` in a forked child that runs as uid 65534 when we are root, and return what it returned.

    CI runs as root; developers do not. This is how the tests reach the code paths of a non-root caller.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            payload = pickle.dumps(("returned", function()))
        except BaseException as exc:
            payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    outcome, value = pickle.loads(data)
    if outcome == "raised":
        raise AssertionError(f"in the unprivileged child: {value}")
    return value
