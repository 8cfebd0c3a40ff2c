"""Rollout pages and API: what they show, and who may start or retry rollouts. Rows are made directly (fast);
the end-to-end tests produce real ones."""

import json

import pytest
from django.urls import reverse

from evaluation.models import Rollout, RolloutFile, Trajectory
from evaluation.presenting import show_arguments
from evaluation.testing import RIGHT_SUMMARY
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint
from llm.services import open_proxy_session
from tasks.services import store_blobs

pytestmark = pytest.mark.django_db

LONG_OUTPUT = "\n".join(f"line {n}" for n in range(40))
TRANSCRIPT = [
    {"role": "user", "content": "Count the fruit."},
    {
        "role": "assistant",
        "content": "Let me look.",
        "reasoning": "The CSV should have counts.",
        "tool_calls": [{"id": "call_0", "name": "exec", "arguments": {"command": "cat fruit.csv"}}],
    },
    {"role": "tool", "tool_call_id": "call_0", "name": "exec", "content": LONG_OUTPUT, "is_error": False},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_0", "name": "write", "arguments": {"path": "summary.txt", "content": RIGHT_SUMMARY}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "name": "write", "content": "error: disk full", "is_error": True},
    {"role": "assistant", "content": "Done: <b>summary</b> written."},
]


@pytest.fixture
def scored(fruit_task, agent_endpoint):
    session = open_proxy_session(agent_endpoint)
    rollout = Rollout.objects.create(
        revision=fruit_task,
        endpoint=agent_endpoint,
        harness="builtin",
        status=Rollout.Status.SCORED,
        exit_reason="completed",
        attempt=1,
        score=0.75,
        code_score=0.75,
        check_status="ok",
        sub_scores={"summary_right": 0.0, "summary_written": 1.0, "input_kept": 1.0, "reported_done": 1.0},
        transcript=TRANSCRIPT,
        final_message="Done: <b>summary</b> written.",
        turns=3,
        tool_calls=2,
        proxy_session=session,
        model_calls=1,
        input_tokens=120,
        output_tokens=8,
        runtime="clawgym-runtime-1-0123abcd4567",
    )
    blob = store_blobs([b"fruit,count\napple,4\npear,2\n"]).popitem()[1]
    RolloutFile.objects.create(
        rollout=rollout, path="fruit.csv", change="modified", kind="file", blob=blob, size=blob.size
    )
    ModelCall.objects.create(
        endpoint=agent_endpoint,
        endpoint_name="scripted",
        purpose="proxy",
        subject=rollout.subject,
        session=session,
        request={},
        response={},
        status_code=200,
        input_tokens=120,
        output_tokens=8,
        latency_ms=432.0,
        ttft_ms=51.0,
    )
    Trajectory.objects.create(
        rollout=rollout,
        index=0,
        messages=[{"role": "user", "content": "x"}],
        reward=0.75,
        stats={
            "turns": 3,
            "tool_calls": 2,
            "tool_types": ["exec", "write"],
            "total_tokens": 128,
            "prompt_tokens": 120,
            "completion_tokens": 8,
        },
    )
    Trajectory.objects.create(
        rollout=rollout,
        index=1,
        messages=[],
        reward=0.75,
        excluded=True,
        exclusion_reason="calls unsupported tools: canvas",
        stats={
            "turns": 1,
            "tool_calls": 1,
            "tool_types": ["canvas"],
            "total_tokens": 50,
            "prompt_tokens": 40,
            "completion_tokens": 10,
        },
    )
    return rollout


