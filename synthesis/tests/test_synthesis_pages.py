"""The synthesis pages with the Django client: who may see and do what, the batch list, start form (and its preview
button), batch page (progress, funnel with reasons and example items, cost per stage, distributions, actions that
follow the batch's state), item page, seeds pages (persona search and import, skills with their labels, override,
bundled import, annotate job), the dashboard panel and the task page's "made by" line.

One batch is made by the real pipeline (synthesis.services.run_here with the scripted generator of tests/scripted.py
and the bubblewrap sandbox); the others are rows written directly, to put a batch in a given state.
"""

import json
import re
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.models import JobRun
from llm.models import ModelEndpoint
from synthesis import skills
from synthesis.batch_report import funnel
from synthesis.job_kinds import ANNOTATE_JOB
from synthesis.models import Persona, Skill, SkillAnnotation, SynthesisBatch, SynthesisItem
from synthesis.pipeline import maybe_finish
from synthesis.services import run_here, start_batch
from synthesis.testing import DEAD_WORKER, ScriptedPipeline, make_batch, running_batch
from tasks.models import Task
from tasks.package import TaskPackage
from tasks.services import save_package

pytestmark = pytest.mark.django_db


def live_attributes(html: str, element_id: str) -> bool:
    tag = re.search(rf'<div id="{element_id}"[^>]*>', html).group(0)
    return 'hx-trigger="every 2s"' in tag


# --- permissions ---------------------------------------------------------------------------------------------------


def test_reading_needs_a_role_and_acting_needs_admin(
    client, outsider_client, viewer_client, reviewer_client, endpoints
):
    batch = running_batch(endpoints)
    item = batch.items.first()
    skill = Skill.objects.create(name="notes", content_hash="x")
    pages = [
        reverse("synthesis:list"),
        reverse("synthesis:detail", args=[batch.pk]),
        reverse("synthesis:item", args=[item.pk]),
        reverse("synthesis:personas"),
        reverse("synthesis:skills"),
        reverse("synthesis:running"),
    ]
    for url in pages:
        assert client.get(url).status_code == 302  # to the login page
        assert outsider_client.get(url).status_code == 403
        assert viewer_client.get(url).status_code == 200, url
    actions = [
        reverse("synthesis:start"),
        reverse("synthesis:resume", args=[batch.pk]),
        reverse("synthesis:cancel", args=[batch.pk]),
        reverse("synthesis:personas-import"),
        reverse("synthesis:skills-import-bundled"),
        reverse("synthesis:skills-annotate"),
        reverse("synthesis:skill-override", args=[skill.pk]),
    ]
    for url in actions:
        assert viewer_client.post(url).status_code == 403, url
        assert reviewer_client.post(url).status_code == 403, url
    assert reviewer_client.get(reverse("synthesis:start")).status_code == 403
    batch.refresh_from_db()
    assert batch.status == SynthesisBatch.Status.RUNNING  # nothing was cancelled by them
    # Viewers see no action buttons.
    page = viewer_client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()
    assert reverse("synthesis:cancel", args=[batch.pk]) not in page


def test_the_nav_links_the_synthesis_pages(viewer_client):
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert f'href="{reverse("synthesis:list")}"' in page


# --- starting ------------------------------------------------------------------------------------------------------


