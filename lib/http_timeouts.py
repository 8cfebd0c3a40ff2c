"""uvicorn's HTTP protocols with a request-header deadline: `--http lib.http_timeouts:HttpToolsProtocol`.

uvicorn closes a keep-alive connection that stays idle after a response (--timeout-keep-alive), but nothing else:
a connection that is opened and never sends a request, or one that sends its request line and headers a byte at a
time (slow-loris), is held open forever, and enough of them use up the server's sockets. These subclasses give the
request's head CLAWGYM_HEADER_TIMEOUT_SECONDS from the moment the connection opens, or the previous response ended,
until its headers are complete; then the connection is closed. A body (a large upload, a long stream) is not bound
by it: bodies are bounded in size by lib.body_limits.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol as _H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpToolsProtocol

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0


def _header_timeout() -> float:
    # Read when a connection opens: by then uvicorn has loaded the app, so Django's settings are configured.
    from django.conf import settings

    return float(getattr(settings, "CLAWGYM_HEADER_TIMEOUT_SECONDS", DEFAULT_HEADER_TIMEOUT_SECONDS))


class _HeaderDeadline:
    """Mixed into a uvicorn protocol: both set `self.cycle` when a request's headers are complete."""

    _header_timer: asyncio.TimerHandle | None = None
    _cycle_when_armed = None

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._cycle_when_armed = self.cycle
        self._header_timer = self.loop.call_later(_header_timeout(), self._header_deadline_passed)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_deadline_passed(self) -> None:
        self._header_timer = None
        if self.cycle is self._cycle_when_armed and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request headers did not arrive in time")
            self.transport.close()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is not None and self.cycle is not self._cycle_when_armed:
            self._disarm_header_deadline()  # this request's headers are in

    def on_response_complete(self) -> None:
        # The next request on this connection gets the same deadline. Armed before uvicorn looks at pipelined data:
        # a request whose headers are already here makes a new cycle, and the deadline then lets it be.
        self._arm_header_deadline()
        super().on_response_complete()

    def connection_lost(self, exc) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)


class H11Protocol(_HeaderDeadline, _H11Protocol):
    pass


class HttpToolsProtocol(_HeaderDeadline, _HttpToolsProtocol):
    pass
