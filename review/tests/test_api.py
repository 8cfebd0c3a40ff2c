"""The review REST API: role matrix, filters, conflicts."""

import pytest

from benchmarks.models import BenchmarkVersion
from jobs.models import JobRun
from review.models import BenchmarkCandidate, ReviewDecision
from review.services import claim, decide
from review.tests.helpers import add_diagnosis, sanity
from tasks.services import revise_task

URL = "/api/candidates/"


def detail(candidate, what=""):
    return f"{URL}{candidate.pk}/" + (f"{what}/" if what else "")


@pytest.mark.parametrize(
    "who, read, review, admin_only",
    [
        ("outsider", 403, 403, 403),
        ("viewer", 200, 403, 403),
        ("reviewer", 200, 200, 403),
        ("admin_user", 200, 200, 201),
    ],
)
def test_role_matrix(request, api_as, candidate, who, read, review, admin_only):
    client = api_as(request.getfixturevalue(who))
    assert client.get(URL).status_code == read
    assert client.get("/api/benchmarks/").status_code == read
    assert client.get("/api/diagnoses/").status_code == read
    assert client.post(detail(candidate, "claim"), {}, format="json").status_code == review
    assert client.post("/api/benchmarks/", {"name": f"b-{who}"}, format="json").status_code == admin_only


def test_anonymous_is_refused(client, candidate):
    assert client.get(URL).status_code in (401, 403)


def test_claim_conflict_is_409(api_as, candidate, reviewer, second_reviewer):
    assert api_as(reviewer).post(detail(candidate, "claim"), {"minutes": 5}, format="json").json()["claimed_by"] == (
        "rita_reviewer"
    )
    response = api_as(second_reviewer).post(detail(candidate, "claim"), {}, format="json")
    assert response.status_code == 409 and "rita_reviewer holds" in response.json()["detail"]
    assert api_as(second_reviewer).post(detail(candidate, "release")).status_code == 409
    assert api_as(reviewer).post(detail(candidate, "release")).json()["claimed_by"] is None


def test_filters(api_as, reviewer, candidate, benchmark, admin_user):
    from review.services import propose_candidates
    from tasks.testing import make_task

    propose_candidates(benchmark, [make_task("t-two")], user=admin_user)
    add_diagnosis(candidate, [{"severity": "major"}, {"severity": "blocker"}])
    claim(candidate, user=reviewer)
    client = api_as(reviewer)

    def tasks(query):
        response = client.get(URL, query)
        assert response.status_code == 200, response.json()
        return sorted(row["task"] for row in response.json()["results"])

    assert tasks({}) == ["t-review", "t-two"]
    assert tasks({"severity": "blocker"}) == ["t-review"]
    assert tasks({"severity": "major"}) == []
    assert tasks({"severity": "none"}) == ["t-two"]
    assert tasks({"status": "awaiting_diagnosis"}) == ["t-two"]
    assert tasks({"mine": "true"}) == ["t-review"]
    assert tasks({"benchmark": "other"}) == []
    assert client.get(URL, {"severity": "awful"}).status_code == 400
    row = client.get(URL, {"severity": "blocker"}).json()["results"][0]
    assert row["worst_severity"] == "blocker" and row["claimed_by"] == "rita_reviewer"


