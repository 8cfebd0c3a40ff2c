"""JSON that a JSON column can store: parsing that refuses what the database's JSON columns refuse.

Python's json reads `NaN`, `Infinity` and `-Infinity`, and a number past the float range (`1e999`, valid JSON) as
infinity; neither PostgreSQL's jsonb nor SQLite's JSON_VALID takes them. jsonb also refuses a lone UTF-16 surrogate
(`"\\ud800"` without its pair). A proxied call whose request or answer held one could be forwarded and answered but
never recorded (so never counted, shown or trained on): the recording proxy parses both with `loads` and refuses
what it cannot store, before it goes on (llm.proxy); the REST API's parser does the same for every JSON body
(lib.api_parsers), so such a value is a 400, never a database error.

One parse does it: the non-finite literals are refused by the parser's own hooks, the text is decoded as strict UTF-8
(which refuses a surrogate written as bytes), and a lone surrogate can then only come from an escape, which is found
in the text (a pair of escapes is one character; a `\\ud800` after an escaped backslash is text).

    strict_json.loads(raw)     # the value; NotStorable (a ValueError) naming what the record cannot hold
"""

import json
import math
import re


class NotStorable(ValueError):
    """Valid (or nearly valid) JSON that a JSON column refuses; the message says what."""


def _constant(name: str):
    raise NotStorable(f"{name}, which is not a JSON number (a JSON column cannot store it)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotStorable(f"the number {text[:40]}, which is out of range (a JSON column cannot store infinity)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")  # \uD800-\uDFFF; group 1: 8-B high, C-F low
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def loads(data: bytes | bytearray | str):
    """The parsed JSON value. Raises NotStorable for NaN, ±Infinity, a number out of the float range or a lone
    surrogate; ValueError for text that is not JSON (or not UTF-8)."""
    text = bytes(data).decode("utf-8") if isinstance(data, bytes | bytearray) else data
    value = _DECODER.decode(text)
    if _lone_surrogate_escape(text):
        raise NotStorable(
            "a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), which a JSON column cannot store"
        )
    return value


def _lone_surrogate_escape(text: str) -> bool:
    """Whether JSON text (valid: every backslash is in a string) escapes a surrogate that is not half of a pair."""
    low_of_last_pair = -1
    for match in _SURROGATE_ESCAPE.finditer(text):
        at = match.start()
        if at == low_of_last_pair or _after_escaped_backslash(text, at):
            continue
        if match[1] in "89abAB" and _LOW_ESCAPE.match(text, at + 6):
            low_of_last_pair = at + 6
            continue
        return True  # a high half not followed by a low one, or a low half no high one opened
    return False


def _after_escaped_backslash(text: str, at: int) -> bool:
    """Whether the backslash at `at` is the second of an escaped pair (an odd number of backslashes before it)."""
    start = at
    while start and text[start - 1] == "\\":
        start -= 1
    return (at - start) % 2 == 1
