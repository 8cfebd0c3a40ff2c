"""Request body limits for the whole ASGI app, enforced before anything reads the body.

Django's ASGI handler reads a request's whole body (spooling it to a temporary file) before any view, middleware or
DATA_UPLOAD_MAX_MEMORY_SIZE check runs, so without this anyone could make the server write gigabytes to disk before
being told 401. This middleware wraps the app (clawgym_site.asgi) and, for every HTTP request:
- answers 413 at once, reading nothing, when the declared Content-Length is over the path's limit;
- counts the bytes it hands on (a chunked body declares no length) and, once they pass the limit, stops: the app
  sees the client as gone (http.disconnect, which Django turns into RequestAborted) and the client gets 413.

The limit is the longest matching path prefix's in `by_prefix` (the import upload routes take archives; the proxy
has its own), else `default`; requests that carry no credential at all (no session cookie, no Authorization header)
get `anonymous` at most, since the only thing they may post is a login form. The front proxy should refuse large
bodies first (nginx `client_max_body_size`, see the README's deployment notes); this is the app's own floor.
"""

from __future__ import annotations

import json


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value
    return None


class BodyLimit:
    def __init__(
        self,
        app,
        *,
        default: int,
        by_prefix: dict[str, int] | None = None,
        anonymous: int | None = None,
        session_cookie: str = "sessionid",
        anonymous_exempt: tuple[str, ...] = (),
    ):
        self.app = app
        self.default = default
        # Longest prefix first, so /api/imports/ wins over /api/.
        self.by_prefix = sorted((by_prefix or {}).items(), key=lambda item: -len(item[0]))
        self.anonymous = anonymous
        self.session_cookie = session_cookie.encode("latin-1") + b"="
        self.anonymous_exempt = anonymous_exempt  # paths whose credential is not a cookie or header (the proxy)

    def limit_for(self, scope) -> int:
        path = scope.get("path", "")
        limit = next((bytes_ for prefix, bytes_ in self.by_prefix if path.startswith(prefix)), self.default)
        if (
            self.anonymous is not None
            and not path.startswith(self.anonymous_exempt)
            and not self._has_credential(scope)
        ):
            limit = min(limit, self.anonymous)
        return limit

    def _has_credential(self, scope) -> bool:
        if _header(scope, b"authorization"):
            return True
        cookie = _header(scope, b"cookie") or b""
        return self.session_cookie in cookie

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_for(scope)
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > limit
            except ValueError:
                too_large = False  # the server refuses a malformed length before we are called
            if too_large:
                return await _refuse(send, limit)
        received = 0
        over = False
        started = False

        async def limited_receive():
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Stop here: the rest is never read, and the app sees a client that went away.
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, tracking_send)
        if over and not started:
            await _refuse(send, limit)


async def _refuse(send, limit: int) -> None:
    body = json.dumps(
        {
            "error": {
                "message": f"request body over this route's limit of {limit} bytes",
                "type": "request_too_large",
                "code": 413,
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            # Close: the unread rest of the body must not be taken for the next request.
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
