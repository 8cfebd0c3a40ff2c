"""The gateway's pages: endpoints (viewer+ read, admin edit and connection test) and the model call log."""

from decimal import Decimal

import pytest
from django.urls import reverse

from llm.models import ModelCall, ModelEndpoint, ProxySession
from llm.testing import Reply

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
SECRET = "sk-page-secret-value"


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setenv("CLAWGYM_KEY_TEST_PAGE", SECRET)
    return ModelEndpoint.objects.create(
        name="gpt-small",
        base_url="https://api.example.com/v1",
        model="gpt-small-1",
        api_key_env="CLAWGYM_KEY_TEST_PAGE",
        roles=["judge", "generator"],
        price_input_per_mtok=Decimal("0.4"),
        price_output_per_mtok=Decimal("1.6"),
    )


def make_call(endpoint_name="gpt-small", purpose="judge", cost="0.001", tokens=(100, 20), error="", **fields):
    return ModelCall.objects.create(
        endpoint_name=endpoint_name,
        purpose=purpose,
        request={"messages": []},
        cost=Decimal(cost),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        error=error,
        latency_ms=12.5,
        **fields,
    )


# --- who may see and do what ---------------------------------------------------------------------------------

PAGES = [("llm:endpoints", []), ("llm:calls", [])]


@pytest.mark.parametrize("name, args", PAGES)
def test_viewers_and_up_read_the_pages(
    name, args, viewer_client, reviewer_client, admin_client, outsider_client, client
):
    url = reverse(name, args=args)
    for allowed in (viewer_client, reviewer_client, admin_client):
        assert allowed.get(url).status_code == 200
    assert outsider_client.get(url).status_code == 403
    assert client.get(url).status_code == 302  # anonymous: to the login page


def test_call_detail_needs_a_role(viewer_client, outsider_client):
    call = make_call()
    url = reverse("llm:call", args=[call.pk])
    assert viewer_client.get(url).status_code == 200
    assert outsider_client.get(url).status_code == 403


def test_only_admins_edit_and_test_endpoints(endpoint, viewer_client, reviewer_client):
    for client in (viewer_client, reviewer_client):
        assert client.get(reverse("llm:endpoint-add")).status_code == 403
        assert client.get(reverse("llm:endpoint-edit", args=[endpoint.name])).status_code == 403
        assert client.post(reverse("llm:endpoint-test", args=[endpoint.name])).status_code == 403
    page = viewer_client.get(reverse("llm:endpoints")).content.decode()
    assert "Test connection" not in page and "Add endpoint" not in page


def test_nav_shows_models_to_people_with_a_role(viewer_client, outsider_client):
    assert reverse("llm:endpoints") in viewer_client.get(reverse("llm:calls")).content.decode()
    outsider_page = outsider_client.get(reverse("dashboard")).content.decode()
    assert 'href="/jobs/"' in outsider_page and 'href="/llm/endpoints/"' not in outsider_page


# --- endpoints -----------------------------------------------------------------------------------------------


def test_endpoint_list_shows_the_key_variable_never_the_key(endpoint, admin_client, monkeypatch):
    page = admin_client.get(reverse("llm:endpoints")).content.decode()
    assert "gpt-small-1" in page and "CLAWGYM_KEY_TEST_PAGE" in page and ">set<" in page
    assert SECRET not in page
    monkeypatch.delenv("CLAWGYM_KEY_TEST_PAGE")
    assert ">missing<" in admin_client.get(reverse("llm:endpoints")).content.decode()


def test_admin_adds_an_endpoint(admin_client):
    data = {
        "name": "local-vllm",
        "base_url": "http://gpu1:8000/v1",
        "model": "qwen-7b",
        "api_style": "chat",
        "api_key_env": "",
        "roles": ["agent", "judge"],
        "timeout_seconds": "60",
        "max_retries": "2",
        "max_concurrent": "8",
        "sampling": '{"temperature": 0.6}',
        "price_input_per_mtok": "0",
        "price_output_per_mtok": "0",
        "enabled": "on",
    }
    response = admin_client.post(reverse("llm:endpoint-add"), data)
    assert response.status_code == 302
    endpoint = ModelEndpoint.objects.get(name="local-vllm")
    assert endpoint.roles == ["agent", "judge"] and endpoint.sampling == {"temperature": 0.6}
    assert endpoint.max_concurrent == 8 and endpoint.base_url == "http://gpu1:8000/v1"


