"""The evaluation-run commands end to end (builtin harness, bubblewrap, the scripted strong and weak models of
evaluation.testing): `evaluate`, `compare`, `leaderboard`, `eval_report`, `regrade` and their --json shapes, with every
figure computed by hand from evaluation.testing.SOLVES.

The intervals by hand: a 95% percentile bootstrap over per-task means. Strong's task means are [1, 1, 1, 0.75]: a
draw of 4 holds k times the 0.75 (k ~ Binomial(4, 1/4)), its mean 1 - k/16; P(k >= 3) = 5.1% and P(k = 4) = 0.4%, so
the 2.5% quantile is the k = 3 mean, 0.8125, and the 97.5% one 1.0 (P(k = 0) = 32%). Weak's [1, 0.75, 0.75, 0.75]
gives [0.75, 0.9375] the same way; two tasks [1, 0.75] give [0.75, 1.0]; the paired differences strong - weak
[0, 0.25, 0.25, 0] give [0, 0.25] (each end has probability 1/16 > 2.5%), and their exact sign-flip p-value is 8/16:
the mean's size stays 0.125 exactly when the two non-zero differences keep one sign.
"""

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.exports import CSV_COLUMNS
from evaluation.models import EvalRun, Rollout, RolloutScore
from evaluation.services.rollouts import create_rollouts, execute_rollout
from evaluation.testing import RIGHT, TASKS, WRONG, endpoints, expected_scores, make_tasks, needs_bwrap, respond
from jobs import enqueue
from jobs.models import JobRun
from jobs.runner import execute
from llm.testing import Reply
from tasks.models import RevisionFile
from tasks.services import revise_task

pytestmark = [needs_bwrap, pytest.mark.django_db(transaction=True)]

CONTRACT_KEYS = {"run", "status", "overall", "categories", "tasks", "pass_at_k", "outcomes", "tokens", "cost"}
OUTCOME_KEYS = {"scored", "agent_limit", "agent_error", "judge_incomplete", "infra"}


@pytest.fixture
def world(live_server_asgi, scripted_upstream, settings):
    settings.CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = 0
    scripted_upstream.responder = respond
    revisions = make_tasks()
    strong, weak = endpoints(scripted_upstream)
    benchmark = Benchmark.objects.create(name="eval-bench")
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions.values())
    return revisions, scripted_upstream


def run_command(*args) -> tuple[str, str, CommandError | None]:
    """(stdout, stderr, the CommandError or None) of `manage.py ARGS`."""
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def last_json(text: str):
    return json.loads(text.strip().splitlines()[-1])


def evaluate(*args) -> tuple[dict, str, str]:
    out, err, error = run_command("evaluate", *args, "--harness", "builtin", "--here", "--json")
    assert error is None, f"{error}\n{err}"
    return last_json(out), out, err


