"""Deeply nested JSON is a 400 on every API route, not a RecursionError's 500 (issue 10, item 18)."""

DEEP = b'{"name": ' + b"[" * 30000 + b"]" * 30000 + b"}"


def test_deeply_nested_json_to_the_api_is_a_400(api_as, admin_user):
    client = api_as(admin_user)
    client.raise_request_exception = False
    response = client.post("/api/model-endpoints/", data=DEEP, content_type="application/json")
    assert response.status_code == 400 and "nested too deeply" in response.json()["detail"]
