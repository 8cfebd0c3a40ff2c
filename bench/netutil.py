"""Loopback helpers shared by the benchmark scripts (each runs as `python bench/NAME.py`, so this folder is on sys.path)."""

import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(port: int, env: dict, cwd, **popen) -> subprocess.Popen:
    """The web app (clawgym_site.asgi) under uvicorn on 127.0.0.1:`port`, quiet; wait for it with wait_for_port.
    `popen`: more Popen arguments (stderr=a log file)."""
    argv = [sys.executable, "-m", "uvicorn", "clawgym_site.asgi:application", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    return subprocess.Popen(argv, cwd=cwd, env=env, **popen)


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {timeout} s")