def test_evaluate_compare_leaderboard_and_report_give_the_hand_computed_figures(world):
    _revisions, upstream = world
    strong, _out, err = evaluate("--benchmark", "eval-bench", "--endpoint", "strong", "--repeats", "2")
    weak, _out, _err = evaluate("--benchmark", "eval-bench", "--version", "1", "--endpoint", "weak")

    # evaluate --json: the contract's keys, each figure by hand (strong: eval-a..c right; weak: eval-a only).
    assert CONTRACT_KEYS <= set(strong) and CONTRACT_KEYS <= set(weak)
    assert strong["status"] == weak["status"] == "complete"
    assert strong["tasks"] == {
        t: {"mean": s, "std": 0.0, "min": s, "max": s, "n": 2} for t, s in expected_scores("strong-model").items()
    }
    assert weak["tasks"] == {
        t: {"mean": s, "std": 0.0, "min": s, "max": s, "n": 1} for t, s in expected_scores("weak-model").items()
    }
    assert strong["overall"] == {"mean": 0.9375, "ci": [0.8125, 1.0], "std_across_repeats": 0.0}
    assert weak["overall"] == {"mean": 0.8125, "ci": [0.75, 0.9375], "std_across_repeats": None}
    assert strong["categories"] == {
        "analysis-reasoning": {"mean": RIGHT, "ci": [RIGHT, RIGHT], "tasks": 2},
        "systems-automation": {"mean": RIGHT, "ci": [RIGHT, RIGHT], "tasks": 1},
        "uncategorized": {"mean": WRONG, "ci": [WRONG, WRONG], "tasks": 1},
    }
    assert weak["categories"] == {
        "analysis-reasoning": {"mean": 0.875, "ci": [WRONG, RIGHT], "tasks": 2},
        "systems-automation": {"mean": WRONG, "ci": [WRONG, WRONG], "tasks": 1},
        "uncategorized": {"mean": WRONG, "ci": [WRONG, WRONG], "tasks": 1},
    }
    assert strong["pass_at_k"] == {"1": 0.75, "2": 0.75} and weak["pass_at_k"] == {"1": 0.25}
    assert strong["outcomes"] == {**dict.fromkeys(OUTCOME_KEYS, 0), "scored": 8}
    assert weak["outcomes"] == {**dict.fromkeys(OUTCOME_KEYS, 0), "scored": 4}
    strong_run = EvalRun.objects.get(pk=strong["run"])
    rollouts = list(strong_run.rollouts.all())
    assert strong["tokens"] == sum(r.input_tokens + r.output_tokens for r in rollouts) > 0
    assert strong["cost"] == float(sum(r.cost for r in rollouts))
    assert strong_run.benchmark_version.number == 1 and strong_run.repeats == 2
    # One progress line per finished rollout on stderr: task, repeat, outcome, score.
    assert sorted(
        line.split(" (rollout")[0] + line.split(")")[-1] for line in err.splitlines() if "repeat" in line
    ) == sorted(
        f"{t} repeat {i}/2: scored, score {s:g}" for t, s in expected_scores("strong-model").items() for i in (1, 2)
    )

    # compare --json: strong solves eval-b and eval-c, which weak does not.
    out, _err, error = run_command("compare", str(strong["run"]), str(weak["run"]), "--json")
    assert error is None
    comparison = last_json(out)
    assert comparison["mean_difference"] == 0.125 and comparison["ci"] == [0.0, 0.25]
    assert comparison["p_value"] == 0.5
    assert comparison["flipped"] == {"a_only": ["eval-b", "eval-c"], "b_only": []}
    assert comparison["categories"] == {"analysis-reasoning": 0.125, "systems-automation": 0.25, "uncategorized": 0.0}
    reverse = last_json(run_command("compare", str(weak["run"]), str(strong["run"]), "--json")[0])
    assert reverse["flipped"] == {"a_only": [], "b_only": ["eval-b", "eval-c"]}
    assert reverse["mean_difference"] == -0.125
    text, _err, _error = run_command("compare", str(strong["run"]), str(weak["run"]))
    assert "solved by A only: eval-b, eval-c" in text and "solved by B only: none" in text
    assert "systems-automation  +0.250" in text

    # leaderboard --json: both complete runs, best first.
    board = last_json(run_command("leaderboard", "--benchmark", "eval-bench", "--json")[0])
    assert (board["benchmark"], board["version"]) == ("eval-bench", 1)
    assert [(e["run"], e["endpoint"], e["overall"]["mean"]) for e in board["entries"]] == [
        (strong["run"], "strong", 0.9375),
        (weak["run"], "weak", 0.8125),
    ]
    assert board["entries"][0]["categories"] == strong["categories"]
    assert board["entries"][1]["tokens"] == weak["tokens"] and board["entries"][1]["cost"] == weak["cost"]
    table = run_command("leaderboard", "--benchmark", "eval-bench")[0].splitlines()
    assert table[1].split() == [
        "model",
        "harness",
        "run",
        "overall",
        "95%",
        "CI",
        "analysis-reasoning",
        "systems-automation",
        "uncategorized",
        "cost",
        "tokens",
    ]
    assert table[2].split()[:8] == [
        "strong",
        "(strong-model)",
        "builtin",
        f"#{strong['run']}",
        "0.938",
        "[0.812,",
        "1.000]",
        "1.000",
    ]

    # eval_report: the export (one JSON line), one CSV row per rollout, and the tasks table for people.
    export = last_json(run_command("eval_report", str(strong["run"]), "--json")[0])
    assert {k: export[k] for k in CONTRACT_KEYS} == {k: strong[k] for k in CONTRACT_KEYS}
    assert len(export["rollouts"]) == 8 and export["config"]["repeats"] == 2
    rows = list(csv.DictReader(io.StringIO(run_command("eval_report", str(strong["run"]), "--csv")[0])))
    assert len(rows) == 8 and list(rows[0]) == CSV_COLUMNS
    assert sorted((r["task"], r["repeat"], float(r["score"]), r["outcome"]) for r in rows) == sorted(
        (t, str(i), s, "scored") for t, s in expected_scores("strong-model").items() for i in (0, 1)
    )
    report = run_command("eval_report", str(strong["run"]))[0]
    assert "overall 0.938 (95% CI [0.812, 1.000])" in report
    task_lines = report.splitlines()[-4:]
    assert [line.split()[0] for line in task_lines] == ["eval-a", "eval-b", "eval-c", "eval-d"]  # best first
    assert task_lines[-1].split() == ["eval-d", "0.750", "0.000", "0.750", "0.750", "2"]


