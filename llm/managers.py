"""The managers of the LLM gateway's call records: each stores what a call repeats of an earlier call of its session
as a reference to it, and reads it back whole.

- ModelCall.objects.record(request=…) stores a call's request as a difference from a recent call of its session
  (llm.request_chain), with one INSERT compiled once (the proxy writes a row before each call it forwards);
  request_links and fill_requests read chains back, in one query for many calls.
- ModelCallTokens.objects.record(…) stores a call's prompt ids as the longest prefix shared with an earlier row of its
  session plus the rest (llm.token_chain).
"""

import functools

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.models.sql import InsertQuery

from lib import nulsafe

from . import request_chain, token_chain


class ModelCallQuerySet(models.QuerySet):
    def totals_by(self, field: str):
        """Rows of {field, calls, errors, input_tokens, output_tokens, cost}, largest cost first."""
        return (
            self.order_by()
            .values(field)
            .annotate(
                calls=models.Count("id"),
                errors=models.Count("id", filter=~models.Q(error="")),
                input_tokens=models.Sum("input_tokens"),
                output_tokens=models.Sum("output_tokens"),
                cost=models.Sum("cost"),
            )
            .order_by("-cost", field)
        )

    def with_requests(self) -> list[models.Model]:
        """These calls, fetched, with their whole requests rebuilt: their chains read in one query, each call of a
        chain rebuilt once (see `ModelCall.request`). A list: filter and order before."""
        calls = list(self)
        fill_requests(calls)
        return calls


class ModelCallManager(models.Manager.from_queryset(ModelCallQuerySet)):
    def record(self, *, requests: request_chain.RequestCache | None = None, **row):
        """Create a call (`request=` its whole request), its request stored as a difference from the latest calls of
        its session when that saves enough (llm.request_chain): in the caller's transaction, among the calls it can
        see. Written by one INSERT (insert_call): no save signals (none are connected to ModelCall).

        With `requests` (the proxy's RequestCache) the latest calls it holds are compared as held, only the others'
        chains are read back, and this call's request is kept there once committed: the caller hands `request` over
        and never changes it after."""
        call = self.model(**row)
        request = call.request
        depth = 1  # of this call's chain
        if call.session_id is not None and isinstance(request, dict):
            bases = self._bases(call.session_id, call.api, requests)
            whole = {pk: held for pk, (held, _) in bases.items()}
            try:
                base, difference = request_chain.best_difference(request, whole, call.request_chars or 0)
            except (ValueError, RecursionError):  # a request json cannot compare (nested too deep): stored whole
                base, difference = None, None
            if base is not None:
                call.request_base_id = base
                call.request_shared = difference.shared
                call.request_inherited = difference.inherited
                call.request_part = difference.part
                depth = bases[base][1] + 1
        insert_call(call, self.db)
        if requests is not None and call.session_id is not None and isinstance(request, dict):
            self._keep(
                requests,
                call.pk,
                _stamp(call.session_id, call.api, call.created_at, call.request_chars),
                request,
                depth,
            )
        return call

    def _bases(self, session_id: int, api: str, requests) -> dict[int, tuple[dict, int]]:
        """{call id: (its whole request, its chain's depth)} of the latest calls of a session's `api` that a new call
        may take as its base: a chain shorter than MAX_DEPTH that rebuilds. Those `requests` holds are taken from it."""
        bases: dict[int, tuple[dict, int]] = {}
        stamps: dict[int, tuple] = {}
        if requests is None:
            candidates, links = latest_request_links(session_id, api, using=self.db)
        else:
            for pk, stamp in latest_calls(session_id, api, using=self.db):
                held = requests.get(pk, stamp)
                if held is None:
                    stamps[pk] = stamp
                elif held[1] < request_chain.MAX_DEPTH:
                    bases[pk] = held
            candidates, links = list(stamps), request_links(stamps, using=self.db)
        known: dict[int, dict] = {}
        for pk in candidates:
            try:
                depth = request_chain.depth(links, pk)
                if depth < request_chain.MAX_DEPTH:
                    bases[pk] = (request_chain.rebuild(links, pk, known, copy=False), depth)
            except request_chain.BrokenChain:
                continue  # never a base to rely on (its own readers report it)
            if pk in stamps and depth < request_chain.MAX_DEPTH:
                self._keep(requests, pk, stamps[pk], bases[pk][0], depth)
        return bases

    def _keep(self, requests: request_chain.RequestCache, pk: int, stamp: tuple, request: dict, depth: int) -> None:
        """Keep a call's request in `requests` once the caller's transaction commits (a row rolled back is never held)."""
        if stamp[-1] is not None:  # its length: unknown for a row recorded before it was kept
            keep = functools.partial(requests.put, pk, stamp, request, depth, stamp[-1])
            transaction.on_commit(keep, using=self.db)


