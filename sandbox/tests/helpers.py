"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import os


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
