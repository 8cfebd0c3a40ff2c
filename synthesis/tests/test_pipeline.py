"""The synthesis pipeline end to end: both routes against one scripted model on loopback (generator and judge),
checkers proven by the real sandboxed sanity check (bubblewrap), faults taking their documented paths, budget
pauses, resumes after a killed worker, the jobs that fan a batch out, and the commands' JSON.

Most batches here run with no QA stages (--qa-stages ""); the QA tests run synthesis.qa_checks itself, its judge's
answers scripted (Judges).
"""

import importlib
import json
import socket
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.models import JobRun
from jobs.runner import execute
from jobs.testing import start_django_q_worker, use_engine
from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply
from synthesis import pipeline
from synthesis.batch_plan import BatchError, batch_config, draw_seeds
from synthesis.batch_report import batch_json
from synthesis.models import AtomicOperation, Skill, SkillAnnotation, SynthesisBatch, SynthesisItem
from synthesis.services import resume_batch, run_here, start_batch
from synthesis.stages import verify
from synthesis.testing import ScriptedPipeline
from tasks.models import ScenarioSubcategory, Task
from tasks.sanity import check_revision

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("bwrap")]

# A worker id on this host whose process does not exist: jobs.runner.worker_gone says it is gone.
DEAD_WORKER = f"{socket.gethostname()}:4190001:1"


def scripted(upstream, cases) -> ScriptedPipeline:
    upstream.responder = ScriptedPipeline(cases)
    return upstream.responder


def synthesize(*args, ok=True) -> dict:
    out = StringIO()
    try:
        call_command("synthesize", *args, "--json", stdout=out, stderr=StringIO())
    except CommandError:
        if ok:
            raise
    else:
        assert ok, "synthesize exited 0 for a batch that is not complete"
    return json.loads(out.getvalue().strip().splitlines()[-1])


