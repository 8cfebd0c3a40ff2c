"""lib.strict_json: what a JSON column cannot store is refused in the one parse, and nothing else is."""

import json

import pytest

from lib import strict_json

REFUSED = {
    '{"t": NaN}': "NaN, which is not a JSON number",
    "[Infinity]": "Infinity, which is not a JSON number",
    '{"a": {"b": [-Infinity]}}': "-Infinity, which is not a JSON number",
    '{"t": 1e999}': "the number 1e999, which is out of range",
    '{"t": -2.5E+400}': "the number -2.5E+400, which is out of range",
    '"\\ud800"': "a lone UTF-16 surrogate",
    '"\\uDFFF tail"': "a lone UTF-16 surrogate",
    '"\\ud83d\\ud83d\\ude00"': "a lone UTF-16 surrogate",  # a high half, then a whole pair
    '"\\ude00\\ud83d"': "a lone UTF-16 surrogate",  # the halves in the wrong order
    '"\\\\\\ud800"': "a lone UTF-16 surrogate",  # an escaped backslash, then an escape
    '{"\\udc00": 1}': "a lone UTF-16 surrogate",  # in a key
}
STORED = [
    '{"t": 1e308, "u": -0.0, "v": 123456789012345678901234567890}',
    '"\\ud83d\\ude00 \\uD83D\\uDE00"',  # pairs, either case
    '"\\ud7ff \\ue000 \\ud55c"',  # around the surrogates
    '"\\\\ud800"',  # an escaped backslash, then text
    '"\\\\\\\\ud800"',  # two escaped backslashes, then text
    '"NaN Infinity"',
]


@pytest.mark.parametrize("text", REFUSED)
def test_what_a_json_column_refuses_is_not_storable(text):
    with pytest.raises(strict_json.NotStorable, match=REFUSED[text].replace("+", "\\+")):
        strict_json.loads(text.encode())


@pytest.mark.parametrize("text", STORED)
def test_what_it_stores_parses_as_json_does(text):
    value = strict_json.loads(text.encode())
    assert value == json.loads(text)
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")  # what the column takes


def test_surrogates_written_as_bytes_and_text_that_is_not_json_are_not_json():
    with pytest.raises(ValueError) as not_utf8:
        strict_json.loads(b'"\xed\xa0\x80"')  # a surrogate encoded as UTF-8 bytes (json.loads would take it)
    assert not isinstance(not_utf8.value, strict_json.NotStorable)
    with pytest.raises(json.JSONDecodeError):
        strict_json.loads(b"{nope")
