"""The synthesis REST API: batches (list, filters, detail = the `synthesize --json` shape with the funnel, start with
its preview and resume-instead, resume, cancel, report), items (filters, detail with stage results and draft),
personas (list, import), skills (latest annotation, label, override, annotate job, bundled import), quality
assessments (filters, the assess job) and who may do what. One batch is made by the real pipeline (scripted model,
bubblewrap); the others are rows written directly.
"""

import json
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.models import JobRun
from synthesis.batch_report import batch_json, funnel, report
from synthesis.job_kinds import ANNOTATE_JOB, ASSESS_JOB
from synthesis.models import Persona, QualityAssessment, Skill, SkillAnnotation, SynthesisBatch, SynthesisItem
from synthesis.services import run_here, start_batch
from synthesis.testing import DEAD_WORKER, ScriptedPipeline, make_batch, running_batch
from tasks.package import TaskPackage
from tasks.services import save_package

pytestmark = pytest.mark.django_db

BATCHES = "/api/synthesis/batches/"
ITEMS = "/api/synthesis/items/"
PERSONAS = "/api/synthesis/personas/"
SKILLS = "/api/synthesis/skills/"
QA = "/api/quality-assessments/"


@pytest.fixture
def admin_api(api_as, admin_user):
    return api_as(admin_user)


@pytest.fixture
def viewer_api(api_as, viewer):
    return api_as(viewer)


@pytest.fixture
def reviewer_api(api_as, reviewer):
    return api_as(reviewer)


# --- batches -------------------------------------------------------------------------------------------------------


def test_reads_need_a_role_and_writes_need_admin(api_as, outsider, viewer_api, reviewer_api, endpoints):
    batch = running_batch(endpoints)
    skill = Skill.objects.create(name="notes", content_hash="x")
    outsider_api = api_as(outsider)
    for url in (BATCHES, f"{BATCHES}{batch.pk}/", ITEMS, PERSONAS, SKILLS, QA):
        assert outsider_api.get(url).status_code == 403, url
        assert viewer_api.get(url).status_code == 200, url
    writes = [
        (BATCHES, {"route": "persona", "count": 2, "generator": "gen", "judge": "judge"}),
        (f"{BATCHES}{batch.pk}/cancel/", {}),
        (f"{BATCHES}{batch.pk}/resume/", {}),
        (f"{PERSONAS}import/", {}),
        (f"{SKILLS}{skill.name}/override/", {"synthesizable": None}),
        (f"{SKILLS}annotate/", {}),
        (f"{SKILLS}import-bundled/", {}),
        (f"{QA}assess/", {"all": True}),
    ]
    for url, body in writes:
        assert reviewer_api.post(url, body, format="json").status_code == 403, url
    batch.refresh_from_db()
    assert batch.status == SynthesisBatch.Status.RUNNING and SynthesisBatch.objects.count() == 1


def test_unknown_list_parameters_are_a_400(viewer_api):
    for url in (BATCHES, ITEMS, PERSONAS, SKILLS, QA):
        response = viewer_api.get(url + "?staus=running")
        assert response.status_code == 400 and "staus" in response.json(), url
    assert viewer_api.get(BATCHES + "?status=lost").status_code == 400
    assert viewer_api.get(ITEMS + "?stage=nowhere").status_code == 400


