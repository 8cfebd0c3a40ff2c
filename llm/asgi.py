"""The proxy's fast lane in the ASGI app: /proxy/ requests skip the site's middleware and request signals.

The proxy's routes are still Django async views resolved by the site's URLconf. Left out:
- the middleware stack: none of it applies (the token in the URL is the only credential: no session, CSRF, login
  or static files), and WhiteNoise's middleware is sync-only, which costs every request two thread hops;
- the per-request ThreadSensitiveContext (a new thread per request in flight) and the request_started /
  request_finished signals, whose receivers only reset the query log and close the requesting thread's database
  connections: the proxy does its database work on its own small pool (llm.recording.in_db), so here they would
  only add thread hops, all queued on one shared thread.
Measured with bench/proxy_bench.py: at 64 concurrent streams the added time to first token fell from ~0.5 s
(the whole Django stack) to tens of ms on a 2-core machine.
Added: the token is checked before the body is read (401 without reading a byte of it), and the session found is
handed to the view in the scope, so it is still looked up once per request. Body sizes are bounded around the
whole app (lib.body_limits).
"""

import asyncio

from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.urls import set_script_prefix
from django.utils.log import log_response

from .proxy import SESSION_SCOPE_KEY, token_refusal
from .recording import usable_session

PREFIX = "/proxy/"


class ProxyASGIHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)

    async def __call__(self, scope, receive, send):
        await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send):
        """Django's ASGIHandler.handle without the request signals (see the module's docstring), and the session's
        token checked before a byte of the body is read: without a usable token nobody can make us read one."""
        session = await usable_session(token_in_path(scope["path"]))
        if session is None:
            set_script_prefix(get_script_prefix(scope))
            refusal = token_refusal()
            # As Django logs a refused request (the path's token is masked by llm.apps.RedactProxyTokens).
            log_response("%s: %s", refusal.reason_phrase, scope["path"], response=refusal)
            await self.send_response(refusal, send)
            return
        scope[SESSION_SCOPE_KEY] = session  # the view takes it from here (one lookup per request)
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            set_script_prefix(get_script_prefix(scope))
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                await self.send_response(error_response, send)
                return
            respond = asyncio.create_task(self._respond(request, send))
            disconnect = asyncio.create_task(self.listen_for_disconnect(receive))
            # Whichever ends first: a caller that hangs up cancels the response (the view's stream sees it).
            await asyncio.wait([respond, disconnect], return_when=asyncio.FIRST_COMPLETED)
            for task in (respond, disconnect):
                if not task.done():
                    task.cancel()
            for outcome in await asyncio.gather(respond, disconnect, return_exceptions=True):
                if isinstance(outcome, Exception) and not isinstance(outcome, RequestAborted):
                    raise outcome
        finally:
            body_file.close()

    async def _respond(self, request, send):
        response = await self.run_get_response(request)
        try:
            await self.send_response(response, send)
        except asyncio.CancelledError:
            pass  # the caller went away while we were sending


def token_in_path(path: str) -> str:
    """/proxy/<token>/v1/... -> <token>"""
    return path[len(PREFIX) :].split("/", 1)[0]


def with_proxy_lane(site_app):
    """Wrap the site's ASGI app: HTTP requests under /proxy/ go to the lean handler, the rest to the site."""
    proxy_app = ProxyASGIHandler()

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await proxy_app(scope, receive, send)
        else:
            await site_app(scope, receive, send)

    return application