def test_start_form_starts_a_batch_or_a_preview_first(admin_client, endpoints, admin_user):
    form = admin_client.get(reverse("synthesis:start")).content.decode()
    assert 'name="preview"' in form and "Preview (5 items)" in form
    assert 'value="gen" selected' in form.replace("\n", " ") or '<option value="gen" selected>' in form
    fields = {
        "route": "persona",
        "count": "12",
        "generator": "gen",
        "judge": "judge",
        "seed": "41",
        "qa_stages": ["novelty", "plausibility"],
        "budget_usd": "0.5",
    }
    response = admin_client.post(reverse("synthesis:start"), {**fields, "preview": "1"})
    preview = SynthesisBatch.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("synthesis:detail", args=[preview.pk])
    assert (preview.preview, preview.requested, preview.seed, preview.created_by) == (True, 5, 41, admin_user)
    assert preview.options == {"qa_stages": ["novelty", "plausibility"]}
    assert preview.budget_usd == Decimal("0.5")
    assert preview.items.count() == 5
    assert JobRun.objects.get(pk=preview.job_run_id).kind == "synthesis.run_batch"  # queued for the workers

    # The preview's page offers the full batch with its settings.
    page = admin_client.get(reverse("synthesis:detail", args=[preview.pk])).content.decode()
    link = re.search(r'id="full-batch" href="([^"]+)"', page).group(1).replace("&amp;", "&")
    prefilled = admin_client.get(link).content.decode()
    assert 'name="seed" value="41"' in prefilled
    ticked = re.findall(r'name="qa_stages" value="([a-z]+)" id="[^"]+" checked', prefilled)
    assert ticked == ["novelty", "plausibility"]

    response = admin_client.post(reverse("synthesis:start"), {**fields, "start": "1"})
    batch = SynthesisBatch.objects.exclude(pk=preview.pk).get()
    assert (batch.preview, batch.requested) == (False, 12)
    assert response["Location"] == reverse("synthesis:detail", args=[batch.pk])
    # The same settings again go on with that batch instead of drawing its items twice.
    response = admin_client.post(reverse("synthesis:start"), {**fields, "start": "1"}, follow=True)
    assert SynthesisBatch.objects.count() == 2
    assert f"#{batch.pk} goes on instead" in response.content.decode()


def test_start_form_offers_each_role_its_endpoints_and_says_when_none_serves_it(admin_client, endpoints):
    generator, judge = endpoints
    page = admin_client.get(reverse("synthesis:start")).content.decode()
    generators = page[page.index('name="generator"') : page.index("</select>", page.index('name="generator"'))]
    judges = page[page.index('name="judge"') : page.index("</select>", page.index('name="judge"'))]
    assert '<option value="gen"' in generators and "judge" not in generators.split(">", 1)[1]
    assert '<option value="judge"' in judges and 'value="gen"' not in judges
    ModelEndpoint.objects.filter(pk=judge.pk).update(roles=["agent"])
    page = admin_client.get(reverse("synthesis:start")).content.decode()
    assert "No enabled endpoint serves the judge role: give one that role on the Models page" in page


def test_start_form_every_qa_stage_is_the_commands_default(admin_client, endpoints):
    fields = {
        "route": "persona",
        "count": "3",
        "generator": "gen",
        "judge": "judge",
        "seed": "5",
        "start": "1",
        "qa_stages": ["novelty", "plausibility", "difficulty", "leak", "alignment", "rubric"],
    }
    admin_client.post(reverse("synthesis:start"), fields)
    assert SynthesisBatch.objects.get().options == {}
    fields["qa_stages"] = []
    fields["seed"] = "6"
    admin_client.post(reverse("synthesis:start"), fields)
    assert SynthesisBatch.objects.get(seed=6).options == {"qa_stages": []}


def test_start_form_errors_are_shown_and_nothing_starts(admin_client, endpoints):
    response = admin_client.post(
        reverse("synthesis:start"),
        {"route": "persona", "count": "0", "generator": "gen", "judge": "nobody", "start": "1"},
    )
    assert response.status_code == 400
    assert not SynthesisBatch.objects.exists()
    # The skill route without a synthesizable skill: the form links the Skills page, where import and annotate are.
    response = admin_client.post(
        reverse("synthesis:start"), {"route": "skill", "count": "2", "generator": "gen", "judge": "judge", "start": "1"}
    )
    assert response.status_code == 400
    assert (
        f'import and annotate them on the <a href="{reverse("synthesis:skills")}">Skills page</a>'
        in response.content.decode()
    )
    assert "`import_skills`" not in response.content.decode()
    assert not SynthesisBatch.objects.exists()


# --- the batch page --------------------------------------------------------------------------------------------------


