"""Bounds on the text people and imports send: instructions, rubrics, metadata, reasons, notes, names.

Every way in (import, API, pages, commands) ends in a service, and the services check here, so one bound holds for
all of them and the refusal says what was too long, by how much, and which setting sets the limit:

    check_text(reason, "the rejection reason", setting="CLAWGYM_MAX_NOTE_BYTES")
    check_json(rubric, "the rubric", setting="CLAWGYM_MAX_RUBRIC_BYTES")
    check_chars(name, "the benchmark name", 200)        # a name stored in a CharField(max_length=200)

Text is measured in UTF-8 bytes (what is stored, sent to models and rendered); names in characters (what the
database column holds). A 6 MB instruction otherwise makes its task page slow and its diagnosis prompt huge.

Ids and other whole numbers people send end up in an integer column or a query on one, which holds at most MAX_ID:
a larger one is an OverflowError (SQLite) or a DataError (PostgreSQL), so every id field says `max_value=MAX_ID` and
every id read from a form or a query string goes through parse_id:

    ids = [pk for pk in map(parse_id, request.POST.getlist("ids")) if pk is not None]
"""

import json

from django.conf import settings


class TextRefused(ValueError):
    """A text that cannot be taken: too long (TextTooLong), not Unicode text (NotUnicode), or JSON holding a number no
    JSON column stores (NotFinite). The message says why."""


class TextTooLong(TextRefused):
    """A text over its bound. The message names the text, its size and the limit (and the setting, if any)."""


class NotUnicode(TextRefused):
    """A text holding a lone surrogate (JSON may spell one as "\\ud800"): no database or page can store it."""


class NotFinite(TextRefused):
    """JSON holding NaN or an infinite number (Python's json reads both): no JSON column can store it."""


MAX_ID = 2**63 - 1  # the largest value a BigAutoField / BigIntegerField holds (PostgreSQL bigint, SQLite INTEGER)


def parse_whole_number(value, *, least: int = 0) -> int | None:
    """`value` (text from a form, a URL or a query string) as a whole number from `least` to MAX_ID, or None.

    ASCII digits only: str.isdigit() also takes "²" and "٣", which int() refuses or reads as another number, and a
    20-digit number fits no column.
    """
    text = str(value)
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_ID)):
        return None
    number = int(text)
    return number if least <= number <= MAX_ID else None


def parse_id(value) -> int | None:
    """`value` as a database id (1 to MAX_ID), or None when it is not one."""
    return parse_whole_number(value, least=1)


def byte_limit(setting: str) -> int:
    return int(getattr(settings, setting))


def _utf8_size(text: str, what: str, *, at: bool = True) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end].encode("utf-8", "backslashreplace").decode()
        where = f" at character {exc.start:,}" if at else ""
        raise NotUnicode(f"{what} is not valid Unicode text: it holds {bad}{where}") from None


def check_text(value: str, what: str, *, setting: str) -> str:
    """`value` when its UTF-8 encoding fits the byte limit named by `setting`, else TextRefused saying why."""
    limit = byte_limit(setting)
    size = _utf8_size(value, what) if isinstance(value, str) else 0
    if size > limit:
        raise TextTooLong(f"{what} is {size:,} bytes, over the limit of {limit:,} bytes ({setting})")
    return value


def check_json(value, what: str, *, setting: str):
    """`value` when its JSON text fits the byte limit named by `setting`, else TextRefused saying why."""
    limit = byte_limit(setting)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:  # NaN or an infinity (a form's JSON field reads NaN and 1e999): no JSON column stores one
        raise NotFinite(f"{what} holds NaN or an infinite number, which JSON cannot store") from None
    size = _utf8_size(text, what, at=False)  # a place in JSON says little
    if size > limit:
        raise TextTooLong(f"{what} is {size:,} bytes as JSON, over the limit of {limit:,} bytes ({setting})")
    return value


def check_chars(value: str, what: str, limit: int) -> str:
    """`value` when it has at most `limit` characters (a name's database column), else TextTooLong."""
    if isinstance(value, str) and len(value) > limit:
        raise TextTooLong(f"{what} is {len(value):,} characters, over the limit of {limit:,}")
    return value
