"""Request bodies are bounded before they are read (issue 10, item 15): anyone could make the server spool a 1 GiB
body to disk before the 401 on the proxy, /login/ and /api/auth/token/.

The attacker tests talk raw HTTP to the real ASGI app under uvicorn (as scripts/run.sh serves it): a chunked body
that never ends is offered and the test counts what the server let it send before answering."""

import asyncio
import select
import socket

import pytest

from lib.body_limits import BodyLimit

GIB = 1024 * 1024 * 1024
CHUNK = 64 * 1024
# What the kernel's socket buffers and uvicorn's own read-ahead can hold on loopback, far below the 1 GiB offered.
BUFFERED_AT_MOST = 32 * 1024 * 1024


def _offer_chunked(port: int, path: str, *, headers: str = "", total: int = GIB) -> tuple[int, bytes]:
    """Send a chunked POST of up to `total` bytes until the server answers or hangs up; (bytes sent, the answer)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setblocking(True)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Transfer-Encoding: chunked\r\n{headers}\r\n"
    )
    sock.sendall(head.encode())
    chunk = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
    sent = 0
    answer = b""
    try:
        while sent < total:
            readable, writable, _ = select.select([sock], [sock], [], 30)
            if readable:
                break  # the server has answered (or closed): stop offering
            if not writable:
                raise AssertionError("the server neither read the body nor answered for 30 s")
            sock.sendall(chunk)
            sent += CHUNK
        answer = _read_answer(sock)
    except (BrokenPipeError, ConnectionResetError):
        answer = answer or _read_answer(sock)
    finally:
        sock.close()
    return sent, answer


def _read_answer(sock) -> bytes:
    sock.settimeout(30)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def _declared(port: int, path: str, length: int, headers: str = "") -> bytes:
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{headers}\r\n"
    )
    sock.sendall(head.encode())  # and not one byte of the body
    try:
        return _read_answer(sock)
    finally:
        sock.close()


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("path", ["/login/", "/api/auth/token/", "/tasks/import/", "/api/imports/"])
def test_an_endless_body_without_a_credential_is_cut_early(live_server_asgi, path):
    sent, answer = _offer_chunked(live_server_asgi.port, path)
    assert _status(answer) == 413
    assert sent < BUFFERED_AT_MOST  # of the 1 GiB offered


def test_an_endless_body_to_the_proxy_without_a_token_is_refused_before_it_is_read(live_server_asgi):
    sent, answer = _offer_chunked(live_server_asgi.port, "/proxy/no-such-token/v1/chat/completions")
    assert _status(answer) == 401
    assert sent < BUFFERED_AT_MOST


def test_a_signed_in_request_is_cut_at_the_route_limit(live_server_asgi, viewer, settings):
    from rest_framework.authtoken.models import Token

    token = Token.objects.get_or_create(user=viewer)[0].key
    sent, answer = _offer_chunked(
        live_server_asgi.port,
        "/api/tasks/",
        headers=f"Authorization: Token {token}\r\n",
        total=settings.CLAWGYM_MAX_REQUEST_BYTES + 8 * 1024 * 1024,
    )
    assert _status(answer) == 413
    assert sent <= settings.CLAWGYM_MAX_REQUEST_BYTES + BUFFERED_AT_MOST


@pytest.mark.parametrize(
    "path", ["/login/", "/api/auth/token/", "/proxy/no-such-token/v1/chat/completions", "/tasks/import/"]
)
def test_a_huge_declared_length_gets_413_at_once(live_server_asgi, path):
    assert _status(_declared(live_server_asgi.port, path, 10 * GIB)) == 413


def test_ordinary_requests_still_pass(live_server_asgi):
    import httpx

    page = httpx.get(f"{live_server_asgi.url}/login/")
    assert page.status_code == 200
    wrong = httpx.post(f"{live_server_asgi.url}/api/auth/token/", json={"username": "x", "password": "y"})
    assert wrong.status_code == 400  # read and answered, not cut


# --- the middleware alone -------------------------------------------------------------------------------------


class _EchoLength:
    """Reads the whole body (as Django does) and answers its length."""

    def __init__(self):
        self.read = 0

    async def __call__(self, scope, receive, send):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            self.read += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(self.read).encode()})


def _call(app, path, chunks, headers=()):
    scope = {"type": "http", "path": path, "headers": list(headers)}
    pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    offered = []
    sent = []

    async def receive():
        message = pending.pop(0)
        offered.append(message)
        return message

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], len(offered)


def test_the_longest_prefix_wins_and_anonymous_requests_get_the_small_limit():
    inner = _EchoLength()
    app = BodyLimit(
        inner, default=100, by_prefix={"/api/": 50, "/api/imports/": 1000}, anonymous=10, anonymous_exempt=("/proxy/",)
    )
    cookie = [(b"cookie", b"csrftoken=a; sessionid=b")]
    assert app.limit_for({"path": "/api/imports/", "headers": cookie}) == 1000
    assert app.limit_for({"path": "/api/tasks/", "headers": cookie}) == 50
    assert app.limit_for({"path": "/tasks/", "headers": [(b"authorization", b"Token t")]}) == 100
    assert app.limit_for({"path": "/api/imports/", "headers": [(b"cookie", b"csrftoken=a")]}) == 10
    assert app.limit_for({"path": "/proxy/t/v1/models", "headers": []}) == 100


def test_a_chunked_body_stops_being_read_once_over_the_limit():
    inner = _EchoLength()
    app = BodyLimit(inner, default=100)
    status, offered = _call(app, "/x", [b"a" * 60] * 50)
    assert status == 413 and offered == 2 and inner.read == 60  # the second chunk passed the limit: no more read
    status, _ = _call(BodyLimit(_EchoLength(), default=100), "/x", [b"a" * 50, b"a" * 50])
    assert status == 200


def test_a_declared_length_over_the_limit_is_refused_unread():
    inner = _EchoLength()
    status, offered = _call(BodyLimit(inner, default=100), "/x", [b"a"], headers=[(b"content-length", b"101")])
    assert status == 413 and offered == 0
