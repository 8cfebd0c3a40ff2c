"""The gateway's API: endpoints (viewer+ read, admin write) and model calls (read-only)."""

from decimal import Decimal

import pytest

from llm.models import ModelCall, ModelEndpoint, ProxySession

SECRET = "sk-api-secret-value"


@pytest.fixture
def endpoint(db, monkeypatch):
    monkeypatch.setenv("CLAWGYM_KEY_TEST_API", SECRET)
    return ModelEndpoint.objects.create(
        name="judge",
        base_url="https://api.example.com/v1",
        model="j-1",
        api_key_env="CLAWGYM_KEY_TEST_API",
        roles=["judge"],
    )


NEW = {
    "name": "gen",
    "base_url": "http://gpu2:8000/v1",
    "model": "qwen",
    "roles": ["generator"],
    "sampling": {"temperature": 0.9},
    "max_concurrent": 16,
}


def test_reads_need_a_role_and_writes_need_admin(endpoint, api_as, viewer, reviewer, admin_user, outsider):
    assert api_as(outsider).get("/api/model-endpoints/").status_code == 403
    assert api_as(outsider).get("/api/model-calls/").status_code == 403
    for user in (viewer, reviewer):
        client = api_as(user)
        assert client.get("/api/model-endpoints/").status_code == 200
        assert client.get("/api/model-calls/").status_code == 200
        assert client.post("/api/model-endpoints/", NEW, format="json").status_code == 403
        assert client.patch("/api/model-endpoints/judge/", {"model": "x"}, format="json").status_code == 403
        assert client.delete("/api/model-endpoints/judge/").status_code == 403
    assert api_as(admin_user).post("/api/model-endpoints/", NEW, format="json").status_code == 201
    assert ModelEndpoint.objects.get(name="gen").max_concurrent == 16


def test_endpoints_show_the_key_variable_never_the_key(endpoint, api_as, viewer):
    response = api_as(viewer).get("/api/model-endpoints/judge/")
    assert response.json()["api_key_env"] == "CLAWGYM_KEY_TEST_API" and response.json()["key_is_set"] is True
    assert SECRET not in response.content.decode()


def test_admin_changes_are_validated_and_the_name_is_fixed(endpoint, api_as, admin_user):
    client = api_as(admin_user)
    bad = client.patch("/api/model-endpoints/judge/", {"roles": ["oracle"], "base_url": "nope"}, format="json")
    assert bad.status_code == 400 and {"roles", "base_url"} <= set(bad.json())
    assert client.patch("/api/model-endpoints/judge/", {"name": "other"}, format="json").status_code == 400
    ok = client.patch("/api/model-endpoints/judge/", {"max_retries": 5, "sampling": {"top_p": 0.9}}, format="json")
    assert ok.status_code == 200
    endpoint.refresh_from_db()
    assert (endpoint.max_retries, endpoint.sampling) == (5, {"top_p": 0.9})


def test_an_endpoint_with_sessions_is_not_deleted(endpoint, api_as, admin_user):
    ProxySession.objects.create(endpoint=endpoint)
    assert api_as(admin_user).delete("/api/model-endpoints/judge/").status_code == 409


def test_model_calls_list_filters_and_detail(endpoint, api_as, viewer):
    session = ProxySession.objects.create(endpoint=endpoint, subject="rollout:2")
    common = {"endpoint": endpoint, "endpoint_name": "judge", "request": {"messages": ["big"]}}
    proxied = ModelCall.objects.create(purpose="proxy", session=session, response={"x": 1}, **common)
    ModelCall.objects.create(purpose="judge", error="timed out", cost=Decimal("0.01"), **common)
    client = api_as(viewer)
    listed = client.get("/api/model-calls/").json()
    assert listed["count"] == 2 and "request" not in listed["results"][0]
    assert [c["id"] for c in client.get("/api/model-calls/", {"session": session.pk}).json()["results"]] == [proxied.pk]
    assert client.get("/api/model-calls/", {"outcome": "error"}).json()["results"][0]["error"] == "timed out"
    assert client.get("/api/model-calls/", {"outcome": "maybe"}).status_code == 400
    detail = client.get(f"/api/model-calls/{proxied.pk}/").json()
    assert detail["request"] == {"messages": ["big"]} and detail["response"] == {"x": 1}
    assert detail["session"] == session.pk
