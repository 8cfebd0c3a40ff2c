"""The endpoint form: labels that say what each setting is (not Django's "Api key env"), and bounded fields."""

import json

from django.urls import reverse

LABELS = (
    "Base URL",
    "API style",
    "API key variable",
    "Timeout (seconds)",
    "Retries",
    "Concurrent calls at most",
    "Sampling defaults (JSON)",
    "Input price per million tokens",
    "Output price per million tokens",
)


def test_the_endpoint_form_labels_read_as_words(admin_client):
    page = admin_client.get(reverse("llm:endpoint-add")).content.decode()
    for label in LABELS:
        assert f"<label>{label} <" in page, label
    assert not any(raw in page for raw in ("Api key env", "Price input per mtok", "Api style", "Base url"))


def test_endpoint_fields_are_bounded_on_the_page_and_in_the_api(admin_client, api_as, admin_user):
    from llm.models import ModelEndpoint

    data = {
        "name": "big",
        "base_url": "http://gpu1:8000/v1",
        "model": "m" * 201,
        "api_style": "chat",
        "api_key_env": "",
        "timeout_seconds": "60",
        "max_retries": "2",
        "max_concurrent": "4",
        "sampling": json.dumps({"stop": ["x" * 20_000]}),
        "price_input_per_mtok": "0",
        "price_output_per_mtok": "0",
    }
    page = admin_client.post(reverse("llm:endpoint-add"), data).content.decode()
    assert "Ensure this value has at most 200 characters (it has 201)." in page
    data["model"] = "qwen-7b"
    page = admin_client.post(reverse("llm:endpoint-add"), data).content.decode()
    assert "the sampling is 20,014 bytes as JSON, over the limit of 16,384 bytes (CLAWGYM_MAX_NOTE_BYTES)" in page

    body = {"name": "big", "base_url": "http://gpu1:8000/v1", "model": "qwen-7b", "sampling": {"stop": ["x" * 20_000]}}
    response = api_as(admin_user).post("/api/model-endpoints/", body, format="json")
    assert response.status_code == 400 and "CLAWGYM_MAX_NOTE_BYTES" in response.json()["sampling"][0]
    assert not ModelEndpoint.objects.exists()


def test_a_sampling_no_json_column_stores_is_refused_on_the_page(admin_client):
    """A form's JSON field reads NaN and 1e999 (Python's json takes both); the database would refuse them."""
    from llm.models import ModelEndpoint

    data = {
        "name": "nan",
        "base_url": "http://gpu1:8000/v1",
        "model": "qwen-7b",
        "api_style": "chat",
        "api_key_env": "",
        "timeout_seconds": "60",
        "max_retries": "2",
        "max_concurrent": "4",
        "price_input_per_mtok": "0",
        "price_output_per_mtok": "0",
    }
    for sampling in ('{"temperature": NaN}', '{"seed": 1e999}'):
        response = admin_client.post(reverse("llm:endpoint-add"), {**data, "sampling": sampling})
        assert response.status_code == 400, sampling  # the form again, with its error
        assert "the sampling holds NaN or an infinite number, which JSON cannot store" in response.content.decode()
    assert not ModelEndpoint.objects.exists()
