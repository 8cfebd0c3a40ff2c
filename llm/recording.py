"""The recording proxy's database side: the session a token opens, and the record of each proxied call.

llm.proxy forwards a call; what it reads and writes in the database is here, run on the proxy's own small pool of
database threads (in_db), whose connections stay open: the event loop never waits on a query, and a request in
flight costs no new thread or connection.

Before a call is forwarded its row is written (write_call): the latest calls of its session are read (their ids) and
its request is stored as a difference from one of them (llm.request_chain), compared with their requests as this
process recorded them (REQUESTS_KEPT), so their chains are read back only for calls another process recorded or that
fell out of what is kept. Its answer is then one UPDATE (answer_call).
"""

import asyncio
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections, transaction

from . import metrics
from .failures import is_answer_failure
from .managers import update_call
from .models import ModelCall, ModelCallTokens, ModelEndpoint, ProxySession, hash_token
from .request_chain import RequestCache
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


def find_session(token: str) -> ProxySession | None:
    """The open, unexpired session of this token (compared by its hash) with its endpoint, or None. For a session
    with a token limit, `tokens_spent` is what its recorded calls have used (ProxySession.tokens_used), else None.

    One query, read with a plain cursor: every proxied call starts here, and the ORM's compiling of the same
    select_related query (and then of the budget's aggregate) cost more CPU than the rest of the call's forwarding.
    The row is made into model instances as the ORM's own queries make them (each column through its field's and
    the backend's converters), and nothing is kept between calls: a session closed or an endpoint disabled a moment
    ago is seen by the next call.
    """
    if not token:
        return None
    db = connections[DEFAULT_DB_ALIAS]
    reader = _session_reader(db.alias)
    with db.cursor() as cursor:
        cursor.execute(reader.sql, [hash_token(token)])
        row = cursor.fetchone()
    if row is None:
        return None
    session = reader.sessions.instance(row[: reader.split], db)
    session.endpoint = reader.endpoints.instance(row[reader.split : -1], db)
    session.tokens_spent = row[-1]
    return session if session.is_usable else None


async def usable_session(token: str) -> ProxySession | None:
    """find_session on the proxy's database threads."""
    return await in_db(find_session, token)


class _Columns:
    """A model's columns read with a plain cursor, and the instance they make: each value through its field's and
    the backend's converters, as RawQuerySet does. The converters depend on the alias's backend and settings, not on
    the thread's own connection, so they are looked up once."""

    def __init__(self, model, alias: str):
        db = connections[alias]
        self.model, self.alias = model, alias
        self.fields = model._meta.concrete_fields
        self.names = [field.attname for field in self.fields]
        columns = [field.get_col(model._meta.db_table) for field in self.fields]
        self.converters = [
            (column, db.ops.get_db_converters(column) + column.get_db_converters(db)) for column in columns
        ]

    def select(self, table_alias: str, quote) -> list[str]:
        return [f"{table_alias}.{quote(field.column)}" for field in self.fields]

    def instance(self, values, db):
        converted = []
        for value, (column, converters) in zip(values, self.converters, strict=True):
            for convert in converters:
                value = convert(value, column, db)
            converted.append(value)
        return self.model.from_db(self.alias, self.names, converted)


class _SessionReader:
    def __init__(self, alias: str):
        quote = connections[alias].ops.quote_name
        self.sessions, self.endpoints = _Columns(ProxySession, alias), _Columns(ModelEndpoint, alias)
        self.split = len(self.sessions.fields)
        session, endpoint, call = (_column_names(model, quote) for model in (ProxySession, ModelEndpoint, ModelCall))
        # ProxySession.tokens_used, summed only for a session with a limit (the only ones the proxy holds to one).
        spent = (
            f"CASE WHEN s.{session['token_limit']} IS NULL THEN NULL ELSE"
            f" (SELECT COALESCE(SUM(c.{call['input_tokens']}), 0) + COALESCE(SUM(c.{call['output_tokens']}), 0)"
            f" + COALESCE(SUM(c.{call['held_tokens']}), 0)"
            f" FROM {quote(ModelCall._meta.db_table)} c WHERE c.{call['session']} = s.{session['id']}) END"
        )
        self.sql = (
            f"SELECT {', '.join(self.sessions.select('s', quote) + self.endpoints.select('e', quote))}, {spent}"
            f" FROM {quote(ProxySession._meta.db_table)} s"
            f" JOIN {quote(ModelEndpoint._meta.db_table)} e ON e.{endpoint['id']} = s.{session['endpoint']}"
            f" WHERE s.{session['token_hash']} = %s"
        )


def _column_names(model, quote) -> dict[str, str]:
    """{field name: its quoted column} of a model's concrete fields."""
    return {field.name: quote(field.column) for field in model._meta.concrete_fields}


@functools.cache
def _session_reader(alias: str) -> _SessionReader:
    return _SessionReader(alias)


