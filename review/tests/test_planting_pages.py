"""Planted flaws and diagnosis precision on the pages and the API: planting (admins only), the reports, who may see
which candidates are planted, and the reveal after a decision in the queue, on the candidate page and in the API."""

import pytest
from django.urls import reverse

from review import planting
from review.models import BenchmarkCandidate, PlantedFlaw
from review.services import record_verdicts
from review.tests.helpers import HTMX, accept_all, add_diagnosis, sanity, text
from review.tests.test_planting import rich_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def accepted(benchmark, admin_user, reviewer):
    accept_all(benchmark, [rich_task()], admin_user=admin_user, reviewer=reviewer)
    return BenchmarkCandidate.objects.get(benchmark=benchmark, status="accepted")


def planted_url(benchmark):
    return reverse("review:planted", args=[benchmark.name])


def test_an_admin_plants_from_the_page(benchmark, accepted, admin_client):
    page = admin_client.get(planted_url(benchmark))
    assert page.status_code == 200 and 'data-testid="planted-none"' in text(page)
    response = admin_client.post(
        planted_url(benchmark), {"kinds": ["check_removed", "input_removed"], "count": 3, "seed": 1}, **HTMX
    )
    assert response.status_code == 204 and response["HX-Redirect"] == planted_url(benchmark)
    assert sorted(PlantedFlaw.objects.values_list("kind", flat=True)) == [
        "check_removed",
        "check_removed",
        "input_removed",
    ]
    page = text(admin_client.get(planted_url(benchmark)))
    assert "Planted 3 flaws" in page and 'data-testid="plants"' in page
    assert "3 planted · 0 diagnosed" in page


def test_the_plant_form_says_what_is_wrong_in_place(benchmark, admin_client):
    response = admin_client.post(planted_url(benchmark), {"kinds": ["check_removed"], "count": 2}, **HTMX)
    assert response.status_code == 200 and 'data-testid="plant-error"' in text(response)
    assert "no accepted candidate" in text(response)
    response = admin_client.post(planted_url(benchmark), {"kinds": ["nonsense"], "count": 0})
    assert response.status_code == 400 and "nonsense" in text(response)
    assert not PlantedFlaw.objects.exists()


def test_reviewers_see_the_figures_but_not_the_plants(benchmark, accepted, admin_user, reviewer_client):
    planting.plant_flaws(benchmark, ["input_removed"], 1, user=admin_user)
    page = text(reviewer_client.get(planted_url(benchmark)))
    assert 'data-testid="planted-by-kind"' in page
    assert 'data-testid="plants"' not in page and "Plant flaws" not in page
    refused = reviewer_client.post(planted_url(benchmark), {"kinds": ["input_removed"], "count": 1})
    assert refused.status_code == 403 and PlantedFlaw.objects.count() == 1
    assert reviewer_client.get("/api/planted-flaws/").status_code == 403
    report = reviewer_client.get("/api/planted-flaws/report/", {"benchmark": benchmark.name})
    assert report.status_code == 200 and report.json()["total"] == 1
    assert report.json()["by_kind"]["input_removed"]["total"] == 1