def _stamp(session_id: int, api: str, created_at, request_chars: int | None) -> tuple:
    """What tells a call's row from any other row that could have had its id (RequestCache)."""
    return (session_id, str(api), created_at, request_chars)


def insert_call(call, using=None) -> None:
    """INSERT a new call's row, as `call.save(force_insert=True)` would, with a statement compiled once per database:
    the ORM compiles it again on every save, half the CPU of recording one of bench/proxy_bench.py's calls."""
    using = using or DEFAULT_DB_ALIAS
    statement = _insert_statement(type(call), using)
    connection = connections[using]
    params = [field.get_db_prep_save(field.pre_save(call, True), connection=connection) for field in statement.fields]
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(statement.sql, params + list(statement.returning_params))
        if connection.features.can_return_columns_from_insert:
            values = connection.ops.fetch_returned_insert_columns(cursor, statement.returning_params)
        else:
            values = [connection.ops.last_insert_id(cursor, call._meta.db_table, call._meta.pk.column)]
    for value, field in zip(values, statement.returning, strict=False):
        setattr(call, field.attname, value)
    call._state.adding, call._state.db = False, using


class _InsertStatement:
    def __init__(self, model, alias: str):
        meta = model._meta
        self.fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
        self.returning = meta.db_returning_fields
        query = InsertQuery(model)
        query.insert_values(self.fields, [model()])
        compiler = query.get_compiler(alias)
        compiler.returning_fields = self.returning
        [(self.sql, params)] = compiler.as_sql()
        self.returning_params = tuple(getattr(compiler, "returning_params", ()))
        if len(params) != len(self.fields) + len(self.returning_params):
            raise ValueError(f"{meta.label}: an INSERT whose values are not one placeholder a field")


@functools.cache
def _insert_statement(model, alias: str) -> _InsertStatement:
    return _InsertStatement(model, alias)


def update_call(pk: int, values: dict, using=None) -> int:
    """Set `values` ({name of a field that is no relation: value}) on call `pk`, as
    `ModelCall.objects.filter(pk=pk).update(**values)` would (the rows matched), with a statement compiled once per
    database and set of fields: the proxy adds every answer so."""
    using = using or DEFAULT_DB_ALIAS
    connection = connections[using]
    sql, fields = _update_statement(using, tuple(values))
    params = [field.get_db_prep_save(values[field.name], connection=connection) for field in fields]
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, [*params, pk])
        return cursor.rowcount


@functools.cache
def _update_statement(alias: str, names: tuple[str, ...]) -> tuple[str, list]:
    meta = apps.get_model("llm", "ModelCall")._meta
    quote = connections[alias].ops.quote_name
    fields = [meta.get_field(name) for name in names]
    if any(field.is_relation for field in fields):
        raise ValueError("update_call sets fields that are no relation")
    columns = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    return f"UPDATE {quote(meta.db_table)} SET {columns} WHERE {quote(meta.pk.column)} = %s", fields


def request_links(pks, using=None) -> dict[int, request_chain.Link]:
    """The request chains of calls `pks`: every call of them, back to their roots, read in one query (a recursive
    CTE; UNION, not UNION ALL, so a forged loop ends the recursion and request_chain reports it)."""
    pks = list(pks)
    if not pks:
        return {}
    marks = ", ".join(["%s"] * len(pks))
    rows = _chain_rows(using, f"SELECT id FROM {{table}} WHERE id IN ({marks})", pks)
    return {link.pk: link for link, _ in rows}