def test_a_running_batch_polls_and_a_finished_one_does_not(viewer_client, admin_client, endpoints):
    batch = running_batch(endpoints)
    url = reverse("synthesis:detail", args=[batch.pk])
    page = viewer_client.get(url).content.decode()
    assert live_attributes(page, "batch-live")
    assert 'aria-valuenow="33"' in page and "1/3 items" in page  # one of three finished
    # Where the items are: pending, running, kept, rejected, failed per stage reached.
    cells = re.findall(r'<tr data-stage="(\w+)"><td>[^<]+</td>((?:<td class="num">.*?</td>){5})</tr>', page)
    counts = {stage: re.findall(r"(\d+)(?:</span>)?</td>", row) for stage, row in cells}
    assert counts == {
        "generate": ["0", "0", "0", "1", "0"],
        "files": ["1", "0", "0", "0", "0"],
        "verify": ["0", "1", "0", "0", "0"],
    }
    # htmx gets the partial alone, its polling attributes included.
    partial = viewer_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<div id="batch-live"') and "<html" not in partial
    admin_page = admin_client.get(url).content.decode()
    assert reverse("synthesis:cancel", args=[batch.pk]) in admin_page
    assert reverse("synthesis:resume", args=[batch.pk]) not in admin_page  # running: nothing to resume

    SynthesisBatch.objects.filter(pk=batch.pk).update(status=SynthesisBatch.Status.CANCELLED)
    partial = viewer_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert not live_attributes(partial, "batch-live")
    admin_page = admin_client.get(url).content.decode()
    assert reverse("synthesis:resume", args=[batch.pk]) in admin_page
    assert reverse("synthesis:cancel", args=[batch.pk]) not in admin_page


def test_cancel_and_resume_call_the_services(admin_client, endpoints):
    batch = running_batch(endpoints)
    response = admin_client.post(reverse("synthesis:cancel", args=[batch.pk]), follow=True)
    batch.refresh_from_db()
    assert batch.status == SynthesisBatch.Status.CANCELLED and "is cancelled" in response.content.decode()
    assert "ada_admin" in batch.status_reason
    response = admin_client.post(reverse("synthesis:cancel", args=[batch.pk]), follow=True)
    assert "has finished already" in response.content.decode()
    # The running item had a worker that is long gone: resuming reclaims it and queues the batch again.
    SynthesisItem.objects.filter(batch=batch, status="running").update(worker=DEAD_WORKER)
    response = admin_client.post(reverse("synthesis:resume", args=[batch.pk]), follow=True)
    batch.refresh_from_db()
    assert batch.status == SynthesisBatch.Status.QUEUED and "goes on" in response.content.decode()
    assert not batch.items.filter(status="running").exists()
    assert JobRun.objects.filter(pk=batch.job_run_id, kind="synthesis.run_batch").exists()


def test_list_shows_progress_and_polls_while_a_batch_runs(viewer_client, endpoints):
    generator, judge = endpoints
    running = running_batch(endpoints)
    done = make_batch(
        generator, judge, status=SynthesisBatch.Status.COMPLETE, seed=9, items=[("kept", "catalog", {}, "")]
    )
    page = viewer_client.get(reverse("synthesis:list")).content.decode()
    assert f'data-batch="{running.pk}"' in page and f'data-batch="{done.pk}"' in page
    assert 'id="batches" class="card" hx-get=' in page
    assert "0.0125" in page and "1,250" in page  # cost and tokens
    page = viewer_client.get(reverse("synthesis:list") + "?status=complete").content.decode()
    assert f'data-batch="{running.pk}"' not in page and 'hx-trigger="every 2s"' not in page