def test_planting_over_the_api(benchmark, accepted, admin_client, reviewer_client):
    body = {"benchmark": benchmark.name, "kinds": ["rubric_contradicts"], "count": 2, "seed": 5}
    response = admin_client.post("/api/planted-flaws/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    plants = response.json()
    assert [p["kind"] for p in plants] == ["rubric_contradicts"] * 2
    assert plants[0]["source_task"] == accepted.task.external_id and plants[0]["reviewers"] == "pending"
    assert plants[0]["llm"] == "not_diagnosed" and "rubric rule" in plants[0]["change"]
    listed = admin_client.get("/api/planted-flaws/", {"benchmark": benchmark.name, "kind": "rubric_contradicts"})
    assert len(listed.json()) == 2
    one = admin_client.get(f"/api/planted-flaws/{plants[0]['id']}/")
    assert one.status_code == 200 and one.json()["task"] == plants[0]["task"]
    assert admin_client.get("/api/planted-flaws/999999/").status_code == 404
    refused = reviewer_client.post("/api/planted-flaws/", body, content_type="application/json")
    assert refused.status_code == 403
    bad = admin_client.post(
        "/api/planted-flaws/", body | {"kinds": ["check_removed"], "count": 99}, content_type="application/json"
    )
    assert bad.status_code == 400 and "count" in bad.json()
    unknown = admin_client.post("/api/planted-flaws/", body | {"benchmark": "nope"}, content_type="application/json")
    assert unknown.status_code == 404


def _ready(plant):
    sanity(plant.candidate.task.current_revision)
    add_diagnosis(plant.candidate, [])
    return plant.candidate


def test_the_reveal_after_a_decision_in_the_api(benchmark, accepted, admin_user, reviewer_client):
    (plant,) = planting.plant_flaws(benchmark, ["instruction_cut"], 1, user=admin_user)
    candidate = _ready(plant)
    detail = reviewer_client.get(f"/api/candidates/{candidate.pk}/").json()
    assert "plant" not in str(detail).lower()  # unmarked until decided
    response = reviewer_client.post(
        f"/api/candidates/{candidate.pk}/decide/", {"decision": "accept"}, content_type="application/json"
    )
    assert response.status_code == 201
    shown = response.json()["planted"]
    assert shown["kind"] == "instruction_cut" and shown["outcome"] == "missed"
    assert shown["source_task"] == accepted.task.external_id
    candidate.refresh_from_db()
    assert candidate.status == "rejected"
    ordinary = reviewer_client.post(
        f"/api/candidates/{accepted.pk}/decide/", {"decision": "reject", "reason": "x"}, content_type="application/json"
    )
    assert ordinary.status_code == 400  # already accepted; and no "planted" for ordinary candidates either way
    assert "planted" not in ordinary.json()


def test_the_reveal_under_the_queue_row_and_on_the_candidate_page(benchmark, accepted, admin_user, reviewer_client):
    caught, missed = planting.plant_flaws(benchmark, ["input_removed", "check_removed"], 2, user=admin_user)
    first, second = _ready(caught), _ready(missed)
    page = text(reviewer_client.get(reverse("review:candidate", args=[first.pk])))
    assert 'data-testid="planted-reveal"' not in page
    response = reviewer_client.post(
        reverse("review:queue_decide", args=[first.pk]), {"decision": "reject", "reason": "an input is gone"}, **HTMX
    )
    html = text(response)
    assert response.status_code == 200 and f'id="candidate-{first.pk}"' in html
    assert 'data-testid="planted-reveal"' in html and "You caught it" in html
    page = text(reviewer_client.get(reverse("review:candidate", args=[first.pk])))
    assert 'data-testid="planted-reveal"' in page and caught.change in page

    response = reviewer_client.post(reverse("review:decide", args=[second.pk]), {"decision": "reject", "reason": "x"})
    assert response.status_code == 302
    page = text(reviewer_client.get(response["Location"]))
    assert "You caught it" in page


def test_the_precision_page_and_api(benchmark, reviewer, reviewer_client):
    from review.tests.helpers import make_candidate

    candidate = make_candidate(benchmark, "t-judged")
    diagnosis = add_diagnosis(
        candidate, [{"component": "checker", "severity": "blocker"}, {"component": "rubric", "severity": "minor"}]
    )
    checker, rubric = diagnosis.issues.order_by("id")
    record_verdicts(candidate, {str(checker.pk): "valid", str(rubric.pk): "not_valid"}, user=reviewer)
    url = reverse("review:diagnosis_precision", args=[benchmark.name])
    page = text(reviewer_client.get(url))
    assert 'data-testid="precision-overall"' in page and "1 of 2 judged issues" in page
    assert 'data-testid="precision-component"' in page and 'data-testid="precision-diagnosing-model"' in page
    partial = text(reviewer_client.get(url, **HTMX))
    assert "<html" not in partial and "1 of 2 judged issues" in partial
    body = reviewer_client.get("/api/diagnosis-precision/", {"benchmark": benchmark.name}).json()
    assert body["overall"]["precision"] == 0.5 and body["by_component"]["checker"]["precision"] == 1.0
    assert body["by_model"]["diag"]["n"] == 2 and body["by_prompt_version"]["test"]["valid"] == 1
    assert reviewer_client.get("/api/diagnosis-precision/").status_code == 400
    assert reviewer_client.get("/api/diagnosis-precision/", {"benchmark": "nope"}).status_code == 404
    assert reviewer_client.get(reverse("review:diagnosis_precision", args=["nope"])).status_code == 404


def test_the_reveal_after_a_bulk_decision(benchmark, accepted, admin_user, reviewer_client):
    first, second = planting.plant_flaws(benchmark, ["input_removed", "check_removed"], 2, user=admin_user)
    ids = [_ready(first).pk, _ready(second).pk]
    response = reviewer_client.post(
        reverse("review:bulk_decide"), {"ids": ids, "decision": "reject", "reason": "broken"}, **HTMX
    )
    html = text(response)
    assert html.count('data-testid="planted-reveal"') == 2 and first.change in html
    assert BenchmarkCandidate.objects.filter(pk__in=ids, status="rejected").count() == 2
    third = planting.plant_flaws(benchmark, ["rubric_contradicts"], 1, user=admin_user)[0]
    body = reviewer_client.post(
        "/api/candidates/bulk-decide/",
        {"candidates": [_ready(third).pk], "decision": "accept"},
        content_type="application/json",
    ).json()
    (decided,) = body["decided"]
    assert decided["planted"]["outcome"] == "missed" and decided["planted"]["kind"] == "rubric_contradicts"


def test_the_admin_site_lists_plants(benchmark, accepted, admin_user, admin_client):
    (plant,) = planting.plant_flaws(benchmark, ["input_removed"], 1, user=admin_user)
    response = admin_client.get(reverse("admin:review_plantedflaw_changelist"), {"kind__exact": "input_removed"})
    assert response.status_code == 200 and plant.candidate.task.external_id in text(response)
