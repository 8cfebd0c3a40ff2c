"""How a finished command's status and reason are decided, the registry of backends, and Limits validation."""

from __future__ import annotations

import pytest

from sandbox import BACKENDS, Limits, SandboxError, Status, get_backend
from sandbox.backends.bwrap import BwrapBackend
from sandbox.result import classify

LIMITS = Limits(wall_seconds=5, cpu_seconds=2, memory_bytes=1 << 28)


@pytest.mark.parametrize(
    ("kwargs", "status", "reason_part"),
    [
        ({"returncode": 0}, Status.OK, "exited 0"),
        ({"returncode": 3}, Status.ERROR, "exit code 3"),
        ({"returncode": 127}, Status.ERROR, "command not found"),
        ({"returncode": None, "killed_for": Status.TIMEOUT}, Status.TIMEOUT, "wall-clock limit of 5 s"),
        ({"returncode": 137, "killed_for": Status.OUTPUT_LIMIT}, Status.OUTPUT_LIMIT, "output went past"),
        ({"returncode": 128 + 24}, Status.TIMEOUT, "CPU-time limit of 2 s reached (SIGXCPU)"),
        ({"returncode": 137, "cpu_seconds": 2.5}, Status.TIMEOUT, "CPU-time limit"),
        ({"returncode": 137, "cpu_seconds": 0.1}, Status.KILLED, "killed by SIGKILL"),
        ({"returncode": 139}, Status.KILLED, "SIGSEGV"),
        ({"returncode": 128 + 25}, Status.KILLED, "file-size limit"),
        ({"returncode": 1, "stderr": "Traceback...\nMemoryError\n"}, Status.OOM, "memory limit of 268435456"),
        ({"returncode": 1, "stderr": "OSError: [Errno 12] Cannot allocate memory"}, Status.OOM, "memory limit"),
        ({"returncode": 134, "stderr": "FATAL ERROR: JavaScript heap out of memory"}, Status.OOM, "memory limit"),
        ({"returncode": 137, "oom_killed": True}, Status.OOM, "killed by the kernel"),
        ({"returncode": 1, "stderr": "OSError: [Errno 27] File too large"}, Status.ERROR, "file-size limit"),
        ({"returncode": 0, "stderr": "MemoryError"}, Status.OK, "exited 0"),  # a clean exit is never oom
        # Under a cgroup (no address-space limit) only the cgroup's OOM count means oom, not what stderr says.
        ({"returncode": 1, "stderr": "MemoryError", "address_space_limited": False}, Status.ERROR, "exit code 1"),
        ({"returncode": 0, "oom_killed": True}, Status.OOM, "killed by the kernel"),
        ({"returncode": 1, "disk_full": True}, Status.DISK_FULL, "may grow by 1073741824 bytes"),
        ({"returncode": 0, "disk_full": True}, Status.DISK_FULL, "the workspace is full"),
        ({"returncode": None, "killed_for": Status.TIMEOUT, "disk_full": True}, Status.TIMEOUT, "wall-clock"),
    ],
)
def test_classify(kwargs, status, reason_part):
    args = {"killed_for": None, "stderr": "", "limits": LIMITS} | kwargs
    got_status, reason = classify(**args)
    assert got_status is status
    assert reason_part in reason


def test_get_backend_by_name():
    assert set(BACKENDS) == {"bwrap", "docker", "process"}
    assert isinstance(get_backend(), BwrapBackend)
    assert get_backend("process").isolated is False
    assert get_backend("docker", image="python:3.12-slim").image == "python:3.12-slim"


def test_unknown_backend_fails_loudly():
    with pytest.raises(SandboxError, match="unknown sandbox backend 'firejail'; known: bwrap, docker, process"):
        get_backend("firejail")


def test_bwrap_never_runs_as_root():
    with pytest.raises(SandboxError, match="never runs as root"):
        BwrapBackend(uid=0)


@pytest.mark.parametrize("field", ["wall_seconds", "cpu_seconds", "memory_bytes", "max_processes", "disk_bytes"])
def test_limits_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: 0})


def test_limits_defaults_suit_a_checker():
    limits = Limits()
    assert (limits.wall_seconds, limits.cpu_seconds, limits.max_processes) == (60, 60, 256)
    assert (limits.memory_bytes, limits.max_file_bytes, limits.max_output_bytes) == (1 << 30, 64 << 20, 1 << 20)
    assert (limits.address_space_bytes, limits.disk_bytes) == (None, 1 << 30)
    with pytest.raises(ValueError, match="address_space_bytes"):
        Limits(address_space_bytes=0)
    with pytest.raises(ValueError, match="whole seconds"):
        Limits(cpu_seconds=1.5)