def test_evaluate_again_reuses_the_run_and_a_resume_with_a_changed_flag_is_refused(world):
    _revisions, upstream = world
    first, _out, _err = evaluate("--task", "eval-a", "eval-b", "--endpoint", "weak", "--time-limit", "300")
    calls = len(upstream.requests)
    assert calls > 0

    again, _out, err = evaluate("--task", "eval-a", "--task", "eval-b", "--endpoint", "weak", "--time-limit", "300")
    assert again["run"] == first["run"] and "resuming it" in err
    # Reused with another threshold or name: the threshold is the run's now, and both are said.
    reused, _out, err = evaluate(
        "--task",
        "eval-a",
        "eval-b",
        "--endpoint",
        "weak",
        "--time-limit",
        "300",
        "--pass-threshold",
        "0.5",
        "--name",
        "another name",
    )
    assert reused["run"] == first["run"] and EvalRun.objects.get(pk=first["run"]).pass_threshold == 0.5
    assert f"run #{first['run']}: pass threshold 1 -> 0.5 (its pass figures recounted)" in err
    assert "(it keeps its name; --fresh starts a new run named 'another name')" in err
    evaluate("--resume", str(first["run"]), "--pass-threshold", "1")
    assert {k: again[k] for k in CONTRACT_KEYS} == {k: first[k] for k in CONTRACT_KEYS}
    assert len(upstream.requests) == calls  # no model call: every rollout was kept
    resumed, _out, _err = evaluate("--resume", str(first["run"]))
    assert resumed["run"] == first["run"] and resumed["status"] == "complete"
    assert len(upstream.requests) == calls
    run = EvalRun.objects.get(pk=first["run"])
    assert run.limits == {"timeout": 300} and set(run.rollouts.values_list("attempt", flat=True)) == {1}

    # The flags given with --resume must match the run's settings; the message names what differs.
    for flags, named in (
        (["--repeats", "3"], "repeats"),
        (["--time-limit", "60"], "limits"),
        (["--endpoint", "strong"], "endpoint"),
        (["--task", "eval-a"], "revisions"),
        (["--option", "temperature=0.5"], "harness_options"),
    ):
        _out, _err, error = run_command("evaluate", "--resume", str(first["run"]), *flags, "--here", "--json")
        assert error is not None and "differ" in str(error), (flags, error)
        assert f"settings ({named}" in str(error) or f", {named}" in str(error), (flags, error)
    EvalRun.objects.filter(pk=first["run"]).update(inline=False)  # as if the workers ran it
    assert run_command("evaluate", "--resume", str(first["run"]), "--repeats", "3", "--here")[2] is not None
    assert EvalRun.objects.get(pk=first["run"]).inline is False  # a refused resume changes nothing
    same, _out, _err = evaluate(
        "--resume", str(first["run"]), "--task", "eval-b", "eval-a", "--endpoint", "weak", "--time-limit", "300"
    )
    assert same["run"] == first["run"] and len(upstream.requests) == calls

    # --fresh: a new run of the same configuration.
    fresh, _out, _err = evaluate("--task", "eval-a", "--endpoint", "weak", "--fresh")
    other, _out, _err = evaluate("--task", "eval-a", "--endpoint", "weak", "--fresh")
    assert fresh["run"] != other["run"] and len(upstream.requests) > calls