class ProxiedCall:
    """What one proxied call has learned so far. A forwarded call's ModelCall row is written before it goes upstream
    (open: its request, the answer pending) and its answer added at the end (record); a call refused before that is
    written whole at once (record)."""

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
        self.held_tokens: int | None = None  # what its session's token limit counts it for until its usage is recorded
        self.pk: int | None = None  # its row, once open() wrote it
        self.settled = False  # its answer's record was tried (record): a row not settled is still pending

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

    async def open(self) -> bool:
        """Write the call's row before it is forwarded: its request, its answer pending (the error says so, and every
        reader that skips failed calls skips it), the tokens its session's limit counts it for meanwhile. Whether it
        was written: a call whose row was not is never forwarded."""
        row = {
            **self.row(),
            "error": ANSWER_PENDING,
            "latency_ms": None,
            "answer_state": ModelCall.AnswerState.PENDING,
            "held_tokens": self.held_tokens,
        }
        try:
            self.pk = await in_db(write_call, row)
        except Exception:
            log.exception("could not record a proxied call of session %s before forwarding it", self.session.pk)
            return False
        return True

    async def record(self) -> bool:
        """Write the call's answer into the row open() wrote (a call never forwarded: its whole row); whether it was
        written. An answer whose record was not written is not passed on, and its row is marked so."""
        self.settled = True
        try:
            row = self.row()
            if self.pk is None:
                await in_db(write_call, row, self.token_row())
            else:
                await in_db(answer_call, self.pk, row, self.token_row())
        except Exception as exc:
            log.exception("could not record a proxied call of session %s", self.session.pk)
            if self.pk is not None:
                await self._mark_unrecorded(f"{ANSWER_UNRECORDED} ({type(exc).__name__})")
            return False
        metrics.count_call(row)
        return True

    async def _mark_unrecorded(self, error: str) -> None:
        try:
            await in_db(mark_unrecorded, self.pk, error)
        except Exception:
            log.exception("could not mark proxied call #%s unrecorded: its row stays pending", self.pk)

    def record_detached(self) -> None:
        """Write the record in a task of its own: this request is being torn down."""
        task = asyncio.ensure_future(self.record())
        _pending_records.add(task)
        task.add_done_callback(_pending_records.discard)

    def abandon(self, why: str) -> None:
        """The request ended before the answer's record was tried (its caller went away, or the proxy failed): record
        what the call has, with `why`, in a task of its own."""
        if self.pk is not None and not self.settled:
            self.error = self.error or why
            self.record_detached()


# A forwarded call's error until its answer is written; a row the proxy never got to write the answer of keeps it.
ANSWER_PENDING = "no answer recorded: the call was forwarded and its answer is not written (yet)"
# The error of a call whose answer could not be written (the database refused it, or failed): withheld from the caller.
ANSWER_UNRECORDED = "its answer could not be recorded, so the proxy withheld it"
# What a call's answer changes in the row open() wrote: the rest (its request, session, sampling changes) is written.
ANSWER_FIELDS = ("status_code", "response", "error", "input_tokens", "output_tokens", "latency_ms", "ttft_ms", "cost")


# The whole requests of the calls this process recorded (or read back), bounded by their characters of JSON: what a
# session's next call is compared with, without their chains read back (llm.request_chain.RequestCache). A character
# held costs 2 to 5 bytes of memory (2.2 for OpenClaw-shaped requests), so 16M is 35-80 MB: 64 agents' latest three.
REQUESTS_KEPT_CHARS = 16_000_000
REQUESTS_KEPT = RequestCache(REQUESTS_KEPT_CHARS)


def write_call(row: dict, tokens: dict | None = None) -> int:
    """Store a call (its id), its request as a difference from the session's latest calls (llm.request_chain), like
    its tokens. `row["request"]` is kept in REQUESTS_KEPT: the caller never changes it after.

    A training call's tokens are written in the call's transaction, so the call is never seen without them. Any other
    call is one INSERT after reads that need no transaction (the rows compared with are never changed, and a base
    deleted meanwhile fails the insert): under SQLite a transaction here would hold the database's one write lock
    through those reads and the comparison, and the concurrent streams' records would queue behind it."""
    if tokens is None:
        return ModelCall.objects.record(requests=REQUESTS_KEPT, **row).pk
    with transaction.atomic():
        call = ModelCall.objects.record(requests=REQUESTS_KEPT, **row)
        ModelCallTokens.objects.record(call, **tokens)
    return call.pk


def answer_call(pk: int, row: dict, tokens: dict | None = None) -> None:
    """Add a call's answer to the row written before it was forwarded (one UPDATE; a training call's tokens in the
    same transaction). Its usage counts from now on, in place of the tokens it held. A call cut short before its usage
    came (its caller went away) or answered without any keeps counting its cap, since the upstream may have sampled up
    to it; an error, or an answer the upstream failed to deliver (llm.failures: the infrastructure's failure, not to
    be counted as the agent's spending), counts nothing."""
    answer = {name: row[name] for name in ANSWER_FIELDS}
    answer["answer_state"] = ModelCall.AnswerState.RECORDED
    usage = row["input_tokens"] is not None or row["output_tokens"] is not None
    if usage or row["status_code"] not in (None, 200) or is_answer_failure(row["error"]):
        answer["held_tokens"] = None
    if tokens is None:
        if not update_call(pk, answer):
            raise ModelCall.DoesNotExist(f"call #{pk} is gone")
        return
    with transaction.atomic():
        if not update_call(pk, answer):
            raise ModelCall.DoesNotExist(f"call #{pk} is gone")
        ModelCallTokens.objects.record(ModelCall(pk=pk, session=row["session"]), **tokens)


def mark_unrecorded(pk: int, error: str) -> None:
    """What is left to write of a call whose answer could not be: that it was not. It keeps its held tokens."""
    ModelCall.objects.filter(pk=pk, answer_state=ModelCall.AnswerState.PENDING).update(
        answer_state=ModelCall.AnswerState.UNRECORDED, error=error
    )


def response_recorded(session_id: int, response_id: str) -> bool:
    answered = ModelCall.objects.filter(session_id=session_id, answer_state=ModelCall.AnswerState.RECORDED)
    return answered.filter(response__id=response_id).exists()