def test_a_batch_whose_every_item_failed_has_failed_and_one_with_failures_is_not_green(viewer_client, endpoints):
    generator, judge = endpoints
    failing = {"files": {"verdict": "error", "reason": "HTTP 503", "retryable": True}}
    all_failed = make_batch(
        generator,
        judge,
        items=[
            ("failed", "files", failing, "files: the generator did not answer (HTTP 503)"),
            ("failed", "files", failing, "files: the generator did not answer (HTTP 503)"),
            ("failed", "generate", {}, "generate: not JSON"),
        ],
    )
    some_failed = make_batch(
        generator,
        judge,
        seed=4,
        items=[
            ("kept", "catalog", {}, ""),
            ("failed", "files", failing, "files: HTTP 503"),
        ],
    )
    none_kept = make_batch(generator, judge, seed=5, items=[("rejected", "generate", {}, "generate: needs the web")])
    for batch in (all_failed, some_failed, none_kept):
        assert maybe_finish(batch.pk)
        batch.refresh_from_db()
    assert (all_failed.status, some_failed.status, none_kept.status) == ("failed", "complete", "complete")
    assert all_failed.status_reason == (
        "All 3 items failed, most at the resource preparation stage: files: the generator did not answer (HTTP 503)"
    )

    page = viewer_client.get(reverse("synthesis:detail", args=[all_failed.pk])).content.decode()
    assert '<span class="badge s-failed" id="batch-status">Failed</span>' in page and "All 3 items failed" in page
    assert 'class="progress failed"' in page
    page = viewer_client.get(reverse("synthesis:detail", args=[some_failed.pk])).content.decode()
    assert '<span class="badge s-partial" id="batch-status">Complete · 1 failed</span>' in page
    assert 'class="progress partial"' in page and 'class="progress succeeded"' not in page
    listed = viewer_client.get(reverse("synthesis:list")).content.decode()
    row = listed[listed.index(f'data-batch="{none_kept.pk}"') :]
    assert '<span class="badge s-partial">Complete · none kept</span>' in row[: row.index("</tr>")]
    row = listed[listed.index(f'data-batch="{all_failed.pk}"') :]
    assert '<span class="badge s-failed">Failed</span>' in row[: row.index("</tr>")]


def test_the_difficulty_charts_say_whose_rating_they_show(viewer_client, endpoints):
    generator, judge = endpoints
    batch = make_batch(
        generator,
        judge,
        status=SynthesisBatch.Status.COMPLETE,
        items=[("kept", "catalog", {}, ""), ("rejected", "qa", {}, "qa: too easy")],
    )
    judged = {"difficulty": {"verdict": "pass", "reason": "level 4", "details": {"level": 4}}}
    SynthesisItem.objects.filter(batch=batch, index=0).update(draft={"difficulty": 2, "qa": judged})
    too_easy = {"difficulty": {"verdict": "fail", "reason": "level 1", "details": {"level": 1}}}
    SynthesisItem.objects.filter(batch=batch, index=1).update(draft={"difficulty": 3, "qa": too_easy})

    page = viewer_client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()
    mine = page.index("<h2>Difficulty as the generator rated its own task</h2>")
    theirs = page.index("<h2>Difficulty as the judge found it (quality assessment)</h2>")
    charts = {
        chart["labels"] == ["2", "3"]: chart
        for chart in (
            json.loads(re.search(r'id="chart-difficulty" type="application/json">([^<]+)<', page).group(1)),
            json.loads(re.search(r'id="chart-judge_difficulty" type="application/json">([^<]+)<', page).group(1)),
        )
    }
    assert mine < theirs and charts[True]["datasets"][1]["data"] == [1, 0]  # the generator's: 2 (kept) and 3
    assert charts[False]["labels"] == ["1", "4"] and charts[False]["datasets"][1]["data"] == [0, 1]


