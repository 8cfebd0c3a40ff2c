"""The task score (tasks.scoring): the checker through the default bubblewrap sandbox, the judge through the
scripted upstream on loopback, and the hybrid s_task = λ·s_code + (1−λ)·s_rubric."""

import json

import pytest

from llm.models import ModelCall
from llm.testing import Reply
from sandbox import Limits, Workspace, get_backend
from sandbox.testing import require_bwrap
from tasks.judging import Judgement
from tasks.package import STANDARD_REWARD_SH, PackageFile, TaskPackage
from tasks.scoring import ScoreStatus, combine, score_run
from tasks.services import save_package
from tasks.verification import CheckResult, CheckStatus

FAST = Limits(wall_seconds=20, cpu_seconds=20, max_output_bytes=64 * 1024)
HALF_CHECK = 'import json\nprint(json.dumps({"exists": 1, "totals": 0}))\n'  # s_code = 0.5


def rule(name, target="report.md", weight=1.0):
    scores = {level: f"{name} at {level}" for level in ("0", "0.25", "0.5", "0.75", "1")}
    return {"name": name, "target_file": target, "scores": scores, "weight": weight}


def verdict(score, reason="because"):
    return Reply.text(json.dumps({"score": score, "reason": reason}))


@pytest.fixture(autouse=True)
def sandboxed(settings, fast_llm_retries):
    require_bwrap()
    settings.CLAWGYM_SANDBOX_BACKEND = "bwrap"


def make_revision(rubric=(), code_weight=0.7, check_py=HALF_CHECK, reward_sh=STANDARD_REWARD_SH):
    files = [
        PackageFile("reward.sh", reward_sh.encode(), "reward"),
        PackageFile("check.py", check_py.encode(), "reward"),
    ]
    package = TaskPackage(
        external_id="t-score", instruction="Write report.md.", files=files, rubric=list(rubric), code_weight=code_weight
    )
    return save_package(package).revision


def score(revision, files, final_message="done", **kwargs):
    with Workspace.create(files) as workspace:
        return score_run(revision, workspace, final_message, [], limits=FAST, **kwargs)


def test_a_two_rule_rubric_gives_the_weighted_hybrid_score(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy", weight=3), rule("Tone", weight=1)], code_weight=0.75)
    scripted_upstream.push(verdict(1, "all totals right"), verdict(0.25, "curt"))

    result = score(revision, {"report.md": b"# Totals\n"}, subject="rollout:7")

    assert result.status is ScoreStatus.OK and result.code.score == 0.5
    assert result.rubric_score == (3 * 1 + 1 * 0.25) / 4 == 0.8125
    assert result.score == 0.75 * 0.5 + 0.25 * 0.8125 == 0.578125
    stored = json.loads(json.dumps(result.as_dict()))  # JSON as a rollout stores it
    assert stored["score"] == 0.578125 and stored["code_score"] == 0.5 and stored["code"]["status"] == "ok"
    assert [(j["rule"], j["score"], j["reason"]) for j in stored["judgements"]] == [
        ("Accuracy", 1.0, "all totals right"),
        ("Tone", 0.25, "curt"),
    ]
    assert list(ModelCall.objects.values_list("purpose", "subject")) == [("judge", "rollout:7")] * 2
    assert "# Totals" in scripted_upstream.requests[0].json["messages"][1]["content"]


def test_a_code_only_task_keeps_its_code_score_without_any_model_call(judge, scripted_upstream):
    revision = make_revision(code_weight=0.7)
    result = score(revision, {"report.md": b"x"})
    assert (result.status, result.score, result.rubric_score, result.judgements) == (ScoreStatus.OK, 0.5, None, [])
    assert not result.has_rubric
    assert scripted_upstream.requests == [] and not ModelCall.objects.exists()


def test_a_failed_judgement_leaves_the_score_incomplete_not_zero(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy", weight=3), rule("Tone")])
    scripted_upstream.push(verdict(1), Reply.text("hmm"), Reply.text("still no json"))

    result = score(revision, {"report.md": b"x"})

    assert result.status is ScoreStatus.INCOMPLETE
    assert result.score is None and result.rubric_score is None and result.code.score == 0.5
    assert "'Tone'" in result.reason and "no valid JSON answer" in result.reason
    assert [j.failed for j in result.judgements] == [False, True]
    assert ModelCall.objects.filter(purpose="judge").count() == 3

    # Judging again later (only the failed rule) and combining gives the score.
    stored = [Judgement.from_dict(j) for j in json.loads(json.dumps(result.as_dict()))["judgements"]]
    retried = [stored[0], Judgement(rule="Tone", weight=1.0, target_file="report.md", score=0.5)]
    again = combine(revision.rubric, revision.code_weight, result.code, retried)
    assert again.status is ScoreStatus.OK and again.score == pytest.approx(0.7 * 0.5 + 0.3 * (3 + 0.5) / 4)


def test_without_a_judge_endpoint_the_code_score_is_kept_and_the_rubric_waits(db):
    revision = make_revision([rule("Accuracy")])
    result = score(revision, {"report.md": b"x"})
    assert result.status is ScoreStatus.INCOMPLETE and result.score is None and result.code.score == 0.5
    assert "no enabled model endpoint serves the role 'judge'" in result.reason


@pytest.mark.parametrize(
    ("script", "change"), [("echo REWRITTEN > report.md", "modified"), ("rm -f report.md", "deleted")]
)
def test_the_judge_sees_target_files_as_the_agent_left_them_and_the_checkers_writes_keep_its_score(
    judge, scripted_upstream, script, change
):
    """A checker that runs the agent's script may rewrite an output: the rubric is judged on the workspace as the
    agent left it, before the checker ran, and the code score stands, with the write recorded."""
    writing = f"#!/usr/bin/env bash\n{script}\necho 1\n"
    revision = make_revision([rule("Accuracy")], code_weight=0.5, reward_sh=writing)
    scripted_upstream.push(verdict(0.5))

    result = score(revision, {"report.md": b"THE AGENT'S REPORT"})

    assert result.code.status is CheckStatus.OK and result.code.score == 1.0
    assert [(w.path, w.change) for w in result.code.workspace_writes] == [("report.md", change)]
    assert f"{change} report.md" in result.code.reason and "the score stands" in result.code.reason
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert "THE AGENT'S REPORT" in prompt and "REWRITTEN" not in prompt
    assert result.status is ScoreStatus.OK and result.score == 0.75


def test_a_checker_that_cannot_run_leaves_the_run_unscored_and_calls_no_judge(judge, scripted_upstream, monkeypatch):
    monkeypatch.delenv("CLAWGYM_ALLOW_UNSANDBOXED", raising=False)
    revision = make_revision([rule("Accuracy")])
    result = score(revision, {"report.md": b"x"}, backend=get_backend("process"))
    assert result.code.status is CheckStatus.SANDBOX_ERROR
    assert result.status is ScoreStatus.UNSCORED and result.score is None and "could not run" in result.reason
    assert scripted_upstream.requests == []


def test_combine_uses_the_rubric_weights_and_lambda():
    check = CheckResult(score=1.0, status=CheckStatus.OK, reason="")
    rubric = [rule("a", weight=1), rule("b", weight=2)]
    judged = [Judgement("a", 1.0, "report.md", 0.0), Judgement("b", 2.0, "report.md", 0.75)]
    result = combine(rubric, 0.5, check, judged)
    assert result.rubric_score == 0.5 and result.score == 0.75
    missing = combine(rubric, 0.5, check, judged[:1])
    assert missing.status is ScoreStatus.INCOMPLETE and "'b' was not judged" in missing.reason
