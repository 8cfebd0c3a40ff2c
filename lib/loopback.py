"""Servers on loopback for tests and benches: an ASGI app under uvicorn on a free port, in a daemon thread.

    server, thread, port = serve_in_thread("llm.asgi:application")
    ...
    stop_server(server, thread)

No Django model is imported here, so a bench may use it before Django's apps are ready.
"""

import asyncio
import socket
import threading
import time

READY_TIMEOUT = 20.0  # s: how long serve_in_thread waits for uvicorn to listen


def _bound_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def serve_in_thread(app, host: str = "127.0.0.1", **config):
    """Run `app` (an ASGI app or "module:attr") under uvicorn on a free port of `host` in a daemon thread.

    Returns (server, thread, port); stop it with stop_server(server, thread).
    """
    import uvicorn

    sock = _bound_socket(host)
    options = {"log_level": "warning", "access_log": False, "lifespan": "off", "http": "h11", "loop": "asyncio"}
    server = uvicorn.Server(uvicorn.Config(app, **(options | config)))
    server.install_signal_handlers = lambda: None  # the main thread keeps its own handlers
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn serving {app!r} did not start within {READY_TIMEOUT} s")
        time.sleep(0.01)
    return server, thread, sock.getsockname()[1]


def stop_server(server, thread) -> None:
    if server is None:
        return
    server.should_exit = True
    thread.join(timeout=10)
