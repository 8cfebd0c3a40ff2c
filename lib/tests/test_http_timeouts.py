"""Idle and slow-loris connections are closed (issue 10, item 18): uvicorn held a connection that never sent a
request, or sent its headers a byte at a time, open forever. The app runs under uvicorn with the project's
protocols (lib.http_timeouts), both of them: httptools (what scripts/run.sh gets) and h11."""

import socket
import time

import pytest

from lib.http_timeouts import H11Protocol, HttpToolsProtocol
from lib.loopback import serve_in_thread, stop_server

WAIT = 20.0  # how long the test is willing to wait for the close; the deadline under test is far shorter


async def hello(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(params=[HttpToolsProtocol, H11Protocol], ids=["httptools", "h11"])
def server(request, settings):
    settings.CLAWGYM_HEADER_TIMEOUT_SECONDS = 0.5
    srv, thread, port = serve_in_thread(hello, http=request.param)
    yield port
    stop_server(srv, thread)


def _closed_by_server(sock, dribble: bytes = b"") -> bool:
    """Keep the connection busy (a byte of `dribble` every 50 ms) until the server closes it or WAIT passes."""
    sock.settimeout(0.05)
    deadline = time.monotonic() + WAIT
    sent = 0
    while time.monotonic() < deadline:
        try:
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            pass
        except ConnectionResetError:
            return True
        if dribble:
            try:
                sock.sendall(dribble[sent % len(dribble) :][:1])
            except (BrokenPipeError, ConnectionResetError):
                return True
            sent += 1
    return False


def test_a_connection_that_never_speaks_is_closed(server):
    with socket.create_connection(("127.0.0.1", server)) as sock:
        assert _closed_by_server(sock)


def test_headers_sent_a_byte_at_a_time_are_cut_off(server):
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert _closed_by_server(sock, dribble=b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")


def test_a_prompt_request_is_answered_and_the_next_one_gets_its_own_deadline(server):
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.settimeout(WAIT)
        for _ in range(2):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b"ok"):
                answer += sock.recv(1024)
            assert answer.startswith(b"HTTP/1.1 200")
        assert _closed_by_server(sock)  # then idle: closed
