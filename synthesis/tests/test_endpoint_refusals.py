"""A batch's endpoints are refused the same way everywhere: the API refuses what the start form does not offer (a
disabled endpoint, one without the role), the service refuses a disabled one whoever asks, and the dashboard names
the role that has no enabled endpoint."""

import pytest
from django.urls import reverse

from llm.models import ModelEndpoint
from synthesis.batch_plan import BatchError
from synthesis.models import SynthesisBatch
from synthesis.services import start_batch

BATCHES = "/api/synthesis/batches/"
BODY = {"route": "persona", "count": 1, "generator": "gen", "judge": "judge", "seed": 3}


def test_the_api_refuses_a_disabled_endpoint_as_the_form_does(api_as, admin_user, admin_client, endpoints):
    generator, _judge = endpoints
    ModelEndpoint.objects.filter(pk=generator.pk).update(enabled=False)
    form = admin_client.post(reverse("synthesis:start"), {**BODY, "start": "1", "qa_stages": []})
    assert form.status_code == 400 and "generator" in form.context["form"].errors

    response = api_as(admin_user).post(BATCHES, BODY, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["generator"] == [
        "model endpoint 'gen' is disabled: enable it on the Models page (/llm/endpoints/)"
    ]
    with pytest.raises(BatchError, match="'gen' is disabled"):
        start_batch("persona", 1, "gen", "judge", seed=3, here=True, user=None)
    assert not SynthesisBatch.objects.exists()


def test_the_api_refuses_an_endpoint_without_the_role(api_as, admin_user, endpoints):
    response = api_as(admin_user).post(BATCHES, {**BODY, "generator": "judge"}, format="json")
    assert response.status_code == 400
    assert "does not serve the generator role" in response.json()["generator"][0]
    assert not SynthesisBatch.objects.exists()


def test_the_dashboard_names_the_missing_role(admin_client, endpoints):
    _generator, judge = endpoints
    ModelEndpoint.objects.filter(pk=judge.pk).update(enabled=False)
    page = admin_client.get(reverse("dashboard")).content.decode()
    assert "No enabled judge endpoint: register one under" in page
    assert 'data-testid="missing-generator"' not in page and "No enabled model endpoint" not in page
    assert 'id="synthesis-launch-form"' in page and 'name="generator"' not in page

    ModelEndpoint.objects.filter(pk=judge.pk).update(enabled=True)
    page = admin_client.get(reverse("dashboard")).content.decode()
    assert "No enabled" not in page and 'name="generator"' in page
