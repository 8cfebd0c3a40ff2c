"""JSON that a call's record can store: parsing that refuses what the database's JSON columns refuse.

Python's json reads `NaN`, `Infinity` and `-Infinity`, and a number past the float range (`1e999`, valid JSON) as
infinity; neither PostgreSQL's jsonb nor SQLite's JSON_VALID takes them. jsonb also refuses a lone UTF-16 surrogate
(`"\\ud800"` without its pair). A proxied call whose request or answer held one could be forwarded and answered but
never recorded (so never counted, shown or trained on): the recording proxy parses both with `loads` and refuses
what it cannot store, before it goes on (llm.proxy).

One parse does it: the non-finite literals are refused by the parser's own hooks, the text is decoded as strict UTF-8
(which refuses a surrogate written as bytes), and only a text holding a `\\uD...` escape is checked for a lone one.

    strict_json.loads(raw)     # the value; NotStorable (a ValueError) naming what the record cannot hold
"""

import json
import math


class NotStorable(ValueError):
    """Valid (or nearly valid) JSON that a JSON column refuses; the message says what."""


def _constant(name: str):
    raise NotStorable(f"{name}, which is not a JSON number (a call's record cannot store it)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotStorable(f"the number {text[:40]}, which is out of range (a call's record cannot store infinity)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)
SURROGATE_ESCAPES = ("\\ud", "\\uD")  # \uD800-\uDFFF are surrogates; \uD000-\uD7FF too match (and are then checked)


def loads(data: bytes | bytearray | str):
    """The parsed JSON value. Raises NotStorable for NaN, ±Infinity, a number out of the float range or a lone
    surrogate; ValueError for text that is not JSON (or not UTF-8)."""
    text = bytes(data).decode("utf-8") if isinstance(data, bytes | bytearray) else data
    value = _DECODER.decode(text)
    if any(escape in text for escape in SURROGATE_ESCAPES) and _has_lone_surrogate(value):
        raise NotStorable(
            "a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), which a call's record cannot store"
        )
    return value


def _has_lone_surrogate(value) -> bool:
    # A pair of escapes is decoded into one character, so any surrogate left in a string stands alone: it is the one
    # thing that cannot be written as UTF-8.
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
