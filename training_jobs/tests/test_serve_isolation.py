"""A served model answers only through its front (issue 34, item 4): `transformers serve` behind the front listened on
a loopback port that any local process could find (`ss -ltn`, the front's command line) and answered
/v1/chat/completions, `POST /load_model {"model": PATH}` and `POST /reset` without any key. Every backend now listens
on a Unix socket in a folder of its own that only the worker's user may open, and on no port: the only port a served
model opens is its front's, which answers nothing without the server's key.

The live test enumerates every listening TCP socket of the server's processes (the front and everything it started,
one session: /proc/PID/fd against /proc/net/tcp and tcp6) and asks each, without the key, for what the backend used
to give anyone."""

import errno
import json
import os
import socket
import stat
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from llm.models import ModelEndpoint
from training_jobs.models import ModelServer
from training_jobs.server_processes import backend_socket, served_command
from training_jobs.serving import stop_idle_servers

NOBODY = 65534
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
PROBES = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", {"model": "base-tiny", "messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/load_model", {"model": "/"}),
    ("POST", "/reset", {}),
    ("GET", "/health", None),
]


def _session(pid: int) -> int:
    stat_line = Path(f"/proc/{pid}/stat").read_text()
    return int(stat_line[stat_line.rindex(")") + 2 :].split()[3])  # after "pid (comm) ": state ppid pgrp session


def server_processes(leader: int) -> list[int]:
    """The server's processes: its front (started as a session leader) and every process of that session."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _session(int(entry.name)) == leader:
                    found.append(int(entry.name))
            except (OSError, ValueError):
                continue  # gone meanwhile
    return found


def socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    return inodes


def listening_ports(inodes: set[str]) -> set[int]:
    """The TCP ports (IPv4 and IPv6) listening on a socket among `inodes`."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def listening_unix_sockets(inodes: set[str]) -> set[str]:
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[6] in inodes and int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON: listening
            paths.add(fields[7])
    return paths


def connect_as(uid: int, path: str) -> int:
    """0 when a process of user `uid` can connect to the Unix socket `path`, else the errno it got (a forked child:
    it drops to that user, tries, and exits with the outcome)."""
    child = os.fork()
    if child == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            socket.socket(socket.AF_UNIX).connect(path)
        except OSError as exc:
            code = exc.errno or 1
        except BaseException:
            code = 1
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def without_the_key(port: int, method: str, path: str, body) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_every_backend_listens_on_its_own_socket_and_no_port(tmp_path):
    socket_path, another = backend_socket(), backend_socket()
    folder = Path(socket_path).parent
    try:
        info = folder.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
        assert len(socket_path.encode()) < 108  # a Unix socket's path limit
        assert Path(another).parent != folder  # a folder per server
        for backend in ("vllm", "transformers", "batched"):
            command = served_command(backend, "/models/m", "ckpt-1-2", "0.0.0.0", 8123, socket_path, tmp_path)
            front, model_server = command[: command.index("--")], command[command.index("--") + 1 :]
            assert front[front.index("--upstream-socket") + 1] == socket_path and "--upstream" not in front
            assert (front[front.index("--host") + 1], front[front.index("--port") + 1]) == ("0.0.0.0", "8123")
            assert model_server[model_server.index("--uds") + 1] == socket_path, backend
            assert "--host" not in model_server and "--port" not in model_server, backend
        vllm = served_command("vllm", "/models/m", "ckpt-1-2", "127.0.0.1", 8123, socket_path, tmp_path)
        assert vllm[vllm.index("--") + 1 :][:7] == [
            "vllm",
            "serve",
            "/models/m",
            "--served-model-name",
            "ckpt-1-2",
            "--uds",
            socket_path,
        ]
    finally:
        folder.rmdir()
        Path(another).parent.rmdir()


@pytest.mark.once
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("backend", ["transformers", "batched"])
def test_a_local_process_without_the_key_gets_nothing_from_any_port_the_server_opened(
    training_dir, tiny_model_path, backend
):
    call_command("base_models", "add", "tiny", "--path", tiny_model_path, stdout=StringIO())
    call_command("base_models", "serve", "tiny", "--backend", backend, "--json", stdout=StringIO())
    server = ModelServer.objects.get(endpoint__name="base-tiny")
    socket_path = server.command[server.command.index("--upstream-socket") + 1]
    try:
        processes = server_processes(server.pid)
        assert len(processes) >= 2  # the front and its backend (and whatever the backend started)
        inodes = socket_inodes(processes)
        assert listening_ports(inodes) == {server.port}  # the front's, and no other
        for port in listening_ports(inodes):
            for method, path, body in PROBES:
                status, answer = without_the_key(port, method, path, body)
                assert status == 401, (port, method, path, status, answer[:300])
                assert b"base-tiny" not in answer and b"choices" not in answer
        # The backend's socket, in a folder only this user may open (the front opens it for the server's callers).
        assert listening_unix_sockets(inodes) == {socket_path}
        folder = Path(socket_path).parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.geteuid()
        if os.geteuid() == 0:  # as root (CI's container): a process of another user cannot even reach the socket
            assert connect_as(NOBODY, socket_path) == errno.EACCES
        # An endpoint registered before served_at existed, or set to name another server's key, is not sent a key
        # until the sweep ties it to its own server again.
        ModelEndpoint.objects.filter(pk=server.endpoint_id).update(served_at="", api_key_env="CLAWGYM_KEY_SERVED_S999")
        assert ModelEndpoint.objects.get(pk=server.endpoint_id).key_state() == "not allowed"
        assert stop_idle_servers(idle_seconds=3600) == []
        server.refresh_from_db()
        assert server.endpoint.served_at == server.endpoint.base_url and server.endpoint.key_state() == "set"
        assert server.endpoint.api_key_env == server.endpoint.served_key_env == f"CLAWGYM_KEY_SERVED_S{server.pk}"
        # With the key, the front answers (so the 401s above are the key's doing, not a dead server).
        key = server.endpoint.api_key()
        request = urllib.request.Request(
            f"{server.endpoint.base_url}/models", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert json.loads(answer.read())["data"][0]["id"] == "base-tiny"
    finally:
        call_command("base_models", "stop", "tiny", stdout=StringIO())
    assert not Path(socket_path).parent.exists()  # the front removed the socket and its folder