def latest_calls(session_id: int, api: str, using=None) -> list[tuple[int, tuple]]:
    """(id, stamp) of the latest CANDIDATES calls of a session's `api`, newest first: what a new call's request is
    compared with, when a RequestCache may hold them (ModelCallManager.record)."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    meta = apps.get_model("llm", "ModelCall")._meta
    created = meta.get_field("created_at").get_col(meta.db_table)
    converters = connection.ops.get_db_converters(created) + created.get_db_converters(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, created_at, request_chars FROM {connection.ops.quote_name(meta.db_table)}"
            f" WHERE session_id = %s AND api = %s ORDER BY id DESC LIMIT {request_chain.CANDIDATES}",
            [session_id, api],
        )
        rows = cursor.fetchall()
    latest = []
    for pk, created_at, request_chars in rows:
        for convert in converters:
            created_at = convert(created_at, created, connection)
        latest.append((pk, _stamp(session_id, api, created_at, request_chars)))
    return latest


def latest_request_links(session_id: int, api: str, using=None) -> tuple[list[int], dict[int, request_chain.Link]]:
    """(the latest CANDIDATES calls of a session's `api`, newest first; their request chains), in one query: what a
    new call's request is compared with (ModelCallManager.record)."""
    latest = (
        f"SELECT id FROM {{table}} WHERE session_id = %s AND api = %s ORDER BY id DESC LIMIT {request_chain.CANDIDATES}"
    )
    rows = _chain_rows(using, latest, [session_id, api])
    return sorted((link.pk for link, seed in rows if seed), reverse=True), {link.pk: link for link, _ in rows}


def _chain_rows(using, seeds: str, params: list) -> list[tuple[request_chain.Link, bool]]:
    """(link, whether it is one of the seeds) of every call of the chains of the calls `seeds` (a SELECT of ids, its
    table written {table}) selects."""
    connection = connections[using or "default"]
    table = connection.ops.quote_name(apps.get_model("llm", "ModelCall")._meta.db_table)
    with connection.cursor() as cursor:  # plain rows: a model instance a row cost as much as the rebuild
        cursor.execute(
            f"WITH RECURSIVE seed(id) AS ({seeds.format(table=table)}),"
            f" chain(id, base) AS (SELECT id, request_base_id FROM {table} WHERE id IN (SELECT id FROM seed)"
            f" UNION SELECT t.id, t.request_base_id FROM {table} t JOIN chain ON t.id = chain.base)"
            " SELECT id, request_base_id, request_shared, request_inherited, request_part,"
            " CASE WHEN id IN (SELECT id FROM seed) THEN 1 ELSE 0 END"
            f" FROM {table} WHERE id IN (SELECT id FROM chain)",
            params,
        )
        rows = cursor.fetchall()
    return [
        (request_chain.Link(pk, base, shared, list(_json(inherited) or []), _json(part)), bool(seed))
        for pk, base, shared, inherited, part, seed in rows
    ]


def _json(value):
    """A JSON column's value from a plain cursor: its text on SQLite (and with Django's psycopg loaders), decoded, its
    strings as the NUL-safe fields store them read back (lib.nulsafe)."""
    return nulsafe.loads(value) if isinstance(value, str | bytes) else nulsafe.unescape_json(value)


def fill_requests(calls) -> None:
    """Rebuild the whole request of each of `calls` (ModelCall instances) at once: what `call.request` then reads."""
    chained = [call for call in calls if call.request_base_id is not None and "_request" not in call.__dict__]
    if not chained:
        return
    links = request_links([call.pk for call in chained], using=chained[0]._state.db)
    known: dict[int, dict] = {}
    for call in sorted(chained, key=lambda call: call.pk):
        call._request = request_chain.rebuild(links, call.pk, known)


class ModelCallTokensManager(models.Manager):
    def record(self, call, prompt_token_ids, completion_token_ids, completion_logprobs, exact=True):
        """Store a call's tokens (in the transaction that creates the call): its prompt as a reference to the earlier
        row of its session sharing the longest prefix of ids, plus the rest (llm.token_chain)."""
        prompt = list(prompt_token_ids)
        base, shared = self._base_for(call, prompt)
        return self.create(
            call=call,
            prompt_base_id=base,
            prompt_base_length=shared,
            prompt_suffix_ids=prompt[shared:],
            prompt_length=len(prompt),
            completion_token_ids=completion_token_ids,
            completion_logprobs=completion_logprobs,
            exact=exact,
        )

    def _base_for(self, call, prompt: list[int]) -> tuple[int | None, int]:
        """(base row, ids shared) for a new prompt, or (None, 0). Candidates are tried longest possible share first
        and only while one could share more than the best so far: usually the previous call alone is rebuilt."""
        if call.session_id is None or not prompt:
            return None, 0
        # The session's rows without their prompt ids (completions are short): enough to order the candidates.
        heads = {
            pk: (base, length, completion)
            for pk, base, length, completion in self.filter(call__session_id=call.session_id).values_list(
                "pk", "prompt_base_id", "prompt_length", "completion_token_ids"
            )
        }
        bound = {pk: min(len(prompt), length + len(completion)) for pk, (_, length, completion) in heads.items()}
        links: dict[int, token_chain.Link] = {}
        best, best_shared = None, 0
        for pk in sorted(heads, key=lambda pk: (bound[pk], pk), reverse=True):
            if bound[pk] <= best_shared:
                break
            chain = [pk]
            while (base := heads[chain[-1]][0]) is not None and base in heads and base not in chain:
                chain.append(base)
            if heads[chain[-1]][0] is not None:
                continue  # its chain leaves the session (or loops): not a base to rely on
            if missing := [p for p in chain if p not in links]:
                for p, base_length, suffix in self.filter(pk__in=missing).values_list(
                    "pk", "prompt_base_length", "prompt_suffix_ids"
                ):
                    base, length, completion = heads[p]
                    links[p] = token_chain.Link(p, base, base_length, suffix, length, completion)
            try:
                shared = token_chain.shared_length(token_chain.sequence(links, pk), prompt)
            except token_chain.BrokenChain:
                continue
            if shared > best_shared:
                best, best_shared = pk, shared
        return (best, best_shared) if token_chain.worth_a_base(best_shared, len(prompt)) else (None, 0)
