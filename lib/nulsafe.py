"""Text and JSON with NUL (U+0000) that PostgreSQL can store.

PostgreSQL refuses NUL in text and in jsonb strings ("\\u0000 cannot be converted to text"), and a model's answer, a
tool result that read a binary file, or a hostile agent's request can hold one. A call or rollout that cannot be
stored is lost work, so NUL is stored escaped, reversibly: NUL becomes MARK + "0" and MARK itself (U+E000, a
private-use character) MARK + MARK; reading undoes it. Text with neither is stored as it is, so nothing else changes
for what is already in the database. A lookup on escaped text matches the escaped form.

    NulSafeJSONField, NulSafeTextField   drop-in fields
    NulSafeCharField                     a CharField whose NUL is stored as U+FFFD (see the class)
    escape(text) / unescape(text)        the same for one string
    unescape_json(value)                 for JSON read past the fields (raw SQL)
"""

from __future__ import annotations

import json
import re

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

MARK = "\ue000"
_TEXT = re.compile(f"[\0{MARK}]")
_UNTEXT = re.compile(f"{MARK}(.)", re.S)
# In JSON text (ensure_ascii or not): every escape sequence taken whole, so an escaped backslash before "u0000" is
# never read as the start of an escape; a literal MARK can only be inside a string.
_JSON = re.compile(rf"\\(?:u0000|ue000|.)|{MARK}", re.S)
_JSON_REPLACEMENTS = {"\\u0000": "\\ue0000", "\\ue000": "\\ue000\\ue000", MARK: MARK + MARK}


def escape(text: str) -> str:
    if "\0" not in text and MARK not in text:
        return text
    return _TEXT.sub(lambda m: MARK + ("0" if m[0] == "\0" else MARK), text)


def unescape(text: str) -> str:
    if MARK not in text:
        return text
    return _UNTEXT.sub(lambda m: "\0" if m[1] == "0" else m[1], text)


def unescape_json(value):
    """`value` (parsed JSON) with every string and key unescaped."""
    if isinstance(value, str):
        return unescape(value)
    if isinstance(value, list):
        return [unescape_json(item) for item in value]
    if isinstance(value, dict):
        return {unescape(key): unescape_json(item) for key, item in value.items()}
    return value


class Encoder(DjangoJSONEncoder):
    def encode(self, o) -> str:
        text = super().encode(o)
        if "\\u0000" not in text and "\\ue000" not in text and MARK not in text:
            return text
        return _JSON.sub(lambda m: _JSON_REPLACEMENTS.get(m[0], m[0]), text)


class Decoder(json.JSONDecoder):
    def decode(self, s, *args, **kwargs):
        value = super().decode(s, *args, **kwargs)
        return unescape_json(value) if MARK in s or "\\ue000" in s else value


def loads(text: str | bytes):
    return json.loads(text, cls=Decoder)


class NulSafeJSONField(models.JSONField):
    """A JSONField whose strings may hold NUL (stored escaped, see the module)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("encoder", Encoder)
        kwargs.setdefault("decoder", Decoder)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("encoder", None)
        kwargs.pop("decoder", None)
        return name, path, args, kwargs


class NulSafeTextField(models.TextField):
    """A TextField that may hold NUL (stored escaped, see the module)."""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return escape(value) if isinstance(value, str) else value

    def from_db_value(self, value, expression, connection):
        return unescape(value) if isinstance(value, str) else value


REPLACEMENT = "\ufffd"


class NulSafeCharField(models.CharField):
    """A CharField that takes NUL: each is stored as U+FFFD, the replacement character. Not reversible, unlike the
    text fields: what a CharField holds is a name or a one-line reason (a checker's last line of stderr may carry
    an agent's bytes), and its length is bounded, which an escape that lengthens the text could pass. Lookups are
    replaced alike, so a value finds itself."""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return value.replace("\0", REPLACEMENT) if isinstance(value, str) and "\0" in value else value
