"""Difficulty-aware filtering, end to end: the builtin harness in the sandbox, a scripted "strong" and "weak" model
on one loopback upstream, real evaluation runs and checkers, every candidate's verdict computed by hand.

The fruit checker (evaluation/testing.py CHECK_PY) averages four checks: summary written, summary right,
input kept (fruit.csv still starts with "fruit,"), "done" said in the final message. Here a model's answer to a task
is one of
    right    writes the right summary, then says "Done"            4/4 = 1.0
    nothing  writes nothing and says it could not finish           input kept only: 1/4 = 0.25
    ruin     overwrites fruit.csv, then says sorry                 0/4 = 0.0
    down     the upstream answers 503 (no score: infrastructure)
(evaluation.testing's own wrong answer scores 0.75, above the small maximum 0.6: most candidates would be too easy.)
"""

import dataclasses
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.models import Benchmark
from evaluation.models import EvalRun, Outcome, Rollout
from evaluation.services.runs import run_here
from evaluation.testing import RIGHT_SUMMARY, SOLVES, TASK_MARK, endpoints, fruit_package, make_tasks
from jobs.models import JobRun
from jobs.runner import execute
from llm.testing import Reply
from review.difficulty import (
    DifficultyError,
    filter_json,
    finish_difficulty_filter,
    run_difficulty_filter_here,
    start_difficulty_filter,
    verdict_for,
)
from review.job_kinds import DIFFICULTY_JOB
from review.models import BenchmarkCandidate, DifficultyFilter, DifficultyResult
from review.services import propose_candidates
from tasks.services import save_package

needs_bwrap = pytest.mark.usefixtures("bwrap")
THRESHOLDS = {"strong_min": 0.2, "small_max": 0.6}

# --- the verdict rule alone ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strong, small, expected",
    [
        (1.0, 0.25, "keep"),
        (0.2, 0.0, "keep"),  # both bounds are inclusive
        (0.6000001, 0.6, "keep"),
        (0.15, 0.0, "too_hard"),
        (0.1, 0.9, "too_hard"),  # too hard and too easy at once: too hard comes first
        (1.0, 0.75, "too_easy"),
        (0.5, 0.9, "too_easy"),  # too easy before not discriminative
        (0.25, 0.25, "not_discriminative"),
        (0.3, 0.5, "not_discriminative"),
        (None, 0.25, "incomplete"),
        (0.0, None, "incomplete"),  # incomplete before everything
        (None, None, "incomplete"),
        ((0.1 + 0.2 + 0.3) / 3, 0.0, "keep"),  # 0.19999999999999998 in floats: 0.2 exactly
        (0.6, (0.6 * 3) / 3, "not_discriminative"),
    ],
)
def test_the_verdict_rule_and_its_precedence(strong, small, expected):
    assert verdict_for(strong, small, **THRESHOLDS) == expected


def test_a_margin_asks_the_strong_agent_to_win_by_more_than_it():
    assert verdict_for(0.5, 0.3, **THRESHOLDS, margin=0.2) == "not_discriminative"
    assert verdict_for(0.51, 0.3, **THRESHOLDS, margin=0.2) == "keep"


# --- the world: tasks, models, candidates --------------------------------------------------------------------

HARD, DOWN = "eval-hard", "eval-down"
# What each model does with each task beyond evaluation.testing's SOLVES (right there, "nothing" elsewhere).
RUINS = {HARD}
DOWN_TASKS = {DOWN}
# The strong model alternates right / nothing on eval-c: its mean over 2 repeats is (1 + 0.25) / 2.
ALTERNATES = {("strong-model", "eval-c")}

# By hand, n = 2, default thresholds (strong >= 0.2, small <= 0.6, strong > small):
EXPECTED = {
    "eval-a": {"strong": 1.0, "small": 1.0, "verdict": "too_easy"},  # both solve it
    "eval-b": {"strong": 1.0, "small": 0.25, "verdict": "keep"},
    "eval-c": {"strong": 0.625, "small": 0.25, "verdict": "keep"},
    "eval-d": {"strong": 0.25, "small": 0.25, "verdict": "not_discriminative"},  # neither solves it
    HARD: {"strong": 0.0, "small": 0.0, "verdict": "too_hard"},
    DOWN: {"strong": None, "small": None, "verdict": "incomplete"},
}