def test_an_incomplete_run_exits_non_zero_with_its_json_and_a_resume_completes_it(world, settings):
    _revisions, upstream = world
    settings.CLAWGYM_EVAL_MAX_ATTEMPTS = 1
    upstream.responder = lambda body: Reply.error(503, "down")
    out, err, error = run_command(
        "evaluate", "--task", "eval-a", "eval-c", "--endpoint", "strong", "--harness", "builtin", "--here", "--json"
    )
    report = last_json(out)
    assert error is not None
    assert f"run #{report['run']} is incomplete" in str(error) and "eval-a, eval-c" in str(error)
    assert f"evaluate --resume {report['run']}" in str(error)
    assert report["status"] == "incomplete" and report["overall"]["mean"] is None
    assert report["tasks"]["eval-a"] == {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    assert report["outcomes"] == {**dict.fromkeys(OUTCOME_KEYS, 0), "infra": 2}
    assert "eval-a repeat 1/1" in err and "infra" in err

    upstream.responder = respond
    resumed, _out, _err = evaluate("--resume", str(report["run"]))
    assert resumed["status"] == "complete" and resumed["tasks"]["eval-a"]["mean"] == RIGHT
    assert resumed["outcomes"] == {**dict.fromkeys(OUTCOME_KEYS, 0), "scored": 2}
    assert set(Rollout.objects.filter(eval_run_id=report["run"]).values_list("attempt", flat=True)) == {2}


def test_no_worker_taking_the_jobs_cancels_the_run_and_says_how_to_start_one(world):
    _revisions, upstream = world
    out, _err, error = run_command(
        "evaluate", "--task", "eval-a", "--endpoint", "strong", "--harness", "builtin", "--start-timeout", "1", "--json"
    )
    assert error is not None and "--here" in str(error) and "qcluster" in str(error)
    report = last_json(out)
    assert report["status"] == "cancelled"
    run = EvalRun.objects.get(pk=report["run"])
    assert run.status == EvalRun.Status.CANCELLED
    assert [(r.status, r.job_run.status) for r in run.rollouts.select_related("job_run")] == [
        (Rollout.Status.CANCELLED, JobRun.Status.CANCELLED)
    ]
    assert upstream.requests == []


def _fix_fruit_order(task) -> None:
    """A reviewer decides the order of the fruit does not matter (as in test_eval_runs.test_regrade...)."""
    check = task.current_revision.files.get(role=RevisionFile.Role.REWARD, path="check.py").blob.content.decode()
    fixed = check.replace(
        'text.strip() == "3 apples, 2 pears"', 'sorted(text.strip().split(", ")) == sorted(["3 apples", "2 pears"])'
    )
    assert fixed != check
    revise_task(task, user=None, message="order does not matter", file_changes={("reward", "check.py"): fixed.encode()})


def test_regrade_of_a_task_after_a_checker_fix_changes_both_models_scores(world):
    revisions, _upstream = world
    strong, _out, _err = evaluate("--task", "eval-d", "eval-a", "--endpoint", "strong")
    weak, _out, _err = evaluate("--task", "eval-d", "eval-a", "--endpoint", "weak")
    assert strong["tasks"]["eval-d"]["mean"] == weak["tasks"]["eval-d"]["mean"] == WRONG  # neither solves eval-d
    [lone] = create_rollouts(
        revisions["eval-d"], EvalRun.objects.get(pk=weak["run"]).endpoint, harness="builtin", user=None
    )
    assert execute_rollout(lone.pk).score == WRONG  # a rollout of no run: regraded with the task too
    _fix_fruit_order(revisions["eval-d"].task)

    out, err, error = run_command("regrade", "--task", "eval-d", "--json")
    assert error is None, error
    result = last_json(out)
    assert (result["rollouts"], result["changed"], result["failed"]) == (3, 3, [])
    assert result["tasks"] == {"eval-d": {"revision": 2, "before": WRONG, "after": RIGHT, "rollouts": 3}}
    assert result["runs"] == {
        str(strong["run"]): {"before": (RIGHT + WRONG) / 2, "after": RIGHT},
        str(weak["run"]): {"before": (RIGHT + WRONG) / 2, "after": RIGHT},
    }
    assert "regraded 3 of 3" in err
    for run in (strong["run"], weak["run"]):
        report = last_json(run_command("eval_report", str(run), "--json")[0])
        assert report["tasks"]["eval-d"]["mean"] == RIGHT and report["overall"]["mean"] == RIGHT
    lone.refresh_from_db()
    assert lone.score == RIGHT
    assert list(RolloutScore.objects.filter(rollout=lone).values_list("kind", "score")) == [
        ("run", WRONG),
        ("regrade", RIGHT),
    ]

    # Regrading a run scores its rollouts again (nothing changes now); the job does the same for the pages.
    again = last_json(run_command("regrade", "--run", str(strong["run"]), "--json")[0])
    assert (again["rollouts"], again["changed"]) == (2, 0)
    assert again["tasks"]["eval-a"] == {"revision": 1, "before": RIGHT, "after": RIGHT, "rollouts": 1}
    job = enqueue("evaluation.regrade", run_id=weak["run"])
    assert job.queue == "sandbox"
    assert execute(job.pk) == JobRun.Status.SUCCEEDED
    job.refresh_from_db()
    assert (job.result["rollouts"], job.result["changed"]) == (2, 0)
    assert (job.progress_done, job.progress_total) == (2, 2)
    assert RolloutScore.objects.filter(rollout__eval_run_id=weak["run"], kind="regrade").count() == 3

    _out, _err, error = run_command("regrade", "--task", "no-such-task")
    assert error is not None and "no such task: no-such-task" in str(error)


def test_the_human_summary_and_unknown_names(world):
    out, _err, error = run_command(
        "evaluate", "--task", "eval-c", "--endpoint", "strong", "--harness", "builtin", "--here"
    )
    assert error is None
    assert "complete, 1 of 1 rollouts finished" in out and "overall 1.000 (95% CI [1.000, 1.000])" in out
    assert "systems-automation      1  1.000  [1.000, 1.000]" in out
    assert "outcomes: scored 1, agent_limit 0, agent_error 0, judge_incomplete 0, infra 0" in out
    for args, message in (
        (["--benchmark", "nope", "--endpoint", "strong"], "no benchmark named 'nope'"),
        (["--benchmark", "eval-bench", "--version", "7", "--endpoint", "strong"], "has no version 7"),
        (["--task", "eval-a", "--endpoint", "nobody"], "no model endpoint named 'nobody'"),
        (["--task", "eval-z", "--endpoint", "strong"], "no such task: eval-z"),
        (["--endpoint", "strong"], "give either --benchmark"),
        (["--resume", "999"], "no evaluation run #999"),
        (["--task", "eval-a", "--endpoint", "strong", "--option", "timeout=5"], "give --time-limit instead of"),
        (["--task", "eval-a", "--endpoint", "strong", "--repeats", "0"], "repeats must be between 1 and"),
    ):
        _out, _err, error = run_command("evaluate", *args, "--here")
        assert error is not None and message in str(error), (args, error)
    assert set(TASKS) == {"eval-a", "eval-b", "eval-c", "eval-d"}
