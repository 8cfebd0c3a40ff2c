"""A model server's processes on the machine that runs it: the command that starts its authenticating front with the
backend behind it, the backend's socket in a folder of its own, the start and its health check, and whether a
recorded pid is that server here, to kill its process group. training_jobs.serving records the rows (ModelServer)
and calls these; nothing here writes to the database.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from django.conf import settings

from .child_env import child_env
from .models import ModelServer
from .serve_backends import ServingError, serve_backend

BACKEND_SOCKET = "backend.sock"  # the model server's own socket, in a 0700 folder of its own: only its front opens it


def served_command(backend: str, path: str, name: str, bind: str, port: int, socket_path: str, cwd: Path) -> list[str]:
    """The front on bind:port, starting the backend on the Unix socket `socket_path` in `cwd` as its child. The key
    goes in the environment (launch), never on a command line every local user can read."""
    backend_command = serve_backend(backend).command(path, name, socket_path)
    return [
        sys.executable,
        "-m",
        "training.serving_front",
        "--host",
        bind,
        "--port",
        str(port),
        "--upstream-socket",
        socket_path,
        "--max-body-bytes",
        str(max_request_bytes()),
        "--cwd",
        str(cwd),
        "--",
        *backend_command,
    ]


def backend_socket() -> str:
    """A new socket path for a model server, in a folder of its own made for it alone (mode 0700, the worker's user):
    no other user of the machine may open the socket, and it is reachable from no network. The front removes it when
    it exits. Short, under the system's temporary folder: a Unix socket's path holds at most 107 bytes."""
    return str(Path(tempfile.mkdtemp(prefix="clawgym-serve-")) / BACKEND_SOCKET)


def remove_backend_socket(command: list[str]) -> None:
    """A stopped server's socket folder (backend_socket): its front removes it as it exits, this covers a front
    killed before it could."""
    if "--upstream-socket" not in (command or []):
        return
    folder = Path(command[command.index("--upstream-socket") + 1]).parent
    if folder.name.startswith("clawgym-serve-"):
        shutil.rmtree(folder, ignore_errors=True)


def max_request_bytes() -> int:
    return settings.CLAWGYM_SERVE_MAX_REQUEST_BYTES


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def launch(
    command: list[str],
    base_url: str,
    log_path: Path,
    *,
    timeout: float,
    key: str,
    backend: str = "transformers",
    on_start=None,
) -> int:
    """Start the server (its front) in a session of its own; its pid once GET /v1/models answers with the key
    (ServingError otherwise). The environment is the allow-listed one, with the key for the front (and for vLLM,
    whose --api-key guards its /v1 routes again). A thread of this process waits for it: whoever stops it (the idle
    sweep in another worker process, the command), it is reaped here and leaves no zombie behind."""
    extra = serve_backend(backend).env(key)  # a backend that checks the key again behind the front gets it too
    env = child_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1", CLAWGYM_FRONT_KEY=key, **extra)
    with log_path.open("ab") as log:
        # In the project's folder (`-m training.serving_front`); the front starts its backend in the folder it is given.
        proc = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    threading.Thread(target=proc.wait, name=f"reap-server-{proc.pid}", daemon=True).start()
    if on_start:
        on_start(proc.pid)
    deadline = time.monotonic() + timeout
    while not answers(base_url, key):
        if proc.poll() is not None or time.monotonic() > deadline:
            why = f"exited with {proc.returncode}" if proc.poll() is not None else f"did not answer in {timeout:g} s"
            kill_group(proc.pid)
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise ServingError(f"the server `{' '.join(command[:4])} …` {why} (log: {log_path})\n{tail}")
        time.sleep(0.5)
    return proc.pid


def answers(base_url: str, key: str) -> bool:
    request = urllib.request.Request(f"{base_url}/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200 and "data" in json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return False


def owned_pid(server: ModelServer) -> int | None:
    """The server's pid if that process runs here and is the server started (its command line holds the program
    it ran, its front's module, and the port): a pid recorded on another machine, or reused since, is never
    signalled."""
    if not server.pid or not alive(server.pid):
        return None
    try:
        args = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    wanted = [str(server.port).encode()] + [arg.encode() for arg in server.command[2:3]]
    return server.pid if all(arg in args for arg in wanted) else None


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our own child, exited (and now reaped)
    except ChildProcessError:
        pass  # not a child of this process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state != "Z":
        return True
    # A zombie serves nothing: exited, not reaped yet by the process that started it (a worker's job).
    try:
        reaped = os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return False  # another process's child
    return not reaped  # ours: reaped now, or its other threads still exiting (then waitpid cannot reap it yet)


def kill_group(pid: int | None) -> None:
    if not pid:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(50):
            if not alive(pid):
                return
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