def _text(messages) -> str:
    parts = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
        elif content:
            parts.append(content)
    return " ".join(parts)


class Models:
    """The scripted strong and weak models (a responder for scripted_upstream): see the module docstring."""

    def __init__(self):
        self.solves = {model: set(tasks) for model, tasks in SOLVES.items()}
        self.first_calls: dict = {}

    def __call__(self, body: dict) -> Reply:
        messages = body.get("messages") or []
        mark = TASK_MARK.search(_text(messages))
        task, model = (mark.group(1) if mark else ""), body.get("model")
        if task in DOWN_TASKS:
            return Reply.error(503, "upstream down")
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            return Reply.text("Sorry, I could not finish." if task in RUINS else "Done: summary.txt is written.")
        if task in RUINS:
            return Reply.tool_call("write", {"path": "fruit.csv", "content": "gone\n"})
        calls = self.first_calls[(model, task)] = self.first_calls.get((model, task), 0) + 1
        right = task in self.solves.get(model, ()) and not ((model, task) in ALTERNATES and calls % 2 == 0)
        if right:
            return Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})
        return Reply.text("I could not finish this.")


def _task(task_id: str):
    package = fruit_package(task_id)
    package = dataclasses.replace(package, instruction=f"{package.instruction} (task {task_id})")
    return save_package(package).revision


@pytest.fixture
def world(live_server_asgi, scripted_upstream, settings, admin_user):
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    settings.CLAWGYM_EVAL_MAX_ATTEMPTS = 1  # an upstream that is down stays down: no retry, no score
    models = Models()
    scripted_upstream.responder = models
    revisions = make_tasks() | {HARD: _task(HARD), DOWN: _task(DOWN)}
    strong, weak = endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="difficulty-bench")
    propose_candidates(benchmark, [r.task for r in revisions.values()], user=admin_user)
    return {"benchmark": benchmark, "strong": strong, "weak": weak, "models": models, "revisions": revisions}


def _candidate(benchmark, task_id) -> BenchmarkCandidate:
    return BenchmarkCandidate.objects.select_related("task").get(benchmark=benchmark, task__external_id=task_id)