def test_the_rollout_page_shows_the_conversation_diff_scores_and_calls(viewer_client, scored):
    page = viewer_client.get(reverse("evaluation:detail", args=[scored.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    # The conversation: tool calls with their arguments, results under them, long ones folded, errors marked.
    assert "Count the fruit." in html and "The CSV should have counts." in html
    assert '<strong class="mono">exec</strong>' in html and "cat fruit.csv" in html
    assert '<details class="fold">' in html and "line 39" in html
    assert "tool-result is-error" in html and "error: disk full" in html
    assert "Done: &lt;b&gt;summary&lt;/b&gt; written." in html  # agent text is escaped, never rendered as HTML
    # The workspace diff against the input file.
    assert "-apple,3" in html and "+apple,4" in html
    # Sub-scores and the model calls with tokens and latency.
    assert "summary_right" in html and "0.750" in html
    assert "432 ms" in html and "51 ms" in html
    assert "calls unsupported tools: canvas" in html
    assert "Retry" not in html  # scored: nothing to retry


def test_the_running_page_polls_through_its_partial_until_the_rollout_finishes(
    viewer_client, fruit_task, agent_endpoint
):
    rollout = Rollout.objects.create(
        revision=fruit_task, endpoint=agent_endpoint, harness="openclaw", status=Rollout.Status.RUNNING, attempt=1
    )
    url = reverse("evaluation:detail", args=[rollout.pk])
    polling = f'<div id="rollout" hx-get="{url}" hx-trigger="every 3s" hx-swap="outerHTML"'
    assert polling in viewer_client.get(url).content.decode()
    # The partial that replaces the polling element (outerHTML) must carry the same wrapper, or polling stops.
    partial = viewer_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith(polling)
    assert "<html" not in partial and "Rollout #" in partial and "Running" in partial

    Rollout.objects.filter(pk=rollout.pk).update(status=Rollout.Status.SCORED, score=0.5, code_score=0.5)
    done = viewer_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert done.lstrip().startswith('<div id="rollout"') and "hx-trigger" not in done and "0.500" in done


def test_the_list_polls_while_a_rollout_on_show_is_unfinished(viewer_client, fruit_task, agent_endpoint):
    rollout = Rollout.objects.create(revision=fruit_task, endpoint=agent_endpoint, harness="builtin")
    url = reverse("evaluation:list")
    page = viewer_client.get(url, {"harness": "builtin"}).content.decode()
    polling = '<section id="results" class="card" hx-get="/rollouts/?harness=builtin" hx-trigger="every 3s" hx-swap="outerHTML">'
    assert polling in page
    partial = viewer_client.get(url, {"harness": "builtin"}, headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith(polling) and "Queued" in partial

    Rollout.objects.filter(pk=rollout.pk).update(status=Rollout.Status.SCORED, score=1.0)
    done = viewer_client.get(url, {"harness": "builtin"}, headers={"HX-Request": "true"}).content.decode()
    assert done.lstrip().startswith('<section id="results"') and "hx-trigger" not in done and "1.000" in done


def test_the_list_filters_and_links_each_rollout(viewer_client, scored, fruit_task, agent_endpoint):
    Rollout.objects.create(revision=fruit_task, endpoint=agent_endpoint, harness="openclaw", status="failed")
    everything = viewer_client.get(reverse("evaluation:list")).content.decode()
    assert "2 rollouts" in everything and f"/rollouts/{scored.pk}/" in everything
    only_scored = viewer_client.get(reverse("evaluation:list"), {"status": "scored"}).content.decode()
    assert "1 rollout" in only_scored and "0.750" in only_scored
    assert "Start rollouts" not in everything  # viewers cannot start them


def test_outsiders_see_nothing(outsider_client, scored):
    for url in (
        reverse("evaluation:list"),
        reverse("evaluation:detail", args=[scored.pk]),
        reverse("evaluation:trajectory-stats"),
    ):
        assert outsider_client.get(url).status_code == 403


def test_a_reviewer_starts_rollouts_as_sandbox_jobs(reviewer_client, fruit_task, agent_endpoint):
    assert "Start rollouts" in reviewer_client.get(reverse("evaluation:list")).content.decode()
    response = reviewer_client.post(
        reverse("evaluation:start"),
        {"task": "fruit-summary", "endpoint": "scripted", "harness": "builtin", "repeats": 2},
    )
    rollouts = list(Rollout.objects.order_by("repeat_index"))
    assert response.status_code == 302 and response["Location"].endswith(f"?group={rollouts[0].group}")
    assert [(r.repeat_index, r.status, r.harness) for r in rollouts] == [
        (0, "queued", "builtin"),
        (1, "queued", "builtin"),
    ]
    assert {r.job_run.kind for r in rollouts} == {"evaluation.run_rollout"}
    assert {r.job_run.queue for r in rollouts} == {"sandbox"}

    bad = reviewer_client.post(
        reverse("evaluation:start"), {"task": "nope", "endpoint": "scripted", "harness": "builtin", "repeats": 1}
    )
    assert bad.status_code == 400 and "No task has the id" in bad.content.decode()


def test_the_rollout_form_offers_agent_endpoints_only(reviewer_client, fruit_task, agent_endpoint):
    ModelEndpoint.objects.create(name="judge-only", base_url="http://127.0.0.1:9/v1", model="j", roles=["judge"])
    page = reviewer_client.get(reverse("evaluation:start")).content.decode()
    assert '<option value="scripted"' in page and "judge-only" not in page
    refused = reviewer_client.post(
        reverse("evaluation:start"),
        {"task": "fruit-summary", "endpoint": "judge-only", "harness": "builtin", "repeats": 1},
    )
    assert refused.status_code == 400 and not Rollout.objects.exists()


def test_viewers_cannot_start_or_retry(viewer_client, scored):
    assert viewer_client.post(reverse("evaluation:start"), {"task": "fruit-summary"}).status_code == 403
    assert viewer_client.post(reverse("evaluation:retry", args=[scored.pk])).status_code == 403


def test_a_failed_rollout_is_retried_on_the_same_row(reviewer_client, fruit_task, agent_endpoint):
    failed = Rollout.objects.create(
        revision=fruit_task,
        endpoint=agent_endpoint,
        harness="builtin",
        attempt=1,
        status="failed",
        exit_reason="worker_lost",
        error="its worker died",
    )
    page = reviewer_client.get(reverse("evaluation:detail", args=[failed.pk])).content.decode()
    assert "Retry (attempt 2)" in page and "its worker died" in page
    reviewer_client.post(reverse("evaluation:retry", args=[failed.pk]))
    failed.refresh_from_db()
    assert (failed.status, failed.error, failed.exit_reason, failed.attempt) == ("queued", "", "", 1)
    assert failed.previous_attempts[0]["exit_reason"] == "worker_lost"
    assert failed.job_run.status == JobRun.Status.QUEUED and Rollout.objects.count() == 1


def test_trajectory_statistics_and_jsonl_export(viewer_client, scored):
    stats = viewer_client.get(reverse("evaluation:trajectory-stats")).content.decode()
    assert "Distribution of turns" in stats and "calls unsupported tools: canvas" in stats
    assert '<span class="stat">2</span>' in stats and '<span class="stat">1</span>' in stats
    high = viewer_client.get(reverse("evaluation:trajectory-stats"), {"min_reward": "0.9"}).content.decode()
    assert '<span class="stat">0</span>' in high

    export = viewer_client.get(reverse("evaluation:trajectories", args=[scored.pk]))
    lines = [json.loads(line) for line in export.content.decode().splitlines()]
    assert [(t["index"], t["excluded"], t["reward"]) for t in lines] == [(0, False, 0.75), (1, True, 0.75)]


def test_the_api_lists_reads_starts_and_retries(api_as, viewer, reviewer, scored, fruit_task):
    as_viewer = api_as(viewer)
    listed = as_viewer.get("/api/rollouts/", {"status": "scored"}).json()
    assert [r["id"] for r in listed["results"]] == [scored.pk]
    one = as_viewer.get(f"/api/rollouts/{scored.pk}/").json()
    assert one["task"] == "fruit-summary" and one["sub_scores"]["summary_right"] == 0.0
    assert one["runtime"] == "clawgym-runtime-1-0123abcd4567"  # the sandbox runtime its agent and checker ran in
    assert one["proxy_session"] == scored.proxy_session_id and scored.proxy_session.token not in json.dumps(one)
    assert one["workspace_changes"] == [{"path": "fruit.csv", "change": "modified", "size": 27, "kind": "file"}]
    assert as_viewer.post("/api/rollouts/", {"task": "fruit-summary", "endpoint": "scripted"}).status_code == 403
    trajectories = as_viewer.get("/api/trajectories/", {"rollout": scored.pk, "excluded": "false"}).json()
    assert [t["index"] for t in trajectories["results"]] == [0]

    as_reviewer = api_as(reviewer)
    started = as_reviewer.post(
        "/api/rollouts/",
        {
            "task": "fruit-summary",
            "endpoint": "scripted",
            "harness": "builtin",
            "repeats": 2,
            "options": {"max_turns": 5},
        },
        format="json",
    )
    assert started.status_code == 201 and [r["status"] for r in started.json()] == ["queued", "queued"]
    assert Rollout.objects.get(pk=started.json()[0]["id"]).harness_options == {"max_turns": 5}
    assert as_reviewer.post("/api/rollouts/", {"task": "nope", "endpoint": "scripted"}).status_code == 400
    conflict = as_reviewer.post(f"/api/rollouts/{scored.pk}/retry/")
    assert conflict.status_code == 409 and "only failed or cancelled ones are retried" in conflict.json()["detail"]


def test_tool_arguments_keep_the_line_breaks_of_commands_and_file_contents():
    assert show_arguments('{"command": "cd x\\nmake", "timeout": 5}') == "command:\n  cd x\n  make\ntimeout: 5"
    assert show_arguments({"path": "a.txt", "content": "one line\n"}) == "path: a.txt\ncontent: one line\n"
    assert show_arguments("not json {") == "not json {"


def test_the_admin_shows_rollouts_read_only(admin_client, scored):
    assert admin_client.get("/admin/evaluation/rollout/").status_code == 200
    assert admin_client.get(f"/admin/evaluation/rollout/{scored.pk}/change/").status_code == 200
    assert admin_client.get("/admin/evaluation/rollout/add/").status_code == 403


def test_an_incomplete_rollout_offers_judging_again(reviewer_client, api_as, reviewer, scored, fruit_task):
    fruit_task.rubric = [
        {
            "name": "clear",
            "target_file": "summary.txt",
            "weight": 1.0,
            "scores": {level: level for level in ("0", "0.25", "0.5", "0.75", "1")},
        }
    ]
    fruit_task.save(_allow_update=True)
    Rollout.objects.filter(pk=scored.pk).update(
        status="incomplete",
        score=None,
        score_reason="rubric judging incomplete: no judge",
        rubric_judgements=[
            {"rule": "clear", "weight": 1.0, "score": None, "failed": True, "error": "no judge", "model_calls": []}
        ],
    )
    page = reviewer_client.get(reverse("evaluation:detail", args=[scored.pk])).content.decode()
    assert "Judge the rubric again" in page and "not judged" in page and "code score 0.750" in page
    # No judge endpoint exists: judging again says so, and nothing changes.
    response = api_as(reviewer).post(f"/api/rollouts/{scored.pk}/rejudge/")
    assert response.status_code == 409 and "role 'judge'" in response.json()["detail"]
    assert Rollout.objects.get(pk=scored.pk).status == "incomplete"


def test_viewers_see_failure_reasons_without_server_paths(
    viewer_client, admin_client, api_as, viewer, fruit_task, agent_endpoint
):
    failed = Rollout.objects.create(
        revision=fruit_task,
        endpoint=agent_endpoint,
        harness="builtin",
        attempt=2,
        status="failed",
        exit_reason="sandbox_error",
        error="bwrap: Can't mkdir /var/lib/clawgym/rollouts/r-17/ws: No space left",
        check_status="sandbox_error",
        check_reason="could not install the checker: /var/lib/clawgym/ws-17/reward",
        log_tail="node: cannot open /opt/clawgym/.harness/openclaw/dist/index.js",
        previous_attempts=[
            {
                "attempt": 1,
                "status": "failed",
                "exit_reason": "error",
                "error": "relay socket /run/clawgym/relay-17.sock refused",
            }
        ],
    )
    url = reverse("evaluation:detail", args=[failed.pk])
    page = viewer_client.get(url).content.decode()
    assert "Can&#x27;t mkdir …/ws: No space left" in page and "…/index.js" in page and "…/relay-17.sock" in page
    assert "/var/lib/clawgym" not in page and "/opt/clawgym" not in page and "/run/clawgym" not in page
    assert "/var/lib/clawgym/rollouts/r-17/ws" in admin_client.get(url).content.decode()
    api = api_as(viewer).get(f"/api/rollouts/{failed.pk}/").json()
    assert api["error"] == "bwrap: Can't mkdir …/ws: No space left"
    assert api["check_reason"] == "could not install the checker: …/reward" and "…/reward" in page
    assert api["previous_attempts"][0]["error"] == "relay socket …/relay-17.sock refused"


def test_the_task_page_starts_a_rollout_with_a_chosen_model_and_harness(
    reviewer_client, viewer_client, fruit_task, agent_endpoint
):
    task_page = reverse("tasks:detail", args=["fruit-summary"])
    start = reverse("evaluation:start")
    assert f'hx-get="{start}?task=fruit-summary"' in reviewer_client.get(task_page).content.decode()
    assert "Start a rollout" not in viewer_client.get(task_page).content.decode()
    assert viewer_client.get(start, {"task": "fruit-summary"}).status_code == 403

    form = reviewer_client.get(start, {"task": "fruit-summary"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in form and '<input type="hidden" name="task" value="fruit-summary">' in form
    assert '<option value="scripted">' in form and '<option value="builtin">' in form
    assert "<html" in reviewer_client.get(start, {"task": "fruit-summary"}).content.decode()  # works without JS

    started = reviewer_client.post(
        start, {"task": "fruit-summary", "endpoint": "scripted", "harness": "builtin", "repeats": 1}
    )
    [rollout] = Rollout.objects.all()
    assert started.status_code == 302 and started["Location"].endswith(f"?group={rollout.group}")
    assert (rollout.revision, rollout.harness, rollout.endpoint) == (fruit_task, "builtin", agent_endpoint)