def test_start_a_preview_then_the_same_again_goes_on_with_it(admin_api, endpoints, admin_user):
    body = {
        "route": "persona",
        "preview": True,
        "generator": "gen",
        "judge": "judge",
        "seed": 8,
        "qa_stages": ["novelty"],
        "options": {"operations": 2},
        "budget_usd": "0.25",
    }
    response = admin_api.post(BATCHES, body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    batch = SynthesisBatch.objects.get()
    assert response["Location"].endswith(f"{BATCHES}{batch.pk}/")
    assert (batch.preview, batch.requested, batch.seed, batch.created_by) == (True, 5, 8, admin_user)
    assert batch.options == {"operations": 2, "qa_stages": ["novelty"]} and batch.budget_usd == Decimal("0.25")
    assert data["resumed"] is False and data["preview"] is True and data["budget_usd"] == 0.25
    assert {k: data[k] for k in ("batch", "status", "requested", "kept", "rejected", "failed", "tokens", "cost")} == (
        batch_json(batch)
    )
    assert [row["step"] for row in data["funnel"]] == [row["step"] for row in funnel(batch)]
    assert JobRun.objects.get(pk=batch.job_run_id).kind == "synthesis.run_batch"

    again = admin_api.post(BATCHES, {**body, "budget_usd": "1"}, format="json")
    assert again.status_code == 200 and again.json()["resumed"] is True and again.json()["batch"] == batch.pk
    assert SynthesisBatch.objects.count() == 1


def test_start_is_validated(admin_api, endpoints):
    base = {"route": "persona", "generator": "gen", "judge": "judge"}
    cases = [
        ({**base}, "count"),
        ({**base, "count": 0}, "count"),
        ({**base, "count": 2, "judge": "nobody"}, "judge"),
        ({**base, "count": 2, "qa_stages": ["taste"]}, "qa_stages"),
        ({**base, "count": 2, "options": {"colour": "red"}}, "options"),
        ({**base, "route": "dream", "count": 2}, "route"),
    ]
    for body, field in cases:
        response = admin_api.post(BATCHES, body, format="json")
        assert response.status_code == 400 and field in response.json(), (body, response.json())
    response = admin_api.post(BATCHES, {**base, "route": "skill", "count": 2}, format="json")
    assert response.status_code == 400 and "synthesizable skills" in response.json()["detail"]
    assert not SynthesisBatch.objects.exists()


def test_list_filters_and_detail(viewer_api, endpoints):
    generator, judge = endpoints
    running = running_batch(endpoints)
    done = make_batch(
        generator,
        judge,
        status=SynthesisBatch.Status.COMPLETE,
        preview=True,
        seed=4,
        items=[("kept", "catalog", {}, "")],
    )
    rows = viewer_api.get(BATCHES).json()["results"]
    assert [r["id"] for r in rows] == [done.pk, running.pk]  # newest first
    assert rows[1]["tokens"] == 1250 and rows[1]["cost"] == 0.0125 and rows[1]["generator"] == "gen"
    assert [(r["finished"], r["kept"], r["rejected"], r["failed"]) for r in rows] == [(1, 1, 0, 0), (1, 0, 1, 0)]
    assert [r["id"] for r in viewer_api.get(BATCHES + "?status=running").json()["results"]] == [running.pk]
    assert [r["id"] for r in viewer_api.get(BATCHES + "?preview=true").json()["results"]] == [done.pk]
    detail = viewer_api.get(f"{BATCHES}{running.pk}/").json()
    assert detail["rejected"] == {"generate": 1} and detail["kept"] == 0 and detail["status"] == "running"
    generated = next(row for row in detail["funnel"] if row["step"] == "generated")
    assert generated["count"] == 2 and generated["rejected"] == 1
    assert generated["reasons"][0]["examples"] == [running.items.get(status="rejected").pk]


def test_cancel_resume_and_report(admin_api, endpoints):
    batch = running_batch(endpoints)
    assert admin_api.post(f"{BATCHES}{batch.pk}/resume/").status_code == 409  # it is running
    response = admin_api.post(f"{BATCHES}{batch.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert admin_api.post(f"{BATCHES}{batch.pk}/cancel/").status_code == 409
    SynthesisItem.objects.filter(batch=batch, status="running").update(worker=DEAD_WORKER)
    response = admin_api.post(f"{BATCHES}{batch.pk}/resume/", {"budget_usd": "2.5"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "queued"
    batch.refresh_from_db()
    assert batch.budget_usd == Decimal("2.5") and batch.items.filter(status="running").count() == 0
    body = admin_api.get(f"{BATCHES}{batch.pk}/report/").json()
    assert body == json.loads(json.dumps(report(batch)))


# --- items ---------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap")
def test_items_of_a_batch_the_pipeline_made(viewer_api, endpoints, scripted_upstream):
    scripted_upstream.responder = ScriptedPipeline(["good", "broken", "network"])
    batch = run_here(start_batch("persona", 3, *endpoints, seed=2, options={"qa_stages": []}, here=True, user=None))
    other = running_batch(endpoints)
    rows = viewer_api.get(f"{ITEMS}?batch={batch.pk}").json()["results"]
    assert [r["index"] for r in rows] == [0, 1, 2] and all(r["batch"] == batch.pk for r in rows)
    assert "draft" not in rows[0] and "stage_results" not in rows[0]
    rejected = viewer_api.get(f"{ITEMS}?batch={batch.pk}&status=rejected").json()["results"]
    assert sorted(r["rejected_at"] for r in rejected) == ["generate", "verify"]
    kept = viewer_api.get(f"{ITEMS}?batch={batch.pk}&status=kept").json()["results"]
    assert len(kept) == 1 and kept[0]["task"] == f"syn-{batch.pk}-{kept[0]['index'] + 1}"
    assert kept[0]["rejected_at"] is None and kept[0]["tokens"] > 0
    at_verify = viewer_api.get(f"{ITEMS}?stage=verify").json()["results"]
    assert {r["batch"] for r in at_verify} == {batch.pk, other.pk}

    broken = next(r for r in rejected if r["rejected_at"] == "verify")
    detail = viewer_api.get(f"{ITEMS}{broken['id']}/").json()
    assert len(detail["stage_results"]["verify"]["rounds"]) == 3
    assert "[case:broken]" in detail["draft"]["instruction"]


# --- seeds ---------------------------------------------------------------------------------------------------------


def test_personas_list_and_import(viewer_api, admin_api):
    total = Persona.objects.count()
    assert viewer_api.get(PERSONAS).json()["count"] == total
    upload = SimpleUploadedFile("more.txt", b"A tram driver in Lisbon\n\nA tram driver in lisbon\nA night nurse\n")
    response = admin_api.post(f"{PERSONAS}import/", {"file": upload}, format="multipart")
    assert response.status_code == 200
    assert response.json() == {"imported": 2, "updated": 0, "unchanged": 1, "failed": [], "failed_count": 0}
    found = viewer_api.get(PERSONAS + "?q=tram driver").json()["results"]
    assert [p["text"] for p in found] == ["A tram driver in Lisbon"] and found[0]["source"] == "more.txt"
    assert admin_api.post(f"{PERSONAS}import/", {}, format="multipart").status_code == 400


def test_skills_annotation_label_override_and_annotate(viewer_api, admin_api, admin_user, endpoints):
    skill = Skill.objects.create(name="pdf-render", content_hash="b", required_bins=["pdftoppm"])
    SkillAnnotation.objects.create(
        skill=skill, summary="old", auth_required=False, text_only_compatible=True, synthesizable=True
    )
    SkillAnnotation.objects.create(
        skill=skill,
        summary="Renders PDFs",
        auth_required=False,
        text_only_compatible=True,
        missing_bins=["pdftoppm"],
        synthesizable=False,
    )
    Skill.objects.create(name="fresh", content_hash="c")
    rows = viewer_api.get(SKILLS).json()["results"]
    assert [r["name"] for r in rows] == ["fresh", "pdf-render"]
    assert rows[0]["annotation"] is None and rows[0]["synthesizable"] is False
    assert rows[1]["annotation"]["summary"] == "Renders PDFs" and rows[1]["annotation"]["missing_bins"] == ["pdftoppm"]
    assert [r["name"] for r in viewer_api.get(SKILLS + "?annotated=false").json()["results"]] == ["fresh"]

    url = f"{SKILLS}pdf-render/override/"
    response = admin_api.post(url, {"synthesizable": True}, format="json")
    assert response.status_code == 400 and "reason" in response.json()
    response = admin_api.post(url, {"synthesizable": True, "reason": "the binary is optional"}, format="json")
    assert response.status_code == 200
    assert (response.json()["synthesizable"], response.json()["override_by"]) == (True, admin_user.username)
    assert viewer_api.get(f"{SKILLS}pdf-render/").json()["override_reason"] == "the binary is optional"
    response = admin_api.post(url, {"synthesizable": None}, format="json")
    assert response.json()["synthesizable"] is False and response.json()["synthesizable_override"] is None

    response = admin_api.post(f"{SKILLS}annotate/", {"skills": ["pdf-render"], "endpoint": "judge"}, format="json")
    assert response.status_code == 202 and response.json()["kind"] == ANNOTATE_JOB
    run = JobRun.objects.get(kind=ANNOTATE_JOB)
    assert run.params["skill_ids"] == [skill.pk] and run.params["endpoint"] == "judge"
    response = admin_api.post(f"{SKILLS}annotate/", {"skills": ["nope"]}, format="json")
    assert response.status_code == 400 and "nope" in str(response.json())
    response = admin_api.post(f"{SKILLS}annotate/", {"endpoint": "missing"}, format="json")
    assert response.status_code == 400 and "missing" in response.json()["detail"]


# --- quality assessments -------------------------------------------------------------------------------------------


def test_quality_assessments_filters_and_assess(viewer_api, admin_api):
    a = save_package(
        TaskPackage(external_id="qa-a", instruction="Write a.txt.", metadata={}, files=[]), stage="import"
    ).revision
    b = save_package(
        TaskPackage(external_id="qa-b", instruction="Write b.txt.", metadata={}, files=[]), stage="import"
    ).revision
    QualityAssessment.objects.create(
        revision=a, stage="novelty", verdict="fail", reason="near qa-b", details={"nearest": "qa-b", "similarity": 0.97}
    )
    QualityAssessment.objects.create(revision=a, stage="difficulty", verdict="pass", reason="2", details={"level": 2})
    QualityAssessment.objects.create(revision=b, stage="novelty", verdict="pass", reason="new")
    rows = viewer_api.get(QA + "?task=qa-a").json()["results"]
    assert [(r["stage"], r["verdict"]) for r in rows] == [("difficulty", "pass"), ("novelty", "fail")]
    assert rows[1]["details"] == {"nearest": "qa-b", "similarity": 0.97} and rows[1]["revision"] == 1
    assert [r["task"] for r in viewer_api.get(QA + "?stage=novelty&verdict=pass").json()["results"]] == ["qa-b"]

    response = admin_api.post(f"{QA}assess/", {"tasks": ["qa-a", "qa-b"], "stages": ["novelty"]}, format="json")
    assert response.status_code == 202, response.json()
    run = JobRun.objects.get(kind=ASSESS_JOB)
    assert response.json()["id"] == run.pk
    assert (run.params["task_ids"], run.params["stages"], run.progress_total) == (["qa-a", "qa-b"], ["novelty"], 2)
    # A judged stage with no judge endpoint: refused before anything is queued.
    response = admin_api.post(f"{QA}assess/", {"all": True, "stages": ["plausibility"]}, format="json")
    assert response.status_code == 400 and "judge" in response.json()["detail"]
    assert JobRun.objects.filter(kind=ASSESS_JOB).count() == 1
    for body in ({"tasks": ["nope"]}, {}, {"all": True, "tasks": ["qa-a"]}, {"all": True, "stages": ["taste"]}):
        assert admin_api.post(f"{QA}assess/", body, format="json").status_code == 400, body