# --- end to end ----------------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_every_candidate_gets_the_hand_computed_verdict_and_a_rerun_after_a_fix_updates_one(world, admin_user):
    benchmark, strong, weak = world["benchmark"], world["strong"], world["weak"]
    flt = run_difficulty_filter_here(benchmark, strong=strong, small=weak, n=2, harness="builtin", user=admin_user)

    assert flt.status == DifficultyFilter.Status.FINISHED, flt.error
    assert filter_json(flt) == EXPECTED
    assert (flt.strong_min, flt.small_max, flt.margin, flt.n, flt.harness) == (0.2, 0.6, 0.0, 2, "builtin")
    # The runs are ordinary evaluation runs over the candidates' revisions, n repeats each.
    for run, endpoint in ((flt.strong_run, strong), (flt.small_run, weak)):
        assert run.endpoint == endpoint and run.repeats == 2 and run.rollouts.count() == 12
        assert run.status == EvalRun.Status.INCOMPLETE  # eval-down has no score
        assert run.rollouts.filter(outcome=Outcome.INFRA).count() == 2
    down = flt.results.get(candidate__task__external_id=DOWN)
    assert (down.strong_n, down.small_n) == (0, 0)
    assert {r.strong_n for r in flt.results.exclude(pk=down.pk)} == {2}
    # Each candidate mirrors its result.
    for task_id, expected in EXPECTED.items():
        candidate = _candidate(benchmark, task_id)
        assert (candidate.strong_mean, candidate.small_mean, candidate.difficulty_verdict) == (
            expected["strong"],
            expected["small"],
            expected["verdict"],
        ), task_id
    # Finishing again changes nothing.
    assert finish_difficulty_filter(flt).results.count() == 6

    # A reviewer fixes eval-d (a new revision), after which the strong model solves it: run again for it alone.
    from tasks.services import revise_task

    task_d = _candidate(benchmark, "eval-d").task
    revise_task(
        task_d, user=admin_user, message="clearer", instruction=task_d.current_revision.instruction + " Say done."
    )
    world["models"].solves["strong-model"].add("eval-d")
    again = run_difficulty_filter_here(
        benchmark,
        strong=strong,
        small=weak,
        n=1,
        harness="builtin",
        candidates=[_candidate(benchmark, "eval-d")],
        user=admin_user,
    )
    assert filter_json(again) == {"eval-d": {"strong": 1.0, "small": 0.25, "verdict": "keep"}}
    result = again.results.get()
    task_d.refresh_from_db()
    assert result.revision == task_d.current_revision and result.revision.number == 2
    assert again.strong_run.rollouts.count() == 1 and again.strong_run.pk != flt.strong_run.pk
    d = _candidate(benchmark, "eval-d")
    assert (d.strong_mean, d.small_mean, d.difficulty_verdict) == (1.0, 0.25, "keep")
    # The first filter's results are kept; the other candidates still show theirs.
    assert flt.results.get(candidate=d).verdict == "not_discriminative"
    assert _candidate(benchmark, "eval-a").difficulty_verdict == "too_easy"
    assert d.latest_difficulty() == result


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_on_the_workers_path_the_second_run_to_finish_gives_the_verdicts_through_the_job(world, admin_user):
    benchmark, strong, weak = world["benchmark"], world["strong"], world["weak"]
    b = _candidate(benchmark, "eval-b")
    flt = start_difficulty_filter(
        benchmark, strong=strong, small=weak, n=1, harness="builtin", candidates=[b], user=admin_user
    )
    assert list(flt.candidates.all()) == [b]
    for run in (flt.strong_run, flt.small_run):
        assert run.on_finish == DIFFICULTY_JOB and run.on_finish_params == {"filter_id": flt.pk}
        assert run.rollouts.get().job_run.status == JobRun.Status.QUEUED  # a rollout job waits for a worker

    # Run here what a worker would (the rollouts, then each verdict job as the run's end queued it).
    run_here(flt.strong_run)
    [first] = JobRun.objects.filter(kind=DIFFICULTY_JOB)
    assert first.params == {"filter_id": flt.pk}
    assert execute(first.pk) == JobRun.Status.SUCCEEDED
    first.refresh_from_db()
    assert first.result["status"] == "running" and not DifficultyResult.objects.exists()

    run_here(flt.small_run)
    second = JobRun.objects.filter(kind=DIFFICULTY_JOB).exclude(pk=first.pk).get()
    assert execute(second.pk) == JobRun.Status.SUCCEEDED
    second.refresh_from_db()
    assert second.result["status"] == "finished" and second.result["verdicts"]["keep"] == 1
    flt.refresh_from_db()
    assert filter_json(flt) == {"eval-b": {"strong": 1.0, "small": 0.25, "verdict": "keep"}}
    # A second delivery of a verdict job finds the filter done.
    again = JobRun.objects.create(kind=DIFFICULTY_JOB, queue="default", params={"filter_id": flt.pk})
    assert execute(again.pk) == JobRun.Status.SUCCEEDED
    assert DifficultyResult.objects.count() == 1


@pytest.mark.django_db
def test_a_filter_refuses_the_same_endpoint_twice_a_stranger_candidate_and_a_non_admin(
    scripted_upstream, admin_user, reviewer
):
    strong, weak = endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="one")
    other = Benchmark.objects.create(name="two")
    revisions = make_tasks()
    propose_candidates(benchmark, [revisions["eval-a"].task], user=admin_user)
    propose_candidates(other, [revisions["eval-b"].task], user=admin_user)
    with pytest.raises(DifficultyError, match="different model endpoints"):
        start_difficulty_filter(benchmark, strong=strong, small=strong, user=admin_user)
    with pytest.raises(DifficultyError, match="not candidates of one: eval-b"):
        start_difficulty_filter(
            benchmark, strong=strong, small=weak, candidates=list(other.candidates.all()), user=admin_user
        )
    with pytest.raises(DifficultyError, match="repeats must be between"):
        start_difficulty_filter(benchmark, strong=strong, small=weak, n=0, user=admin_user)
    from review.services import NotAllowed

    with pytest.raises(NotAllowed):
        start_difficulty_filter(benchmark, strong=strong, small=weak, user=reviewer)
    assert not DifficultyFilter.objects.exists() and not EvalRun.objects.exists()