# --- a batch made by the pipeline ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap")
def test_pages_of_a_batch_the_pipeline_made(viewer_client, endpoints, scripted_upstream):
    scripted_upstream.responder = ScriptedPipeline(["good", "broken", "network", "lenient"])
    generator, judge = endpoints
    batch = start_batch("persona", 4, generator, judge, seed=11, options={"qa_stages": []}, here=True, user=None)
    batch = run_here(batch)
    assert batch.status == SynthesisBatch.Status.COMPLETE
    broken = next(i for i in batch.items.all() if "[case:broken]" in json.dumps(i.draft))
    kept = batch.items.filter(status="kept").order_by("index")
    assert kept.count() == 2

    page = viewer_client.get(reverse("synthesis:detail", args=[batch.pk])).content.decode()
    assert not live_attributes(page, "batch-live")
    assert '<span id="count-kept">2</span>' in page and '<span id="count-rejected">2</span>' in page
    # The funnel's rows are batches.funnel's, with the rejections' reasons and example items linked.
    for row in funnel(batch):
        assert re.search(
            rf'<tr data-step="{row["step"]}"><td>[^<]+</td><td class="num passed">{row["count"]}</td>', page
        ), row
    assert reverse("synthesis:item", args=[broken.pk]) in page
    assert "no sane, solvable checker after 3 rounds" in page
    assert 'data-purpose="synthesis:verify"' in page and 'data-purpose="synthesis:generate"' in page
    assert 'data-chart="chart-funnel"' in page and 'id="chart-subcategories"' in page
    assert 'id="chart-operations"' in page and 'id="chart-difficulty"' in page

    # The broken item's page: its three verify rounds with their sanity feedback.
    page = viewer_client.get(reverse("synthesis:item", args=[broken.pk])).content.decode()
    assert page.count('data-round="verify-') == 3 and "Rejected" in page
    assert 'data-kind="solution"' in page and "the reference solution scores 0, not 1.0" in page
    assert "a nurse" not in page  # a real seed: the persona drawn
    assert broken.seed["persona"]["text"][:40] in page

    # A kept item links its task; the task's page says how it was made.
    item = kept.first()
    page = viewer_client.get(reverse("synthesis:item", args=[item.pk])).content.decode()
    assert reverse("tasks:detail", args=[item.task.external_id]) in page
    task_page = viewer_client.get(reverse("tasks:detail", args=[item.task.external_id])).content.decode()
    assert (
        f'Made by <a href="/synthesis/{batch.pk}/">synthesis batch #{batch.pk}</a>, '
        f'<a href="/synthesis/items/{item.pk}/">item #{item.pk}</a>'
    ) in task_page
    assert viewer_client.get(f"/synthesis/items/{item.pk}/").status_code == 200


def test_a_task_not_synthesized_has_no_made_by_line(viewer_client):
    saved = save_package(
        TaskPackage(external_id="hand-1", instruction="Write hello.txt.", metadata={}, files=[]),
        user=None,
        stage="import",
        message="by hand",
    )
    page = viewer_client.get(reverse("tasks:detail", args=[saved.task.external_id])).content.decode()
    assert "Made by" not in page and 'id="made-by"' not in page


# --- seeds -----------------------------------------------------------------------------------------------------------


