"""The authenticating front of a model server: a small reverse proxy (uvicorn, httpx) that answers only requests
carrying the server's key, passes on only the OpenAI routes an endpoint needs, bounds request bodies, and streams
answers through as they come.

    python -m training.serving_front --host HOST --port PORT (--upstream-socket SOCKET | --upstream URL) \
        [--key-env CLAWGYM_FRONT_KEY] [--max-body-bytes N] [--cwd FOLDER -- COMMAND …]

The key is read from the environment variable --key-env names (never from the command line, which every local user
can read). With a COMMAND after `--`, the front starts it as its child, in its own process group (so that killing
the group stops both), and exits when it does: that is how training_jobs.serving runs a checkpoint's server, the
backend listening on a Unix socket in a folder only the worker's user may open (--upstream-socket; the front removes
the socket and its folder when it exits), the front on CLAWGYM_SERVE_HOST: the front's is the only port the server
opens. Without one, it fronts a server started by hand (the README's vLLM recipe for RL: vLLM with its dev-mode
routes on a socket, `vllm serve … --uds SOCKET`, or on loopback with --upstream, this front on the network).

Why a front at all: `transformers serve` has no key and answers `POST /load_model` (any local folder) and
`POST /reset` to anyone; vLLM's `--api-key` guards only its /v1 routes, not /tokenize, /metrics or the dev-mode
weight-transfer routes. Here anything but the routes below is a 404, even with the key; the request's own path,
query string and headers go no further (the upstream gets the route's canonical path and a few plain headers).

Needs no Django (it runs beside the model, on a gpu worker, from a subprocess).
"""

import argparse
import asyncio
import hmac
import os
import signal
import subprocess
import sys

ROUTES = {
    ("GET", "/v1/models"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("GET", "/health"),
}
DEFAULT_MAX_BODY_BYTES = 33 * 1024 * 1024  # the proxy's 32 MiB and room for the fields it adds
# Request headers passed on (the key included: vLLM started with --api-key checks it again); the rest stay here.
FORWARDED_REQUEST_HEADERS = {b"authorization", b"content-type", b"accept", b"user-agent"}
# Hop-by-hop headers of the upstream's answer, which uvicorn sets itself for the client's connection.
HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"upgrade",
    b"proxy-authenticate",
    b"te",
    b"trailer",
    b"server",
    b"date",
}
CHILD_GRACE_SECONDS = 10.0


