"""The host side of a sandboxed agent's only network route: a Unix socket that passes OpenAI API requests of one
rollout to the recording proxy, and nothing else.

The socket is bound into the sandbox, where a loopback forwarder (harnesses/inside/driver.py) makes it reachable at
http://127.0.0.1:PORT. Bytes are not relayed blindly: a byte-level tunnel to the web app's port would hand the agent
every route of the site (admin, API). Each request is parsed (h11) and only these pass, rewritten to the session:

    POST /v1/chat/completions   POST /v1/responses   GET /v1/models
    ->  CLAWGYM_PROXY_PUBLIC_URL/proxy/<token>/v1/...

and only with `Authorization: Bearer <token>` of this rollout (the key the harness was configured with). Anything
else is answered here (404, 401, 405, 413) and never leaves the host. Responses, streamed ones included, are passed
back chunk by chunk as they arrive.

One relay per rollout, serving on its own event loop in a thread of the process that runs the rollout.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import threading
from pathlib import Path

import h11
import httpx

log = logging.getLogger(__name__)

ALLOWED = {("POST", "/v1/chat/completions"), ("POST", "/v1/responses"), ("GET", "/v1/models")}
# Response headers that describe the hop, not the content: h11 frames the answer to the agent itself.
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "proxy-connection"}
READ_CHUNK = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
CONNECT_TIMEOUT = 10.0


class ProxyRelay:
    """Listens on `socket_path`; forwards allowed requests to `proxy_base` (…/proxy/<token>/v1)."""

    def __init__(
        self,
        socket_path: str | Path,
        proxy_base: str,
        token: str,
        *,
        max_body_bytes: int,
        read_timeout: float = 900.0,
        socket_owner: tuple[int, int] | None = None,
    ):
        self.socket_path = str(socket_path)
        self.proxy_base = proxy_base.rstrip("/")
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout
        self.socket_owner = socket_owner
        self.requests = 0  # how many requests were passed on
        self.refused: list[str] = []  # one line per request answered here
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None

    # --- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> ProxyRelay:
        # Named by its folder, never by the token: thread names end up in logs and debuggers.
        name = f"proxy-relay-{Path(self.socket_path).parent.name}"
        self._thread = threading.Thread(target=self._serve_thread, name=name, daemon=True)
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._error is not None:
            raise RuntimeError(f"the proxy relay could not listen on {self.socket_path}: {self._error}")
        if not self._ready.is_set():
            raise RuntimeError(f"the proxy relay on {self.socket_path} did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ProxyRelay:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()

    def _serve_thread(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start(), or logged when it happens later
            self._error = exc
            if self._ready.is_set():
                log.exception("the proxy relay on %s stopped", self.socket_path)
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=4)
        async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
            self._client = client
            server = await asyncio.start_unix_server(self._connection, path=self.socket_path)
            # Only the sandbox's uid may connect (connecting needs write permission on the socket file).
            os.chmod(self.socket_path, 0o600)
            if self.socket_owner:
                os.chown(self.socket_path, *self.socket_owner)
            self._ready.set()
            async with server:
                await self._stopped.wait()
                server.close()

    # --- one connection, possibly several requests (keep-alive) -------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        try:
            while True:
                request = await self._next_event(conn, reader)
                if not isinstance(request, h11.Request):
                    break
                await self._handle(conn, reader, writer, request)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    break
        except (h11.RemoteProtocolError, ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("proxy relay connection ended: %s", exc)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def _next_event(self, conn: h11.Connection, reader: asyncio.StreamReader):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(READ_CHUNK)
                conn.receive_data(data)
                continue
            return event

    async def _read_body(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bytes | None:
        """The request body, or None when it is over the limit (the rest is still read, to keep framing)."""
        body = bytearray()
        too_large = False
        while True:
            event = await self._next_event(conn, reader)
            if isinstance(event, h11.Data):
                if len(body) + len(event.data) > self.max_body_bytes:
                    too_large = True
                    body.clear()
                elif not too_large:
                    body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return None if too_large else bytes(body)
            else:
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__} in a request body")

    async def _handle(self, conn, reader, writer, request: h11.Request) -> None:
        method = request.method.decode("ascii", "replace")
        target = request.target.decode("ascii", "replace")
        path = target.split("?", 1)[0]
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        body = await self._read_body(conn, reader)
        if not any(path == allowed for _m, allowed in ALLOWED):
            return await self._refuse(
                conn,
                writer,
                404,
                f"{method} {path}: only the OpenAI API routes "
                "/v1/chat/completions, /v1/responses and /v1/models lead out of the sandbox",
            )
        if (method, path) not in ALLOWED:
            return await self._refuse(conn, writer, 405, f"{method} is not allowed on {path}")
        if not self._authorized(headers.get("authorization", "")):
            return await self._refuse(conn, writer, 401, "missing or wrong API key for this rollout")
        if body is None:
            return await self._refuse(conn, writer, 413, f"request body over {self.max_body_bytes} bytes")
        await self._forward(conn, writer, method, path, headers, body)

    def _authorized(self, authorization: str) -> bool:
        scheme, _, key = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(key.strip().encode(), self.token.encode())

    async def _forward(self, conn, writer, method: str, path: str, headers: dict, body: bytes) -> None:
        url = f"{self.proxy_base}{path[len('/v1') :]}"
        sent_headers = {
            "content-type": headers.get("content-type", "application/json"),
            "accept": headers.get("accept", "*/*"),
        }
        timeout = httpx.Timeout(self.read_timeout, connect=CONNECT_TIMEOUT)
        request = self._client.build_request(method, url, content=body or None, headers=sent_headers, timeout=timeout)
        try:
            upstream = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            return await self._refuse(conn, writer, 502, f"the recording proxy is unreachable: {type(exc).__name__}")
        self.requests += 1
        try:
            passed = [(k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in HOP_HEADERS]
            await self._send(conn, writer, h11.Response(status_code=upstream.status_code, headers=passed))
            async for chunk in upstream.aiter_raw():
                if chunk:
                    await self._send(conn, writer, h11.Data(data=chunk))
            await self._send(conn, writer, h11.EndOfMessage())
        except httpx.HTTPError as exc:
            # Headers are out: all we can do is cut the stream, as the proxy itself would.
            log.warning("proxy relay: the proxy's answer broke off: %s", exc)
            conn.send_failed()
        finally:
            await upstream.aclose()

    async def _refuse(self, conn, writer, status: int, message: str) -> None:
        self.refused.append(f"{status} {message}")
        body = json.dumps({"error": {"message": message, "type": "sandbox_relay", "code": status}}).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body)))]
        await self._send(conn, writer, h11.Response(status_code=status, headers=headers))
        await self._send(conn, writer, h11.Data(data=body))
        await self._send(conn, writer, h11.EndOfMessage())

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, event) -> None:
        data = conn.send(event)
        if data:
            writer.write(data)
            await writer.drain()