# --- the command ---------------------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_the_command_prints_the_verdicts_as_its_last_line(world):
    out = StringIO()
    call_command(
        "difficulty_filter",
        "--benchmark",
        "difficulty-bench",
        "--strong",
        "strong",
        "--small",
        "weak",
        "--n",
        "1",
        "--candidate",
        "eval-b",
        "--candidate",
        "eval-a",
        "--harness",
        "builtin",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    last = out.getvalue().strip().splitlines()[-1]
    assert json.loads(last) == {
        "eval-a": {"strong": 1.0, "small": 1.0, "verdict": "too_easy"},
        "eval-b": {"strong": 1.0, "small": 0.25, "verdict": "keep"},
    }
    assert Rollout.objects.count() == 4


@pytest.mark.django_db
def test_the_command_names_what_it_cannot_find(scripted_upstream, admin_user):
    endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="b")
    propose_candidates(benchmark, [make_tasks()["eval-a"].task], user=admin_user)
    args = ["difficulty_filter", "--benchmark", "b", "--strong", "strong", "--small", "weak"]
    with pytest.raises(CommandError, match="no benchmark is named 'nope'"):
        call_command(*["difficulty_filter", "--benchmark", "nope", "--strong", "strong", "--small", "weak"])
    with pytest.raises(CommandError, match="no model endpoint named 'big'"):
        call_command(*args[:4], "big", *args[5:])
    with pytest.raises(CommandError, match="not candidates of b: eval-z"):
        call_command(*args, "--candidate", "eval-z")
    with pytest.raises(
        CommandError, match=r"^--n \(rollouts of each agent per candidate\) must be between 1 and 64, got 0"
    ):
        call_command(*args, "--n", "0")


@pytest.mark.django_db
def test_the_command_gives_up_when_no_worker_takes_the_rollouts_and_cancels_them(scripted_upstream, admin_user):
    endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="b")
    propose_candidates(benchmark, [make_tasks()["eval-a"].task], user=admin_user)
    with pytest.raises(CommandError, match="no job worker took the rollout jobs within 0.2 s"):
        call_command(
            "difficulty_filter",
            "--benchmark",
            "b",
            "--strong",
            "strong",
            "--small",
            "weak",
            "--n",
            "1",
            "--start-timeout",
            "0.2",
            stderr=StringIO(),
        )
    flt = DifficultyFilter.objects.get()
    assert flt.status == DifficultyFilter.Status.FAILED and "cancelled" in flt.error
    assert {r.status for r in flt.runs} == {EvalRun.Status.CANCELLED}
    assert set(Rollout.objects.values_list("status", flat=True)) == {Rollout.Status.CANCELLED}
    assert not DifficultyResult.objects.exists()


# --- pages and API -------------------------------------------------------------------------------------------