async def _answer(send, status: int, message: str) -> None:
    import json

    body = json.dumps({"error": {"message": message, "type": "front", "code": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Front:
    """The ASGI app: key, route, body limit, then the upstream's answer streamed through."""

    def __init__(
        self, upstream: str, key: str, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, socket: str | None = None
    ):
        if not key:
            raise ValueError("the front needs a key")
        self.socket = socket  # the upstream's Unix socket: then `upstream` only names the Host header it is sent
        self.upstream = upstream.rstrip("/")
        self.expected = f"Bearer {key}".encode()
        self.max_body_bytes = int(max_body_bytes)
        self.client = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets: nothing here speaks them
            return
        headers = dict(scope["headers"])
        if not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            await _answer(send, 401, "this server answers only requests carrying its key")
            return
        route = (scope["method"], scope["path"].rstrip("/") or "/")
        if route not in ROUTES:
            await _answer(send, 404, f"no route {scope['method']} {scope['path']} here")
            return
        body = await self._body(headers, receive, send)
        if body is None:
            return
        await self._forward(route, headers, body, receive, send)

    async def _lifespan(self, receive, send):
        import httpx

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Generation takes as long as it takes (the proxy has the caller's timeout); connecting does not.
                transport = httpx.AsyncHTTPTransport(uds=self.socket) if self.socket else None
                self.client = httpx.AsyncClient(
                    transport=transport, timeout=httpx.Timeout(3600.0, connect=10.0), trust_env=False
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _body(self, headers: dict, receive, send) -> bytes | None:
        """The whole request body, or None once a 400/413 went out: a declared length over the limit is refused
        before a byte is read, a chunked one as soon as it passes the limit."""
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await _answer(send, 400, "a bad Content-Length")
                return None
            if int(declared) > self.max_body_bytes:
                await _answer(send, 413, f"request bodies here are at most {self.max_body_bytes} bytes")
                return None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _answer(send, 413, f"request bodies here are at most {self.max_body_bytes} bytes")
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _forward(self, route: tuple[str, str], headers: dict, body: bytes, receive, send) -> None:
        """The upstream's answer, streamed to the client; a client that goes away mid-answer closes the upstream
        request too (a model server stops generating for nobody)."""
        relay = asyncio.ensure_future(self._relay(route, headers, body, send))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (relay, gone):
                task.cancel()
        if relay.done() and not relay.cancelled():
            relay.result()

    async def _relay(self, route: tuple[str, str], headers: dict, body: bytes, send) -> None:
        import httpx

        method, path = route
        forwarded = {
            k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items() if k in FORWARDED_REQUEST_HEADERS
        }
        forwarded["accept-encoding"] = "identity"
        request = self.client.build_request(
            method, self.upstream + path, headers=forwarded, content=body if method == "POST" else None
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await _answer(send, 502, f"the model server does not answer yet: {type(exc).__name__}")
            return
        try:
            start = {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP],
            }
            started = False
            async for chunk in response.aiter_raw():
                if not started:
                    await send(start)
                    started = True
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not started:
                await send(start)
            await send({"type": "http.response.body", "body": b""})
        except httpx.HTTPError:
            pass  # the upstream broke off mid-answer: so does the client's answer (uvicorn closes the connection)
        finally:
            await response.aclose()


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _stop_child(child: subprocess.Popen) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=CHILD_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


async def _serve(args, key: str, child: subprocess.Popen | None) -> int:
    import uvicorn

    app = Front(args.upstream, key, max_body_bytes=args.max_body_bytes, socket=args.upstream_socket)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        server_header=False,
    )
    server = uvicorn.Server(config)

    async def watch_child():
        while child.poll() is None:
            await asyncio.sleep(0.5)
        print(f"front: the model server exited with {child.returncode}", file=sys.stderr, flush=True)
        server.should_exit = True

    watcher = asyncio.ensure_future(watch_child()) if child is not None else None
    try:
        await server.serve()
    finally:
        if watcher is not None:
            watcher.cancel()
    if child is None:
        return 0
    return child.returncode if child.poll() is not None else 0


def main(argv: list[str]) -> int:
    command = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(prog="python -m training.serving_front", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    upstream = parser.add_mutually_exclusive_group(required=True)
    upstream.add_argument("--upstream", help="the model server's URL, e.g. http://127.0.0.1:8000")
    upstream.add_argument(
        "--upstream-socket", help="the model server's Unix socket (removed, with its folder, when the front exits)"
    )
    parser.add_argument("--key-env", default="CLAWGYM_FRONT_KEY", help="the variable holding the key")
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    parser.add_argument("--cwd", default=None, help="the folder COMMAND runs in (default: this one)")
    args = parser.parse_args(argv)
    if args.upstream_socket:
        args.upstream = "http://model-server"  # the Host header the socket's server is sent
    key = os.environ.pop(args.key_env, "")
    if not key:
        parser.error(f"no key in the environment variable {args.key_env}")
    child = None
    if command:
        # The child's environment is ours without the front's key (vLLM is given its own, VLLM_API_KEY).
        child = subprocess.Popen(command, cwd=args.cwd, stdin=subprocess.DEVNULL)
    try:
        code = asyncio.run(_serve(args, key, child))
    except KeyboardInterrupt:  # SIGTERM or SIGINT (uvicorn shut down first, then raised it again)
        code = 0
    finally:
        if child is not None:
            _stop_child(child)
            if args.upstream_socket:  # only the socket of a backend this front started: a hand-started one stays
                _remove_socket(args.upstream_socket)
    return code


def _remove_socket(path: str) -> None:
    """The backend's socket and the folder made for it alone (training_jobs.server_processes.backend_socket); a
    folder holding anything else is left as it is."""
    for remove in (os.unlink, lambda p: os.rmdir(os.path.dirname(p))):
        try:
            remove(path)
        except OSError:
            pass


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # before uvicorn takes it over: the child goes too
    sys.exit(main(sys.argv[1:]))