def test_bad_endpoint_settings_are_explained(admin_client):
    data = {
        "name": "x",
        "base_url": "ftp://nowhere",
        "model": "m",
        "api_style": "chat",
        "api_key_env": "not a var",
        "timeout_seconds": "60",
        "max_retries": "2",
        "max_concurrent": "0",
        "sampling": "[1]",
        "price_input_per_mtok": "0",
        "price_output_per_mtok": "0",
    }
    response = admin_client.post(reverse("llm:endpoint-add"), data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert {"base_url", "api_key_env", "max_concurrent", "sampling"} <= set(errors)
    assert not ModelEndpoint.objects.filter(name="x").exists()


def test_admin_edits_an_endpoint_but_not_its_name(endpoint, admin_client):
    url = reverse("llm:endpoint-edit", args=[endpoint.name])
    form = admin_client.get(url).context["form"]
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update(name="renamed", max_concurrent="3", sampling="{}", roles=["judge"], enabled="on")
    assert admin_client.post(url, data).status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.max_concurrent, endpoint.roles) == ("gpt-small", 3, ["judge"])


def test_connection_test_shows_latency_over_htmx(admin_client, scripted_upstream, settings):
    endpoint = ModelEndpoint.objects.create(name="scripted", base_url=scripted_upstream.base_url, model="m")
    scripted_upstream.push(Reply.text("pong"))
    response = admin_client.post(reverse("llm:endpoint-test", args=[endpoint.name]), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "OK ·" in html and " ms" in html and "<html" not in html
    assert ModelCall.objects.get().purpose == "test_connection"


def test_connection_test_shows_the_error(admin_client, scripted_upstream, fast_llm_retries):
    endpoint = ModelEndpoint.objects.create(
        name="scripted", base_url=scripted_upstream.base_url, model="m", max_retries=0
    )
    scripted_upstream.push(Reply.error(401, "Incorrect API key provided"))
    html = admin_client.post(reverse("llm:endpoint-test", args=[endpoint.name]), **HTMX).content.decode()
    assert "Failed" in html and "Incorrect API key provided" in html


def test_connection_test_without_js_redirects_with_a_message(admin_client, scripted_upstream):
    endpoint = ModelEndpoint.objects.create(name="scripted", base_url=scripted_upstream.base_url, model="m")
    scripted_upstream.push(Reply.text("pong"))
    response = admin_client.post(reverse("llm:endpoint-test", args=[endpoint.name]), follow=True)
    assert "scripted: OK in" in response.content.decode()


# --- model calls ---------------------------------------------------------------------------------------------


def test_call_list_totals_per_purpose_and_endpoint(viewer_client):
    make_call(purpose="judge", cost="0.002", tokens=(1000, 100))
    make_call(purpose="judge", cost="0.003", tokens=(2000, 200), error="HTTP 500: boom")
    make_call(purpose="proxy", endpoint_name="local", cost="0", tokens=(50, 5))
    response = viewer_client.get(reverse("llm:calls"))
    by_purpose = {row["purpose"]: row for row in response.context["by_purpose"]}
    assert by_purpose["judge"]["calls"] == 2 and by_purpose["judge"]["errors"] == 1
    assert by_purpose["judge"]["input_tokens"] == 3000 and by_purpose["judge"]["cost"] == Decimal("0.005")
    by_endpoint = {row["endpoint_name"]: row for row in response.context["by_endpoint"]}
    assert by_endpoint["local"]["output_tokens"] == 5 and by_endpoint["gpt-small"]["calls"] == 2
    assert response.context["overall"]["input_tokens"] == 3050
    assert "3 calls" in response.content.decode()


def test_call_list_filters_and_htmx_partial(viewer_client, endpoint):
    session = ProxySession.objects.create(endpoint=endpoint, subject="rollout:1")
    make_call(purpose="proxy", subject="rollout:1", session=session)
    make_call(purpose="judge", subject="revision:4", error="timed out")
    make_call(purpose="judge", subject="revision:5")
    url = reverse("llm:calls")

    def count(**query):
        return viewer_client.get(url, query).context["page"].paginator.count

    assert count(purpose="judge") == 2
    assert count(outcome="error") == 1 and count(outcome="ok") == 2
    assert count(subject="revision") == 2
    assert count(session=session.pk) == 1
    assert count(endpoint="nope") == 0
    assert count(outcome="bogus") == 3  # a bad value drops only its own filter
    partial = viewer_client.get(url, {"purpose": "judge"}, **HTMX).content.decode()
    assert "<html" not in partial and "By purpose" in partial


def test_call_detail_shows_request_response_and_error(viewer_client):
    call = make_call(
        error="upstream HTTP 429: slow down", status_code=429, response={"error": {"message": "slow down"}}
    )
    html = viewer_client.get(reverse("llm:call", args=[call.pk])).content.decode()
    assert "upstream HTTP 429: slow down" in html and "&quot;messages&quot;" in html and "slow down" in html