@pytest.fixture
def filtered(world):
    """eval-a (too easy) and eval-b (keep) filtered with n = 1 through the command; the others never filtered."""
    call_command(
        "difficulty_filter",
        "--benchmark",
        "difficulty-bench",
        "--strong",
        "strong",
        "--small",
        "weak",
        "--n",
        "1",
        "--candidate",
        "eval-a",
        "--candidate",
        "eval-b",
        "--harness",
        "builtin",
        "--here",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    world["filter"] = DifficultyFilter.objects.get()
    return world


def _rows(html: str, benchmark) -> set[str]:
    return {c.task.external_id for c in benchmark.candidates.select_related("task") if f'id="candidate-{c.pk}"' in html}


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_the_queue_filters_by_verdict_and_the_candidate_page_shows_the_verdict_and_what_is_behind_it(
    filtered, viewer_client, admin_client, reviewer_client
):
    benchmark, flt = filtered["benchmark"], filtered["filter"]
    for verdict, expected in (
        ("keep", {"eval-b"}),
        ("too_easy", {"eval-a"}),
        ("too_hard", set()),
        ("none", {"eval-c", "eval-d", HARD, DOWN}),
    ):
        html = viewer_client.get("/review/", {"difficulty": verdict}).content.decode()
        assert _rows(html, benchmark) == expected, verdict
    html = viewer_client.get("/review/", {"difficulty": "keep"}).content.decode()
    assert 'data-testid="difficulty-verdict"' in html and ">Keep</span>" in html and "1.00 / 0.25" in html
    assert _rows(viewer_client.get("/review/", {"difficulty": "bogus"}).content.decode(), benchmark) == set(EXPECTED)

    b = _candidate(benchmark, "eval-b")
    page = viewer_client.get(f"/review/candidates/{b.pk}/").content.decode()
    card = page[page.index('id="difficulty"') : page.index("</section>", page.index('id="difficulty"'))]
    assert ">Keep</span>" in card and "1.000" in card and "0.250" in card
    assert "strong ≥ 0.2, small ≤ 0.6, strong &gt; small" in card
    assert f'href="/evaluations/{flt.strong_run_id}/"' in card and f'href="/evaluations/{flt.small_run_id}/"' in card
    behind = Rollout.objects.filter(eval_run__in=flt.runs, revision__task=b.task)
    assert behind.count() == 2 and all(f'href="/rollouts/{r.pk}/"' in card for r in behind)
    assert "Rerun difficulty filter" not in card  # viewers read
    admin_page = admin_client.get(f"/review/candidates/{b.pk}/").content.decode()
    assert 'data-testid="difficulty-rerun"' in admin_page
    assert '<option value="strong" selected>' in admin_page  # the last filter's agents are the defaults

    # An admin runs it again for this candidate alone: a filter on the workers, which the card shows running.
    form = {"strong": "strong", "small": "weak", "n": "1", "harness": "builtin"}
    assert reviewer_client.post(f"/review/candidates/{b.pk}/difficulty/", form).status_code == 403
    response = admin_client.post(f"/review/candidates/{b.pk}/difficulty/", form)
    assert response.status_code == 302 and response["Location"] == f"/review/candidates/{b.pk}/#difficulty"
    rerun = DifficultyFilter.objects.exclude(pk=flt.pk).get()
    assert list(rerun.candidates.all()) == [b] and rerun.status == DifficultyFilter.Status.RUNNING
    assert rerun.strong_run.rollouts.get().job_run.status == JobRun.Status.QUEUED
    part = viewer_client.get(f"/review/candidates/{b.pk}/part/difficulty/", HTTP_HX_REQUEST="true").content.decode()
    assert f"Filter #{rerun.pk} is running" in part and 'hx-trigger="every 5s"' in part
    assert ">Keep</span>" in part  # the latest finished verdict stays until the new one is in
    refused = admin_client.post(
        f"/review/candidates/{b.pk}/difficulty/", form | {"small": "strong"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Choose another endpoint" in refused and 'data-testid="difficulty-error"' in refused

    # The benchmark's difficulty page: counts by verdict (into the queue), the filters, the admin's forms.
    page = viewer_client.get("/review/benchmarks/difficulty-bench/difficulty/").content.decode()
    assert (
        'data-testid="verdict-keep"' in page and "difficulty=keep" in page and "Run the difficulty filter" not in page
    )
    assert f'data-testid="filter-{flt.pk}"' in page and f'data-testid="filter-{rerun.pk}"' in page
    bad = admin_client.post("/review/benchmarks/difficulty-bench/difficulty/start/", form | {"small": "strong"})
    assert bad.status_code == 400 and "Choose another endpoint" in bad.content.decode()
    saved = admin_client.post(
        "/review/benchmarks/difficulty-bench/difficulty/thresholds/",
        {"strong_min": "0.3", "small_max": "0.5", "margin": "0.1"},
    )
    assert saved.status_code == 302
    benchmark.refresh_from_db()
    assert (benchmark.difficulty_strong_min, benchmark.difficulty_small_max, benchmark.difficulty_margin) == (
        0.3,
        0.5,
        0.1,
    )
    started = admin_client.post("/review/benchmarks/difficulty-bench/difficulty/start/", form)
    assert started.status_code == 302
    newest = DifficultyFilter.objects.first()
    assert newest.candidates.count() == 6 and (newest.strong_min, newest.small_max, newest.margin) == (0.3, 0.5, 0.1)


@needs_bwrap
@pytest.mark.django_db(transaction=True)
def test_the_api_starts_a_filter_and_shows_its_results_and_the_candidates_verdicts(
    filtered, api_as, admin_user, reviewer, viewer
):
    benchmark, flt = filtered["benchmark"], filtered["filter"]
    client = api_as(viewer)
    listed = client.get("/api/candidates/", {"difficulty": "keep"}).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(r["task"], r["difficulty_verdict"], r["strong_mean"], r["small_mean"]) for r in rows] == [
        ("eval-b", "keep", 1.0, 0.25)
    ]
    assert client.get("/api/candidates/", {"difficulty": "bogus"}).status_code == 400

    detail = client.get(f"/api/difficulty-filters/{flt.pk}/").json()
    assert detail["status"] == "finished" and detail["candidates"] == 2 and detail["n"] == 1
    assert detail["thresholds"] == {"strong_min": 0.2, "small_max": 0.6, "margin": 0.0}
    assert detail["runs"]["strong"]["id"] == flt.strong_run_id and detail["runs"]["small"]["rollouts_total"] == 2
    assert detail["verdicts"]["keep"] == 1 and detail["verdicts"]["too_easy"] == 1
    assert [
        (r["task"], r["revision"], r["strong_mean"], r["small_mean"], r["strong_n"], r["verdict"])
        for r in detail["results"]
    ] == [("eval-a", 1, 1.0, 1.0, 1, "too_easy"), ("eval-b", 1, 1.0, 0.25, 1, "keep")]

    body = {"strong": "strong", "small": "weak", "n": 1, "candidates": ["eval-c"], "harness": "builtin"}
    url = "/api/benchmarks/difficulty-bench/difficulty-filter/"
    assert api_as(reviewer).post(url, body, format="json").status_code == 403
    admin = api_as(admin_user)
    started = admin.post(url, body, format="json")
    assert started.status_code == 202, started.content
    assert started.json()["status"] == "running" and started.json()["candidates"] == 1
    by_id = admin.post(
        f"/api/benchmarks/{benchmark.pk}/difficulty-filter/", body | {"candidates": ["eval-d"]}, format="json"
    )
    assert by_id.status_code == 202
    assert admin.post(url, body | {"candidates": ["nope"]}, format="json").status_code == 400
    assert admin.post(url, body | {"small": "strong"}, format="json").status_code == 400
    assert admin.post("/api/benchmarks/missing/difficulty-filter/", body, format="json").status_code == 404
    listed = client.get("/api/difficulty-filters/", {"benchmark": "difficulty-bench", "status": "running"}).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {r["id"] for r in rows} == {started.json()["id"], by_id.json()["id"]}

    thresholds = admin.post(
        "/api/benchmarks/difficulty-bench/difficulty-thresholds/", {"strong_min": 0.25, "small_max": 0.5}, format="json"
    )
    assert thresholds.status_code == 200 and thresholds.json()["difficulty_strong_min"] == 0.25
    assert (
        admin.post(
            "/api/benchmarks/difficulty-bench/difficulty-thresholds/",
            {"strong_min": 2, "small_max": 0.5},
            format="json",
        ).status_code
        == 400
    )


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_run_fails_its_filter_through_the_job_it_queues(scripted_upstream, admin_user):
    from evaluation.services.runs import cancel_eval_run

    strong, weak = endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="b")
    propose_candidates(benchmark, [make_tasks()["eval-a"].task], user=admin_user)
    flt = start_difficulty_filter(benchmark, strong=strong, small=weak, n=1, harness="builtin", user=admin_user)
    assert not JobRun.objects.filter(kind=DIFFICULTY_JOB).exists()
    cancel_eval_run(flt.small_run, user=admin_user)
    [job] = JobRun.objects.filter(kind=DIFFICULTY_JOB)
    assert execute(job.pk) == JobRun.Status.SUCCEEDED
    flt.refresh_from_db()
    assert (
        flt.status == DifficultyFilter.Status.FAILED
        and flt.error == f"evaluation run #{flt.small_run_id} was cancelled"
    )
    assert _candidate(benchmark, "eval-a").difficulty_verdict == "" and not DifficultyResult.objects.exists()
    # The other side would run for nothing: cancelled with it (its own verdict job then finds the filter failed).
    flt.strong_run.refresh_from_db()
    assert flt.strong_run.status == EvalRun.Status.CANCELLED
    [later] = JobRun.objects.filter(kind=DIFFICULTY_JOB).exclude(pk=job.pk)
    assert execute(later.pk) == JobRun.Status.SUCCEEDED
    flt.refresh_from_db()
    assert flt.error == f"evaluation run #{flt.small_run_id} was cancelled"
