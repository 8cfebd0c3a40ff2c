"""A model call's request and response as its page and the API show them, without loading a large one whole.

A body is the call's stored JSON (its text: characters, which are bytes on SQLite, where it is stored ASCII-escaped).
Up to CLAWGYM_MODEL_CALL_INLINE_BYTES of it is shown in full; past that only its first that many characters, cut
by the database (a substring of the column), and the rest on request: the body's own URL streams it in pieces of
PIECE characters (one query each), or gives one range of it (`?offset=&length=`). So a viewer opening a call
whose answer ran to the limit costs the web process a page, not the body.

    calls = with_heads(ModelCall.objects.all())     # bodies deferred; each call has its heads and lengths
    body = body_of(call, "response")               # Body(part, length, head, inline): .value when inline

A request stored as a difference from an earlier call (llm.request_chain) has no whole text in the database: its
text is its rebuilt request as JSON (Python's), made in this process; such requests are the size of one prompt.
"""

import json
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast, Length, Substr

from .models import ModelCall

PARTS = ("request", "response")
PIECE = 1024 * 1024  # characters read at a time when a whole body is sent
MAX_RANGE = 4 * 1024 * 1024  # the most characters one `?length=` may ask for


COLUMNS = {"request": "request_part", "response": "response"}


def _text(part: str):
    return Cast(COLUMNS[part], TextField())


def _chained_text(call_id: int) -> str | None:
    """The JSON text of a call's request rebuilt from its chain, or None when it is stored whole (or no such call)."""
    call = ModelCall.objects.filter(pk=call_id, request_base__isnull=False).only("pk", "request_base").first()
    return json.dumps(call.request, ensure_ascii=False) if call is not None else None


def inline_limit() -> int:
    return settings.CLAWGYM_MODEL_CALL_INLINE_BYTES


def with_heads(queryset):
    """The calls without their bodies; each with `<part>_length` (characters of its JSON text, None: no body) and
    `<part>_head` (its first inline_limit() characters), both computed by the database."""
    limit = inline_limit()
    annotations = {}
    for part in PARTS:
        annotations[f"{part}_length"] = Length(_text(part))
        annotations[f"{part}_head"] = Substr(_text(part), 1, limit)
    return queryset.defer(*COLUMNS.values()).annotate(**annotations)


@dataclass
class Body:
    part: str
    length: int | None  # characters of its JSON text; None when the call has none (no response)
    head: str  # its first inline_limit() characters ("" when there is none)
    inline: bool  # the head is the whole body

    @property
    def value(self):
        """The body itself, when it is small enough to be shown whole (None otherwise, or when there is none)."""
        return json.loads(self.head) if self.inline and self.length is not None else None

    @property
    def pretty(self) -> str:
        """For a page: the whole body indented when it is small, else its head as stored."""
        if self.length is None:
            return ""
        return json.dumps(self.value, indent=2, ensure_ascii=False) if self.inline else self.head


def body_of(call: ModelCall, part: str) -> Body:
    """The body of a call from with_heads()."""
    if part == "request" and call.request_base_id is not None:
        text = json.dumps(call.request, ensure_ascii=False)
        return Body(part, len(text), text[: inline_limit()], len(text) <= inline_limit())
    length = getattr(call, f"{part}_length")
    head = getattr(call, f"{part}_head") or ""
    return Body(part, length, head, length is not None and length <= inline_limit())


def body_range(call_id: int, part: str, offset: int, length: int) -> tuple[int | None, str] | None:
    """(the body's length, its `length` characters from `offset`), or None when there is no such call."""
    if part == "request" and (text := _chained_text(call_id)) is not None:
        return len(text), text[offset : offset + length]
    row = (
        ModelCall.objects.filter(pk=call_id)
        .annotate(total=Length(_text(part)), piece=Substr(_text(part), offset + 1, length))
        .values_list("total", "piece")
        .first()
    )
    return (row[0], row[1] or "") if row is not None else None


def _piece(call_id: int, part: str, offset: int) -> str:
    if part == "request" and (text := _chained_text(call_id)) is not None:
        return text[offset : offset + PIECE]
    piece = ModelCall.objects.filter(pk=call_id).values_list(Substr(_text(part), offset + 1, PIECE), flat=True).first()
    return piece or ""


async def pieces(call_id: int, part: str):
    """The whole body, PIECE characters at a time (an async iterator: under ASGI Django streams it as it comes,
    where a plain iterator would be read whole first)."""
    offset = 0
    while True:
        piece = await sync_to_async(_piece)(call_id, part, offset)
        if not piece:
            return
        yield piece.encode()
        offset += len(piece)
        if len(piece) < PIECE:
            return
