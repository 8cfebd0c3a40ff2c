"""The endpoint form's labels say what each setting is (not Django's "Api key env" from the field name)."""

from django.urls import reverse

LABELS = ("Base URL", "API style", "API key variable", "Timeout (seconds)", "Retries", "Concurrent calls at most",
          "Sampling defaults (JSON)", "Input price per million tokens", "Output price per million tokens")  # fmt: skip


def test_the_endpoint_form_labels_read_as_words(admin_client):
    page = admin_client.get(reverse("llm:endpoint-add")).content.decode()
    for label in LABELS:
        assert f"<label>{label} <" in page, label
    assert not any(raw in page for raw in ("Api key env", "Price input per mtok", "Api style", "Base url"))
