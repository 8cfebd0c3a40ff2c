"""A request the upstream drops before answering (a keep-alive connection it was closing) is sent once more on a
new connection; a second failure is the recorded 502 as before. bench/load_bench.py found the race: the proxy kept
idle connections longer than uvicorn's 5 s keep-alive."""

import json
import socket
import threading

import httpx
import pytest

from llm.models import ModelCall, ModelEndpoint
from llm.services import open_proxy_session, proxy_base_url

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "second try"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class DroppingUpstream:
    """A raw HTTP server on loopback that closes the first `drops` connections after reading their request, then
    answers ANSWER."""

    def __init__(self, drops: int):
        self.drops = drops
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                while len(body) < length:
                    body += conn.recv(65536)
                if self.connections <= self.drops:
                    continue  # closed without a byte of answer
                payload = json.dumps(ANSWER).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
                )

    def close(self):
        self.sock.close()


@pytest.fixture
def upstream_dropping(request):
    server = DroppingUpstream(drops=request.param)
    yield server
    server.close()


def _session(upstream):
    endpoint = ModelEndpoint.objects.create(
        name="dropping", base_url=upstream.base_url, model="m", roles=["agent"], timeout_seconds=10
    )
    return open_proxy_session(endpoint, subject="rollout:1")


@pytest.mark.parametrize("upstream_dropping", [1], indirect=True)
def test_a_request_dropped_before_any_answer_is_sent_once_more(live_server_asgi, upstream_dropping):
    session = _session(upstream_dropping)
    response = httpx.post(
        f"{proxy_base_url(session)}/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "second try"
    assert upstream_dropping.connections == 2
    (call,) = ModelCall.objects.filter(session=session)
    assert call.status_code == 200 and call.output_tokens == 2


@pytest.mark.parametrize("upstream_dropping", [2], indirect=True)
def test_a_second_drop_is_the_recorded_502(live_server_asgi, upstream_dropping):
    session = _session(upstream_dropping)
    response = httpx.post(f"{proxy_base_url(session)}/chat/completions", json={"messages": []}, timeout=20)
    assert response.status_code == 502
    assert upstream_dropping.connections == 2  # one retry, not more
    (call,) = ModelCall.objects.filter(session=session)
    assert call.status_code == 502 and "unreachable" in call.error
