"""The OpenAPI schema says what the API answers (bench/fuzz_api.py checks every answer against it; these pin the
shapes it found wrong, so that the CI profile need not draw the one request that shows each)."""

import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def response(schema, method: str, path: str, status: str) -> dict:
    return schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]


def test_every_documented_400_may_be_field_errors(schema):
    documented = [
        (path, method, op["responses"]["400"])
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if "400" in op.get("responses", {})
    ]
    assert len(documented) >= 6
    for path, method, answer in documented:
        body = answer["content"]["application/json"]["schema"]
        assert {"$ref": "#/components/schemas/FieldErrors"} in body["anyOf"], (method, path)


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("post", "/api/rollouts/", "201"),
        ("get", "/api/candidates/{id}/history/", "200"),
        ("get", "/api/training/base-models/converters/", "200"),
    ],
)
def test_lists_that_are_not_pages_are_documented_as_lists(schema, method, path, status):
    assert response(schema, method, path, status)["type"] == "array"


def test_a_confidence_interval_may_hold_nulls(schema):
    components = schema["components"]["schemas"]
    for ci in (components["MeanWithCI"]["properties"]["ci"], components["Compare"]["properties"]["ci"]):
        assert ci["items"].get("nullable") is True