def report(batch_id: int) -> dict:
    out = StringIO()
    call_command("synthesis_report", str(batch_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def item_playing(batch_id: int, case: str) -> SynthesisItem:
    for item in SynthesisItem.objects.filter(batch_id=batch_id):
        if f"[case:{case}]" in json.dumps(item.draft):
            return item
    raise AssertionError(f"no item plays {case}")


def generate_calls(item) -> list[ModelCall]:
    return list(ModelCall.objects.filter(subject=item.subject, purpose="synthesis:generate").order_by("pk"))


# --- the persona route, with every fault ----------------------------------------------------------------------

CASES = ["good", "lenient", "broken", "network", "badjson_once", "badjson_always", "badfiles_once", "rubric"]


def test_persona_route_end_to_end_with_faults(endpoints, scripted_upstream):
    model = scripted(scripted_upstream, CASES)
    found = synthesize(
        "--route",
        "persona",
        "--count",
        "8",
        "--generator",
        "gen",
        "--judge",
        "judge",
        "--seed",
        "7",
        "--qa-stages",
        "",
        "--here",
    )
    batch = SynthesisBatch.objects.get(pk=found["batch"])
    assert found == {
        "batch": batch.pk,
        "status": "complete",
        "requested": 8,
        "kept": 5,
        "rejected": {"generate": 1, "verify": 1},
        "failed": {"generate": 1},
        "tokens": batch.input_tokens + batch.output_tokens,
        "cost": float(batch.cost),
    }
    calls = ModelCall.objects.filter(subject__startswith="synthesis-item:")
    assert found["tokens"] == sum(c.input_tokens + c.output_tokens for c in calls) > 0
    assert found["cost"] == pytest.approx(float(sum(c.cost for c in calls))) and found["cost"] > 0
    # 8 generations + 2 repair turns; 6 file sets + 1 regeneration; verify rounds 1+2+3+1+1+1; 5 rubrics.
    assert len(scripted_upstream.requests) == 10 + 7 + 9 + 5 == calls.count()

    # Kept tasks are in the catalog as drafts, with where they came from, and really pass the sanity check.
    tasks = Task.objects.filter(external_id__startswith=f"syn-{batch.pk}-").order_by("external_id")
    assert tasks.count() == 5
    for task in tasks:
        assert (task.source, task.status) == (Task.Source.PERSONA, Task.Status.DRAFT)
        revision = task.current_revision
        made = revision.metadata["synthesis"]
        item = SynthesisItem.objects.get(pk=made["item"])
        assert (made["batch"], made["route"], made["seed"]) == (batch.pk, "persona", item.seed)
        assert made["prompt_versions"]["verify"] == "verify/2"
        assert item.task == task and item.status == SynthesisItem.Status.KEPT
        assert sorted(revision.files.values_list("role", "path")) == [
            ("input", "sales.csv"),
            ("reward", "check.py"),
            ("reward", "reward.sh"),
            ("solution", "totals.json"),
        ]
        assert revision.metadata["scenario_subcategory"] == item.seed["subcategory"]["slug"]
    sanity = check_revision(tasks[0].current_revision)
    assert (sanity.solvable, sanity.over_lenient, sanity.crashed) == (True, False, False)

    lenient = item_playing(batch.pk, "lenient")
    rounds = lenient.stage_results["verify"]["rounds"]
    assert lenient.status == "kept" and len(rounds) == 2 and rounds[1]["problems"] == []
    assert any("over-lenient" in p and "input_present" in p for p in rounds[0]["problems"])

    broken = item_playing(batch.pk, "broken")
    rounds = broken.stage_results["verify"]["rounds"]
    assert (broken.status, broken.stage, len(rounds)) == ("rejected", "verify", 3)
    assert all(any("reference solution scores 0" in p for p in r["problems"]) for r in rounds)
    assert "round 1:" in broken.reason and "round 3:" in broken.reason

    network = SynthesisItem.objects.get(batch=batch, status="rejected", stage="generate")
    assert "network" in network.reason and "https://rates.example.com" in network.reason

    repaired = item_playing(batch.pk, "badjson_once")
    first, second = generate_calls(repaired)
    assert repaired.status == "kept" and first.error.startswith("invalid JSON answer") and second.error == ""
    assert second.request["messages"][-1]["content"].startswith("Your answer could not be used: the answer holds no")

    never = SynthesisItem.objects.get(batch=batch, status="failed")
    assert never.stage == "generate" and "gave no valid JSON answer in 2 tries" in never.reason
    assert never.stage_results["generate"]["retryable"] is False and len(generate_calls(never)) == 2

    regenerated = item_playing(batch.pk, "badfiles_once")
    rounds = regenerated.stage_results["files"]["rounds"]
    assert regenerated.status == "kept" and len(rounds) == 2
    assert "different numbers of columns" in rounds[0]["problems"][0]

    with_rubric = item_playing(batch.pk, "rubric").task.current_revision
    assert [r["name"] for r in with_rubric.rubric] == ["readable totals"] and with_rubric.code_weight == 0.7
    assert with_rubric.metadata["grading_type"] == "hybrid"
    assert item_playing(batch.pk, "good").stage_results["rubric"]["verdict"] == "skipped"

    funnel = {row["step"]: row for row in report(batch.pk)["funnel"]}
    assert {step: row["count"] for step, row in funnel.items()} == {
        "generated": 6,
        "files_valid": 6,
        "checker_sane": 6,
        "solvable": 5,
        "rubric": 5,
        "novel": 5,
        "plausible": 5,
        "kept": 5,
    }
    assert (funnel["generated"]["rejected"], funnel["generated"]["failed"]) == (1, 1)
    assert funnel["solvable"]["reasons"][0]["examples"] == [broken.pk]
    stages = report(batch.pk)["stages"]
    assert {p: s["calls"] for p, s in stages.items()} == {
        "synthesis:files": 7,
        "synthesis:generate": 10,
        "synthesis:rubric": 5,
        "synthesis:verify": 9,
    }

    text = StringIO()
    call_command("synthesis_report", str(batch.pk), stdout=text)
    assert "checker sane        6" in text.getvalue() and "synthesis:verify     9" in text.getvalue()
    assert f"e.g. #{broken.pk}" in text.getvalue()

    # The same configuration again is the same batch: nothing is synthesized twice.
    again = synthesize(
        "--route",
        "persona",
        "--count",
        "8",
        "--generator",
        "gen",
        "--judge",
        "judge",
        "--seed",
        "7",
        "--qa-stages",
        "",
        "--here",
    )
    # 31 stage calls and one lazy workspace the judge wrote for a stored revision's sanity check (tasks.lazy_workspaces)
    lazy = [r for r in scripted_upstream.requests if r.headers.get("x-clawgym-purpose") == "sanity_lazy"]
    assert again == found and len(scripted_upstream.requests) == 32 and len(lazy) == 1
    assert model.handed == 8


def test_persona_draws_are_reproducible_and_leave_network_operations_out(db):
    first = draw_seeds("persona", 30, 11, {})
    assert first == draw_seeds("persona", 30, 11, {}) != draw_seeds("persona", 30, 12, {})
    networked = set(AtomicOperation.objects.filter(needs_network=True).values_list("pk", flat=True))
    assert networked, "the shipped operations include some that need the network"
    drawn = {op["id"] for seed in first for op in seed["operations"]}
    assert len(first[0]["operations"]) == 3 and not drawn & networked
    allowed = draw_seeds("persona", 200, 11, {"allow_network": True})
    assert {op["id"] for seed in allowed for op in seed["operations"]} & networked


# --- the skill route ------------------------------------------------------------------------------------------


def make_skill(name: str, summary: str, *, synthesizable=True) -> Skill:
    skill = Skill.objects.create(name=name, description=summary, content_hash=name)
    SkillAnnotation.objects.create(
        skill=skill,
        summary=summary,
        core_content=summary,
        auth_required=not synthesizable,
        text_only_compatible=True,
        synthesizable=synthesizable,
        input_format="files",
        output_format="files",
    )
    return skill


@pytest.fixture
def skills(db):
    return [
        make_skill("csv-report", "Summarise CSV spreadsheets of sales figures into totals per region"),
        make_skill("csv-clean", "Clean CSV spreadsheets of sales figures: fix totals, regions and dates"),
        make_skill("poetry", "Write rhyming poems about the sea and the moon"),
        make_skill("haiku", "Write haiku poems about the moon and the seasons"),
        make_skill("gmail", "Send and read e-mail in a Gmail account", synthesizable=False),
    ]


def test_skill_route_preview_end_to_end(endpoints, scripted_upstream, skills):
    scripted(scripted_upstream, ["good"] * 5)
    found = synthesize(
        "--route",
        "skill",
        "--preview",
        "--generator",
        "gen",
        "--judge",
        "judge",
        "--seed",
        "3",
        "--qa-stages",
        "",
        "--here",
    )
    batch = SynthesisBatch.objects.get(pk=found["batch"])
    assert batch.preview and (found["status"], found["requested"], found["kept"]) == ("complete", 5, 5)
    synthesizable = {s.pk for s in skills if s.name != "gmail"}
    for item in batch.items.all():
        used = [item.seed["main"]["id"]] + [s["id"] for s in item.seed["supporting"]]
        assert set(used) <= synthesizable and len(set(used)) == len(used) and len(used) <= 4
        assert item.seed["similarity"] in ("minilm", "token-overlap")
        revision = item.task.current_revision
        assert item.task.source == Task.Source.SKILL
        assert revision.metadata["skills"] == [item.seed["main"]["name"], *(s["name"] for s in item.seed["supporting"])]
        assert revision.metadata["synthesis"]["route"] == "skill"
    prompt = ModelCall.objects.filter(subject=batch.items.first().subject, purpose="synthesis:generate").get()
    assert "## Main skill" in prompt.request["messages"][1]["content"]


def test_supporting_skills_lean_toward_similar_annotations(skills):
    seeds = draw_seeds("skill", 400, 5, {})
    with_csv_report = [s for s in seeds if s["main"]["name"] == "csv-report"]
    picked = [s["name"] for seed in with_csv_report for s in seed["supporting"]]
    assert with_csv_report and picked.count("csv-clean") > picked.count("poetry")
    assert picked.count("csv-clean") > picked.count("haiku")
    assert all(len(seed["supporting"]) <= 3 for seed in seeds)
    assert {seed["main"]["name"] for seed in seeds} == {"csv-report", "csv-clean", "poetry", "haiku"}


# --- budget, resume, a killed worker, a changed configuration --------------------------------------------------


def test_budget_pauses_the_batch_and_resume_finishes_it(endpoints, scripted_upstream):
    scripted(scripted_upstream, ["good", "good"])
    paused = synthesize(
        "--route",
        "persona",
        "--count",
        "2",
        "--generator",
        "gen",
        "--judge",
        "judge",
        "--seed",
        "1",
        "--qa-stages",
        "",
        "--budget-tokens",
        "1",
        "--here",
        ok=False,
    )
    batch = SynthesisBatch.objects.get(pk=paused["batch"])
    assert (paused["status"], paused["kept"], paused["rejected"], paused["failed"]) == ("paused", 0, {}, {})
    assert batch.status_reason.startswith("token budget reached")
    first = batch.items.get(index=0)
    # Paused before its second call: the item waits where it was (generated, files next), not failed.
    assert (first.status, first.stage, list(first.stage_results)) == ("pending", "files", ["generate"])
    assert len(scripted_upstream.requests) == 1

    done = synthesize("--resume", str(batch.pk), "--budget-tokens", "10000000", "--here")
    assert (done["batch"], done["status"], done["kept"]) == (batch.pk, "complete", 2)
    generate = [r for r in scripted_upstream.requests if r.headers.get("x-clawgym-purpose") == "synthesis:generate"]
    assert len(generate) == 2  # the first item's generation was not asked again


class Killed(BaseException):
    """What SIGKILL does to the worker, as far as the code after the kill goes: nothing more runs."""


def test_killed_worker_resume_repeats_no_finished_item_and_no_model_call(endpoints, scripted_upstream, monkeypatch):
    model = scripted(scripted_upstream, ["good", "good"])
    batch = start_batch("persona", 2, "gen", "judge", seed=4, options={"qa_stages": []}, here=True, user=None)
    assert pipeline.run_item(batch.items.get(index=0).pk).status == "kept"
    second = batch.items.get(index=1)

    # A worker takes the second item and dies in its verify stage, after the model answered and the sandbox ran.
    real = verify.evaluate

    def evaluate_then_die(*args, **kwargs):
        real(*args, **kwargs)
        raise Killed()

    monkeypatch.setattr(verify, "evaluate", evaluate_then_die)
    item = pipeline.claim_item(second.pk, worker=DEAD_WORKER)
    with pytest.raises(Killed):
        pipeline.run_stages(item, pipeline.StageContext.for_batch(batch), DEAD_WORKER)
    monkeypatch.setattr(verify, "evaluate", real)
    second.refresh_from_db()
    assert (second.status, second.stage, second.worker) == ("running", "verify", DEAD_WORKER)
    assert set(second.stage_results) == {"generate", "files"}
    before = len(model.seen)

    batch = run_here(resume_batch(batch, here=True, user=None))
    assert batch_json(batch)["kept"] == 2 and batch.status == "complete"
    assert model.seen[before:] == [("rubric", "good")]  # verify's answer was on record; only the rubric was asked
    assert ModelCall.objects.filter(subject=second.subject, purpose="synthesis:verify").count() == 1
    first_task = batch.items.get(index=0).task
    assert first_task.revisions.count() == 1


def test_resume_refuses_another_configuration_but_takes_a_new_judge(endpoints, scripted_upstream):
    gen, judge = endpoints
    batch = start_batch("persona", 1, gen, judge, seed=9, options={"qa_stages": []}, here=True, user=None)
    other = ModelEndpoint.objects.create(name="judge2", base_url=scripted_upstream.base_url, model="other")
    config = dict(batch.config)
    with pytest.raises(BatchError, match="another generator"):
        resume_batch(batch, {**config, "generator": {"name": "judge2", "model": "other"}}, user=None)
    with pytest.raises(BatchError, match="another seed"):
        resume_batch(batch, {**config, "seed": 10}, user=None)
    resumed = resume_batch(batch, {**config, "judge": {"name": "judge2", "model": "other"}}, here=True, user=None)
    assert resumed.judge == other and resumed.config["judge"]["name"] == "judge2"
    same = batch_config(
        route="persona",
        count=1,
        generator=gen,
        judge=judge,
        seed=9,
        preview=False,
        options={"qa_stages": []},
        qa_thresholds={},
    )
    assert same == config
    with pytest.raises(BatchError, match=r"no model endpoint named 'nope' \(known: gen, judge, judge2\); add one"):
        start_batch("persona", 1, "nope", judge, seed=9, here=True, user=None)


def test_without_a_worker_the_batch_is_cancelled_after_the_start_timeout_and_resumes_here(endpoints, scripted_upstream):
    scripted(scripted_upstream, ["good"])
    with use_engine("django_q"):
        cancelled = synthesize(
            "--route",
            "persona",
            "--count",
            "1",
            "--generator",
            "gen",
            "--judge",
            "judge",
            "--seed",
            "5",
            "--qa-stages",
            "",
            "--start-timeout",
            "0.2",
            ok=False,
        )
    assert (cancelled["status"], cancelled["kept"], cancelled["tokens"]) == ("cancelled", 0, 0)
    assert not scripted_upstream.requests
    done = synthesize("--resume", str(cancelled["batch"]), "--here")
    assert (done["batch"], done["status"], done["kept"]) == (cancelled["batch"], "complete", 1)


class Judges:
    """The scripted model with QA judges in front of it: synthesis.qa_checks asks its real plausibility question, and
    the judge answers what the test says (`answers`, by the endpoint's model name); every other call goes to `pipeline`."""

    def __init__(self, pipeline: ScriptedPipeline, answers: dict):
        self.pipeline, self.answers = pipeline, answers

    by_purpose = True

    def __call__(self, body: dict, purpose: str) -> Reply:
        if purpose == "qa:plausibility":
            return self.answers[body["model"]]
        return self.pipeline(body, purpose)


def plausible(verdict: bool, reason: str) -> Reply:
    return Reply.text(json.dumps({"plausible": verdict, "reason": reason, "problems": []}))


def test_a_near_duplicate_is_rejected_at_qa_novelty_naming_the_nearest_task(endpoints, scripted_upstream):

    # One subcategory: every draw has it (novelty compares with the whole pool; test_novelty_batch draws others).
    keep = ScenarioSubcategory.objects.order_by("pk").first()
    ScenarioSubcategory.objects.exclude(pk=keep.pk).delete()
    scripted(scripted_upstream, ["good", "good"])
    args = (
        "--route",
        "persona",
        "--count",
        "1",
        "--generator",
        "gen",
        "--judge",
        "judge",
        "--qa-stages",
        "novelty",
        "--here",
    )
    first = synthesize(*args, "--seed", "1")
    assert (first["kept"], first["rejected"]) == (1, {})
    kept = SynthesisItem.objects.get(batch_id=first["batch"]).task
    assessment = kept.current_revision.quality_assessments.get()
    assert (assessment.stage, assessment.verdict, assessment.item.batch_id) == ("novelty", "pass", first["batch"])

    second = synthesize(*args, "--seed", "2")
    assert (second["status"], second["kept"], second["rejected"]) == ("complete", 0, {"qa:novelty": 1})
    item = SynthesisItem.objects.get(batch_id=second["batch"])
    assert item.stage == "qa" and kept.external_id in item.reason
    verdict = item.stage_results["qa"]["verdicts"]["novelty"]
    assert verdict["details"]["nearest"] == kept.external_id and verdict["details"]["similarity"] >= 0.9
    funnel = {row["step"]: row for row in report(second["batch"])["funnel"]}
    assert (funnel["rubric"]["count"], funnel["novel"]["count"], funnel["novel"]["rejected"]) == (1, 0, 1)
    assert not Task.objects.filter(external_id__startswith=f"syn-{second['batch']}-").exists()


def test_qa_errors_are_retried_on_resume_and_a_new_judge_reruns_qa_only(endpoints, scripted_upstream):
    gen, judge = endpoints
    model = ScriptedPipeline(["good"])
    answers = {"scripted-model": Reply.error(503, "the judge is down")}
    scripted_upstream.responder = Judges(model, answers)
    batch = run_here(
        start_batch("persona", 1, gen, judge, seed=3, options={"qa_stages": ["plausibility"]}, here=True, user=None)
    )
    item = batch.items.get()
    assert batch_json(batch)["failed"] == {"qa": 1}
    # Its only item failed: the batch made nothing, so it has failed (not a green "complete"), saying why.
    assert batch.status == "failed" and batch.status_reason.startswith("Its only item failed, at the quality")
    assert "HTTP 503" in batch.status_reason
    assert item.stage_results["qa"]["retryable"] is True and "HTTP 503" in item.reason
    # The judge failed, not novelty (computed here, and not even asked for): the funnel says so.
    funnel = {row["step"]: row for row in report(batch.pk)["funnel"]}
    assert (funnel["novel"]["count"], funnel["novel"]["failed"]) == (1, 0)
    assert (funnel["plausible"]["count"], funnel["plausible"]["failed"]) == (0, 1)
    asked = list(model.seen)

    # Resumed: the QA error is tried again (and this time the judge finds the task implausible).
    answers["scripted-model"] = plausible(False, "no shop owner keeps sales like this")
    batch = run_here(resume_batch(batch, here=True, user=None))
    assert batch_json(batch)["rejected"] == {"qa:plausibility": 1}
    assert "no shop owner" in batch.items.get().reason

    # Another judge: only QA runs again; the earlier stages' results are kept, no model call of theirs is made.
    answers["judge2-model"] = plausible(True, "a plausible request")
    ModelEndpoint.objects.create(name="judge2", base_url=scripted_upstream.base_url, model="judge2-model")
    changed = {**batch.config, "judge": {"name": "judge2", "model": "judge2-model"}}
    batch = run_here(resume_batch(batch, changed, here=True, user=None))
    item = batch.items.get()
    assert (batch.status, batch_json(batch)["kept"], batch.judge.name) == ("complete", 1, "judge2")
    assert item.stage_results["qa"]["verdicts"]["plausibility"]["verdict"] == "pass"
    assert model.seen == asked and item.attempts["verify"] == 1 and item.attempts["qa"] == 3
    stored = item.task.current_revision.quality_assessments.get()
    assert (stored.stage, stored.verdict, stored.endpoint_name) == ("plausibility", "pass", "judge2")


# --- the jobs ------------------------------------------------------------------------------------------------------


def test_run_batch_job_fans_out_item_jobs_and_the_batch_completes(endpoints, scripted_upstream):
    scripted(scripted_upstream, ["good", "network"])
    batch = start_batch("persona", 2, "gen", "judge", seed=2, options={"qa_stages": []}, user=None)
    assert batch.job_run.kind == "synthesis.run_batch" and batch.status == "queued"
    assert execute(batch.job_run.pk) == JobRun.Status.SUCCEEDED
    children = list(JobRun.objects.filter(parent=batch.job_run).order_by("pk"))
    assert [(c.kind, c.queue) for c in children] == [("synthesis.run_item", "sandbox")] * 2
    for child in children:
        assert execute(child.pk) == JobRun.Status.SUCCEEDED
        assert execute(child.pk) == JobRun.Status.SUCCEEDED  # delivered twice: runs once
    batch.refresh_from_db()
    assert batch_json(batch) | {"tokens": 0, "cost": 0} == {
        "batch": batch.pk,
        "status": "complete",
        "requested": 2,
        "kept": 1,
        "rejected": {"generate": 1},
        "failed": {},
        "tokens": 0,
        "cost": 0,
    }
    assert sorted(batch.items.values_list("job_run_id", flat=True)) == [c.pk for c in children]


def test_an_item_job_whose_item_failed_has_failed_and_a_rejected_one_succeeded(endpoints, scripted_upstream):
    # A rejection is a verdict the job reached; a failure is work that did not get done: the jobs page must tell.
    scripted(scripted_upstream, ["good", "network", "badjson_always"])
    batch = start_batch("persona", 3, "gen", "judge", seed=2, options={"qa_stages": []}, user=None)
    execute(batch.job_run.pk)
    children = list(JobRun.objects.filter(parent=batch.job_run).order_by("pk"))
    ended = [execute(child.pk) for child in children]

    assert ended == [JobRun.Status.SUCCEEDED, JobRun.Status.SUCCEEDED, JobRun.Status.FAILED]
    failed = JobRun.objects.get(pk=children[2].pk)
    item = batch.items.get(job_run=failed)
    assert failed.outcome_display == "Failed: its item failed"
    assert failed.error.startswith(f"Item #{item.pk} failed at generate: ") and failed.result["status"] == "failed"
    batch.refresh_from_db()
    assert batch.job_run.batch().outcome_display == "Finished · 1 of 3 failed"


# --- on a real worker -------------------------------------------------------------------------------------------


@pytest.fixture
def seeds_after_flush(transactional_db):
    """The taxonomy and the shipped personas and operations: an earlier transactional test's flush empties them."""
    importlib.import_module("tasks.migrations.0002_taxonomy").load(apps, None)
    importlib.import_module("synthesis.migrations.0003_shipped_seeds").load(apps, None)


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_synthesize_waits_for_a_worker_and_a_killed_worker_is_resumed(seeds_after_flush, endpoints, scripted_upstream):
    model = scripted(scripted_upstream, ["good", "good", "good"])
    with use_engine("django_q"):
        worker = start_django_q_worker(workers=1)
        try:
            found = synthesize(
                "--route",
                "persona",
                "--count",
                "1",
                "--generator",
                "gen",
                "--judge",
                "judge",
                "--seed",
                "1",
                "--qa-stages",
                "",
                "--timeout",
                "240",
                "--start-timeout",
                "240",
            )  # a worker on a loaded machine may take long to start
            assert (found["status"], found["kept"]) == ("complete", 1)
            assert SynthesisItem.objects.get(batch_id=found["batch"]).job_run.kind == "synthesis.run_item"

            # The worker is killed while the second item of a new batch waits for its checker from the model.
            model.hold("verify", "Request 3.")
            batch = start_batch("persona", 2, "gen", "judge", seed=2, options={"qa_stages": []}, user=None)
            assert model.reached.wait(timeout=240), worker.log_tail()
            worker.kill()
            second = batch.items.get(index=1)
            assert (second.status, second.stage, set(second.stage_results)) == (
                "running",
                "verify",
                {"generate", "files"},
            )
            before = len(model.seen)
        finally:
            model.release()
            worker.stop()
            worker.cleanup()
    assert batch.items.get(index=0).status == "kept"
    done = synthesize("--resume", str(batch.pk), "--here")
    assert (done["status"], done["kept"]) == ("complete", 2)
    # The question in flight when the worker died is asked again (no answer was ever had); nothing else is.
    assert model.seen[before:] == [("verify", "good"), ("rubric", "good")]
    assert batch.items.get(index=0).task.revisions.count() == 1
