"""The API's JSON parser answers 400, never a server error: JSON nested past the recursion limit, and numbers or
strings no JSON column can store (a number past the float range, NaN, Infinity, a lone surrogate)."""

import io

import pytest

from lib.api_parsers import JSONParser

DEEP = b'{"name": ' + b"[" * 30000 + b"]" * 30000 + b"}"


def test_deeply_nested_json_to_the_api_is_a_400(api_as, admin_user):
    client = api_as(admin_user)
    client.raise_request_exception = False
    response = client.post("/api/model-endpoints/", data=DEEP, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["detail"]


@pytest.mark.parametrize(
    "value, reason",
    [
        ("1e999", "out of range"),
        ("-1e999", "out of range"),
        ("NaN", "NaN, which is not a JSON number"),
        ("-Infinity", "-Infinity, which is not a JSON number"),
        ('"\\ud800"', "lone UTF-16 surrogate"),
    ],
)
def test_json_no_column_can_store_is_a_400_naming_why(api_as, admin_user, value, reason):
    client = api_as(admin_user)
    client.raise_request_exception = False
    body = '{"name": "judge-x", "base_url": "http://127.0.0.1:9/v1", "model": "m", "sampling": {"seed": ' + value + "}}"
    response = client.post("/api/model-endpoints/", data=body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert reason in response.json()["detail"]


def test_what_a_column_can_store_still_parses():
    body = b'{"big": 1e308, "pair": "\\ud83d\\ude00", "escaped": "\\\\ud800"}'
    assert JSONParser().parse(io.BytesIO(body)) == {"big": 1e308, "pair": "\U0001f600", "escaped": "\\ud800"}