def test_personas_search_and_import(viewer_client, admin_client):
    shipped = Persona.objects.count()
    assert shipped >= 200  # the migration's
    page = viewer_client.get(reverse("synthesis:personas")).content.decode()
    assert f"{shipped} persona" in page and 'id="persona-import"' not in page
    upload = SimpleUploadedFile(
        "hub.jsonl", b'{"persona": "A beekeeper in Ghent"}\nnot json\n{"persona": "a beekeeper  in ghent"}\n'
    )
    response = admin_client.post(reverse("synthesis:personas-import"), {"file": upload}, follow=True)
    text = response.content.decode()
    assert "1 imported, 0 updated, 1 unchanged, 1 failed" in text and "hub.jsonl:2" in text
    page = viewer_client.get(reverse("synthesis:personas") + "?q=ghent").content.decode()
    assert "A beekeeper in Ghent" in page and "1 persona matching" in page
    partial = viewer_client.get(reverse("synthesis:personas") + "?q=ghent", headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<section class="card" id="personas">')


def test_skills_page_labels_override_and_annotate(viewer_client, admin_client, endpoints):
    usable = Skill.objects.create(name="csv-tools", description="Read CSV", content_hash="a")
    SkillAnnotation.objects.create(
        skill=usable, summary="Reads CSV files", auth_required=False, text_only_compatible=True, synthesizable=True
    )
    lacking = Skill.objects.create(name="pdf-render", content_hash="b")
    SkillAnnotation.objects.create(
        skill=lacking,
        summary="Renders PDFs",
        auth_required=False,
        text_only_compatible=True,
        missing_bins=["pdftoppm"],
        synthesizable=False,
    )
    Skill.objects.create(name="fresh", content_hash="c", annotation_error="the judge timed out")
    page = viewer_client.get(reverse("synthesis:skills")).content.decode()
    assert "1 of 3 synthesizable" in page and "pdftoppm" in page and "the judge timed out" in page
    assert 'class="override-form"' not in page

    url = reverse("synthesis:skill-override", args=[lacking.pk])
    response = admin_client.post(url, {"synthesizable": "yes", "reason": ""}, follow=True)
    assert "Say why" in response.content.decode()
    lacking.refresh_from_db()
    assert lacking.synthesizable_override is None
    admin_client.post(url, {"synthesizable": "yes", "reason": "pdftoppm is optional"})
    lacking.refresh_from_db()
    assert (lacking.synthesizable_override, lacking.override_reason) == (True, "pdftoppm is optional")
    page = viewer_client.get(reverse("synthesis:skills") + "?label=yes").content.decode()
    assert 'data-skill="pdf-render"' in page and 'data-skill="fresh"' not in page
    assert "overridden by ada_admin: pdftoppm is optional" in page
    admin_client.post(url, {"synthesizable": "", "reason": ""})
    lacking.refresh_from_db()
    assert lacking.synthesizable_override is None

    response = admin_client.post(reverse("synthesis:skills-annotate"))
    run = JobRun.objects.get(kind=ANNOTATE_JOB)
    assert response["Location"] == reverse("jobs:detail", args=[run.pk])
    assert run.params["skill_ids"] is None


def test_bundled_skills_import_reports_what_it_did(admin_client, settings, tmp_path):
    try:
        skills.bundled_skills_dir()
    except skills.SkillImportError:
        response = admin_client.post(reverse("synthesis:skills-import-bundled"), follow=True)
        assert "The bundled skills were not imported" in response.content.decode()
        return
    response = admin_client.post(reverse("synthesis:skills-import-bundled"), follow=True)
    assert re.search(r"Skills bundled with OpenClaw: \d+ imported", response.content.decode())
    assert Skill.objects.count() >= 50


# --- the dashboard ---------------------------------------------------------------------------------------------------


def test_dashboard_panel_launches_and_follows_batches(admin_client, viewer_client, endpoints):
    page = admin_client.get(reverse("dashboard")).content.decode()
    assert 'id="synthesis-panel"' in page and 'id="synthesis-launch-form"' in page
    assert f'action="{reverse("synthesis:start")}"' in page
    assert page.count('name="qa_stages"') == 6 and 'name="budget_usd"' not in page  # the small form
    assert "No synthesis batch yet." in page
    viewer_page = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'id="synthesis-panel"' in viewer_page and 'id="synthesis-launch-form"' not in viewer_page

    batch = running_batch(endpoints)
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert f'data-batch="{batch.pk}"' in page and "1/3 items" in page
    assert f'hx-get="{reverse("synthesis:running")}" hx-trigger="every 2s"' in page
    SynthesisBatch.objects.filter(pk=batch.pk).update(status=SynthesisBatch.Status.COMPLETE)
    partial = viewer_client.get(reverse("synthesis:running")).content.decode()
    assert f'data-batch="{batch.pk}"' in partial and "every 2s" not in partial


def test_item_page_of_an_item_not_started(viewer_client, endpoints):
    batch = running_batch(endpoints)
    item = batch.items.get(status="pending")
    page = viewer_client.get(reverse("synthesis:item", args=[item.pk])).content.decode()
    assert 'data-stage="files" data-verdict="next"' in page
    assert 'data-stage="verify" data-verdict="not reached"' in page
    assert live_attributes(page, "item-live")
    assert Task.objects.count() == 0
