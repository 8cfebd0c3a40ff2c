"""The recording proxy's database side: the session a token opens, and the record of each proxied call.

llm.proxy forwards a call; what it reads and writes in the database is here, run on the proxy's own small pool of
database threads (in_db), whose connections stay open: the event loop never waits on a query, and a request in
flight costs no new thread or connection.
"""

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from . import metrics
from .models import ModelCall, ModelCallTokens, ProxySession
from .sse import usage_of
from .tokens import TokenAsk, TokenCapture

log = logging.getLogger(__name__)

_db_pool: ThreadPoolExecutor | None = None  # created on first use, in the serving process
_db_pool_threads = 0
_pending_records: set[asyncio.Task] = set()  # records written after a caller went away; kept from the GC


def _db_executor() -> ThreadPoolExecutor:
    global _db_pool, _db_pool_threads
    if _db_pool is None:
        _db_pool_threads = settings.CLAWGYM_PROXY_DB_THREADS
        _db_pool = ThreadPoolExecutor(_db_pool_threads, thread_name_prefix="proxy-db")
    return _db_pool


def close_db_pool() -> None:
    """Close the pool's database connections and its threads (a test server's teardown; a process exit does it too)."""
    global _db_pool
    pool, _db_pool = _db_pool, None
    if pool is None:
        return
    threads = _db_pool_threads
    # A connection can only be closed by its own thread: one task per thread, held at a barrier until all run.
    barrier = threading.Barrier(threads)

    def close():
        barrier.wait(timeout=10)
        connection.close()

    for future in [pool.submit(close) for _ in range(threads)]:
        future.result()
    pool.shutdown()


def _with_connection(fn, *args):
    """Run fn on this pool thread's own, long-lived connection; reconnect once if the database dropped it."""
    try:
        return fn(*args)
    except (InterfaceError, OperationalError):
        connection.close()
        return fn(*args)


async def in_db(fn, *args):
    """Run a small ORM function on the proxy's database threads.

    Not Django's per-request thread: connecting per request (CONN_MAX_AGE=0) and a new thread per request in
    flight would cost more than the proxy's whole forwarding work. These threads keep their connections open.
    """
    return await sync_to_async(_with_connection, thread_sensitive=False, executor=_db_executor())(fn, *args)


def _find_session(token: str) -> ProxySession | None:
    if not token:
        return None
    return ProxySession.objects.usable().by_token(token).select_related("endpoint").first()


async def usable_session(token: str) -> ProxySession | None:
    """The open, unexpired session of this token (compared by its hash), or None."""
    return await in_db(_find_session, token)


class ProxiedCall:
    """What one proxied call has learned so far; turned into a ModelCall row at the end."""

    def __init__(self, session: ProxySession, api: str, body: dict, started: float, tokens: TokenAsk | None = None):
        self.session, self.api, self.body, self.started = session, api, body, started
        self.stream = bool(body.get("stream"))
        self.status_code: int | None = None
        self.response = None
        self.error = ""
        self.first_chunk_at: float | None = None
        self.tokens = tokens  # a training call: what was asked for the agent, and the tokens collected
        self.capture = TokenCapture() if tokens is not None else None
        self.sampling_changes: list[dict] = []  # what holding it to its run's sampling changed (llm.sampling)

    def token_row(self) -> dict | None:
        """The call's exact tokens, for a training call that was answered in full; None otherwise."""
        if self.capture is None or self.error or self.status_code != 200:
            return None
        return self.capture.row()

    def row(self) -> dict:
        endpoint = self.session.endpoint
        input_tokens, output_tokens = usage_of(self.api, self.response)
        return {
            "endpoint": endpoint,
            "endpoint_name": endpoint.name,
            "model": endpoint.model,
            "purpose": "proxy",
            "subject": self.session.subject,
            "session": self.session,
            "api": self.api,
            "stream": self.stream,
            "request": self.body,
            "response": self.response,
            "sampling_changes": self.sampling_changes,
            "status_code": self.status_code,
            "error": self.error,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "latency_ms": (time.perf_counter() - self.started) * 1000,
            "ttft_ms": (self.first_chunk_at - self.started) * 1000 if self.first_chunk_at else None,
            "cost": endpoint.cost(input_tokens, output_tokens),
        }

    async def record(self) -> bool:
        """Write the call's row; whether it was written. An answer whose record was not written is not passed on."""
        try:
            row = self.row()
            await in_db(write_call, row, self.token_row())
        except Exception:
            log.exception("could not record a proxied call of session %s", self.session.pk)
            return False
        metrics.count_call(row)
        return True

    def record_detached(self) -> None:
        """Write the record in a task of its own: this request is being torn down."""
        task = asyncio.ensure_future(self.record())
        _pending_records.add(task)
        task.add_done_callback(_pending_records.discard)


def write_call(row: dict, tokens: dict | None = None) -> None:
    """Store a call, its request as a difference from the session's latest calls (llm.request_chain), like its tokens.

    A training call's tokens are written in the call's transaction, so the call is never seen without them. Any other
    call is one INSERT after reads that need no transaction (the rows compared with are never changed, and a base
    deleted meanwhile fails the insert): under SQLite a transaction here would hold the database's one write lock
    through those reads and the comparison, and the concurrent streams' records would queue behind it."""
    if tokens is None:
        ModelCall.objects.record(**row)
        return
    with transaction.atomic():
        call = ModelCall.objects.record(**row)
        ModelCallTokens.objects.record(call, **tokens)


def response_recorded(session_id: int, response_id: str) -> bool:
    return ModelCall.objects.filter(session_id=session_id, response__id=response_id).exists()