def test_verdict_apply_fix_and_stale_fix(api_as, reviewer, candidate, django_capture_on_commit_callbacks):
    diagnosis = add_diagnosis(candidate, [{"replacement": "Summarise sales.csv into report.md with totals."}])
    issue = diagnosis.issues.get()
    client = api_as(reviewer)
    response = client.post(detail(candidate, "verdict"), {"verdicts": {str(issue.pk): "valid"}}, format="json")
    assert response.status_code == 201 and response.json()["verdicts"] == {str(issue.pk): "valid"}

    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(detail(candidate, "apply-fix"), {"issue": issue.pk, "base_revision": 1}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["revision"] == 2 and response.json()["sanity_job"]["kind"] == "tasks.sanity_check"

    response = client.post(detail(candidate, "apply-fix"), {"issue": issue.pk, "base_revision": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["current_revision"] == 2
    assert JobRun.objects.count() == 1


def test_decide_blocked_then_admin_override(api_as, reviewer, admin_user, candidate):
    sanity(candidate.task.current_revision, crashed=True)
    response = api_as(reviewer).post(detail(candidate, "decide"), {"decision": "accept"}, format="json")
    assert response.status_code == 409 and "crashed" in response.json()["detail"]
    response = api_as(reviewer).post(
        detail(candidate, "decide"), {"decision": "accept", "override_reason": "fine"}, format="json"
    )
    assert response.status_code == 403
    api_as(reviewer).post(detail(candidate, "release"))
    response = api_as(admin_user).post(
        detail(candidate, "decide"), {"decision": "accept", "override_reason": "known flake"}, format="json"
    )
    assert response.status_code == 201 and response.json()["override_reason"] == "known flake"
    candidate.refresh_from_db()
    assert candidate.status == BenchmarkCandidate.Status.ACCEPTED


def test_reject_without_reason_is_400(api_as, reviewer, candidate):
    response = api_as(reviewer).post(detail(candidate, "decide"), {"decision": "reject"}, format="json")
    assert response.status_code == 400 and "needs a reason" in response.json()["detail"]
    assert not ReviewDecision.objects.exists()


def test_freeze_admin_only_and_versions_listed(api_as, reviewer, admin_user, candidate, benchmark):
    sanity(candidate.task.current_revision)
    decide(candidate, "accept", user=reviewer)
    url = f"/api/benchmarks/{benchmark.pk}/freeze/"
    assert api_as(reviewer).post(url, {}, format="json").status_code == 403
    response = api_as(admin_user).post(url, {"note": "v1"}, format="json")
    assert response.status_code == 201 and response.json()["number"] == 1 and response.json()["task_count"] == 1
    assert response.json()["downloads"]["zip"].startswith("http://testserver/api/benchmark-versions/")
    assert response.json()["revisions"] == [
        {"task": "t-review", "revision": 1, "revision_id": candidate.task.current_revision_id}
    ]
    revise_task(candidate.task, user=reviewer, message="later", instruction="Changed.")
    version = api_as(reviewer).get(f"/api/benchmark-versions/{BenchmarkVersion.objects.get().pk}/").json()
    assert version["revisions"][0]["revision"] == 1


def test_admins_set_the_lazy_tolerance_of_the_accept_gate(api_as, reviewer, admin_user, candidate, benchmark):
    url = f"/api/benchmarks/{benchmark.pk}/lazy-tolerance/"
    assert api_as(reviewer).post(url, {"lazy_tolerance": 0.5}, format="json").status_code == 403
    assert api_as(admin_user).post(url, {"lazy_tolerance": 1.5}, format="json").status_code == 400
    response = api_as(admin_user).post(url, {"lazy_tolerance": 0.25}, format="json")
    assert response.status_code == 200 and response.json()["lazy_tolerance"] == 0.25
    assert api_as(reviewer).get(f"/api/benchmarks/{benchmark.pk}/").json()["lazy_tolerance"] == 0.25

    sanity(candidate.task.current_revision, lazy=0.5, paying={"records_exist": 1.0})
    refused = api_as(reviewer).post(detail(candidate, "decide"), {"decision": "accept"}, format="json")
    assert refused.status_code == 409
    assert "above the tolerance 0.25" in refused.json()["detail"] and "records_exist=1" in refused.json()["detail"]
    created = api_as(admin_user).post("/api/benchmarks/", {"name": "lenient-ok", "lazy_tolerance": 0.1}, format="json")
    assert created.status_code == 201 and created.json()["lazy_tolerance"] == 0.1


def test_detail_and_history(api_as, reviewer, candidate):
    add_diagnosis(candidate, [{"severity": "major"}])
    decide(candidate, "reject", user=reviewer, reason="unclear")
    body = api_as(reviewer).get(detail(candidate)).json()
    assert body["status"] == "rejected" and body["diagnosis"]["issues"][0]["severity"] == "major"
    assert body["decisions"][0]["reason"] == "unclear"
    history = api_as(reviewer).get(detail(candidate, "history")).json()
    assert history[0]["kind"] == "decision"
    diagnoses = api_as(reviewer).get("/api/diagnoses/", {"candidate": candidate.pk}).json()
    assert diagnoses["count"] == 1
