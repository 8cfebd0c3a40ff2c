"""Rubric judging (tasks.judging) against the scripted OpenAI-compatible upstream on loopback.

What the judge is shown is asserted on what the scripted server received; every judge call must be a ModelCall row.
"""

import json
import os

import pytest

from llm.models import ModelCall, ModelEndpoint
from llm.testing import Reply
from sandbox import Workspace
from tasks.judging import (
    JUDGE_PROMPT_VERSION,
    MAX_REPLY_CHARS,
    MAX_TARGET_BYTES,
    Judgement,
    JudgingError,
    judge_rubric,
    read_targets,
)
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

INSTRUCTION = "Summarise sales.csv into report.md with a totals table."


def rule(name, target="report.md", weight=1.0):
    return {
        "name": name,
        "target_file": target,
        "scores": {
            "0": f"{name}: nothing",
            "0.25": f"{name}: a little",
            "0.5": f"{name}: half",
            "0.75": f"{name}: most",
            "1": f"{name}: all",
        },
        "weight": weight,
    }


def verdict(score, reason="looks right"):
    return Reply.text(json.dumps({"score": score, "reason": reason}))


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Every test here talks to a scripted upstream (llm.testing.fast_llm_retries)."""


@pytest.fixture
def judge(judge):
    """llm.testing's judge with one retry, so that a failing call is tried twice."""
    judge.max_retries = 1
    judge.save(update_fields=["max_retries"])
    return judge


def make_revision(rubric, external_id="t-judge"):
    package = TaskPackage(
        external_id=external_id,
        instruction=INSTRUCTION,
        files=[PackageFile("sales.csv", b"item,amount\na,1\n")],
        rubric=rubric,
    )
    return save_package(package).revision


def user_prompt(received) -> str:
    messages = received.json["messages"]
    assert messages[0]["role"] == "system"
    return messages[1]["content"]


def test_each_rule_is_one_judge_call_showing_instruction_rule_levels_file_and_reply(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy", weight=3), rule("Tone", target="notes/tone.txt")])
    scripted_upstream.push(verdict(1, "totals match the csv"), verdict(0.25, "tone is curt"))
    files = {"report.md": b"| item | total |\n| a | 1 |\n", "notes/tone.txt": b"Dear team", "sales.csv": b"x"}

    judgements = judge_rubric(revision, files, "I wrote report.md.", endpoint=judge)

    assert [(j.rule, j.weight, j.score, j.reason, j.failed) for j in judgements] == [
        ("Accuracy", 3.0, 1.0, "totals match the csv", False),
        ("Tone", 1.0, 0.25, "tone is curt", False),
    ]
    first, second = (user_prompt(r) for r in scripted_upstream.requests)
    assert INSTRUCTION in first and "## The rule to grade: Accuracy" in first
    for level in ("0", "0.25", "0.5", "0.75", "1"):
        assert f"- {level}: Accuracy: " in first
    assert "| item | total |\n| a | 1 |" in first and "`report.md` (27 bytes)" in first
    assert "I wrote report.md." in first
    assert "Dear team" in second and "| item |" not in second
    # Every call is a ModelCall row, purpose "judge", pointing at the revision it served.
    calls = ModelCall.objects.order_by("pk")
    assert [c.purpose for c in calls] == ["judge", "judge"]
    assert {c.subject for c in calls} == {f"revision:{revision.pk}"}
    assert {c.served for c in calls} == {revision}
    assert [j.model_calls for j in judgements] == [[calls[0].pk], [calls[1].pk]]
    assert judgements[0].as_dict()["prompt_version"] == JUDGE_PROMPT_VERSION
    assert judgements[0].judge == "judge"


def test_a_malformed_answer_is_repaired_once_then_accepted(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(Reply.text("The score is high."), verdict(0.75, "mostly right"))

    [judgement] = judge_rubric(revision, {"report.md": b"ok"}, "", endpoint=judge)

    assert (judgement.score, judgement.reason) == (0.75, "mostly right")
    assert judgement.repaired and not judgement.failed
    repair = scripted_upstream.requests[1].json["messages"]
    assert repair[-2] == {"role": "assistant", "content": "The score is high."}
    assert "holds no JSON object" in repair[-1]["content"]
    refused, accepted = ModelCall.objects.order_by("pk")
    assert refused.error.startswith("invalid JSON answer") and accepted.ok
    assert judgement.model_calls == [accepted.pk]


def test_a_score_outside_the_five_levels_is_repaired(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(verdict(0.3), verdict(0.25, "one of four rows"))

    [judgement] = judge_rubric(revision, {"report.md": b"ok"}, "", endpoint=judge)

    assert judgement.score == 0.25 and judgement.repaired
    assert "at score" in scripted_upstream.requests[1].json["messages"][-1]["content"]


def test_a_level_written_as_a_string_is_accepted_without_repair(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(verdict("0.5"))
    [judgement] = judge_rubric(revision, {"report.md": b"ok"}, "", endpoint=judge)
    assert judgement.score == 0.5 and not judgement.repaired and len(scripted_upstream.requests) == 1


def test_a_rule_with_its_own_levels_is_judged_on_them(judge, scripted_upstream):
    # As imported from a PinchBench criterion scored in steps of 0.2.
    fifths = {
        "name": "Coverage",
        "target_file": "report.md",
        "weight": 60.0,
        "scores": {
            "1.0": "every entry",
            "0.8": "one missing",
            "0.6": "two missing",
            "0.4": "half",
            "0.2": "one entry",
            "0.0": "nothing",
        },
    }
    revision = make_revision([fifths, rule("Tone")])
    # 0.75 is a level of the five-level Tone rule, not of Coverage: refused there, then ".80" names 0.8.
    scripted_upstream.push(verdict(0.75, "most"), verdict(".80", "one entry missing"), verdict(0.8), verdict(0.75))

    coverage, tone = judge_rubric(revision, {"report.md": b"notes"}, "", endpoint=judge)

    assert (coverage.score, coverage.repaired, coverage.failed) == (0.8, True, False)
    prompt = user_prompt(scripted_upstream.requests[0])
    assert "Score levels (the score must be one of 0, 0.2, 0.4, 0.6, 0.8, 1):" in prompt
    assert "- 0.8: one missing\n" in prompt and "0.25" not in prompt
    # The five-level rule refuses 0.8 and takes 0.75.
    assert (tone.score, tone.repaired) == (0.75, True)
    assert "one of 0, 0.25, 0.5, 0.75, 1" in user_prompt(scripted_upstream.requests[2])
    assert len(scripted_upstream.requests) == 4


def test_twice_malformed_is_a_judge_failure_never_a_zero(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy"), rule("Tone")])
    scripted_upstream.push(Reply.text("no idea"), verdict("excellent"), verdict(1))

    failed, judged = judge_rubric(revision, {"report.md": b"ok"}, "", endpoint=judge)

    assert failed.failed and failed.score is None and failed.reason == ""
    assert "no valid JSON answer in 2 tries" in failed.error
    assert failed.model_calls == list(ModelCall.objects.order_by("pk").values_list("pk", flat=True)[:2])
    assert failed.as_dict()["score"] is None
    # The next rule is judged as usual.
    assert (judged.failed, judged.score) == (False, 1.0)


def test_a_call_that_keeps_failing_is_a_judge_failure(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(Reply.error(500), Reply.error(500))
    [judgement] = judge_rubric(revision, {"report.md": b"ok"}, "", endpoint=judge)
    assert judgement.failed and judgement.score is None and "HTTP 500" in judgement.error
    assert judgement.model_calls == [ModelCall.objects.get().pk]


def test_a_missing_target_file_is_stated_to_the_judge(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy", target="out/report.md")])
    scripted_upstream.push(verdict(0, "the report does not exist"))
    judge_rubric(revision, {"sales.csv": b"item,amount\n"}, "Done!", endpoint=judge)
    prompt = user_prompt(scripted_upstream.requests[0])
    assert "The target file `out/report.md` does NOT exist in the workspace" in prompt


def test_a_rule_without_target_is_judged_on_the_reply(judge, scripted_upstream):
    revision = make_revision([rule("Explains", target="")])
    scripted_upstream.push(verdict(1))
    judge_rubric(revision, {}, "Here is why: …", endpoint=judge)
    prompt = user_prompt(scripted_upstream.requests[0])
    assert "names no target file" in prompt and "Here is why: …" in prompt


def test_long_files_and_replies_are_cut_and_say_so(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(verdict(0.5))
    body = ("é" * (MAX_TARGET_BYTES // 2 + 500)).encode()  # two bytes each: the cut falls inside the file
    reply = "START " + "x" * (2 * MAX_REPLY_CHARS) + " END"
    judge_rubric(revision, {"report.md": body}, reply, endpoint=judge)
    prompt = user_prompt(scripted_upstream.requests[0])
    assert f"only its first {MAX_TARGET_BYTES:,} bytes of {len(body):,} are shown" in prompt
    assert "é" * (MAX_TARGET_BYTES // 2) in prompt and "é" * (MAX_TARGET_BYTES // 2 + 1) not in prompt
    assert "START" in prompt and "END" in prompt and "characters of the reply left out" in prompt
    assert len(prompt) < MAX_TARGET_BYTES + MAX_REPLY_CHARS + 3000


def test_binary_targets_are_described_not_dumped(judge, scripted_upstream):
    revision = make_revision([rule("Accuracy", target="chart.png")])
    scripted_upstream.push(verdict(0.5))
    png = b"\x89PNG\r\n\x1a\n\x00\x00SECRETPIXELS"
    judge_rubric(revision, {"chart.png": png}, "", endpoint=judge)
    prompt = user_prompt(scripted_upstream.requests[0])
    assert f"binary file of {len(png)} bytes, apparently a PNG image" in prompt and "SECRETPIXELS" not in prompt


def test_targets_in_a_workspace_folder_are_read_without_following_links(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP SECRET")
    rubric = [
        rule(n, target=t)
        for n, t in [
            ("a", "report.md"),
            ("b", "link.md"),
            ("c", "docs"),
            ("d", "gone.md"),
            ("e", "via/report.md"),
            ("f", "../escape.md"),
            ("g", "report.md/inner.md"),
        ]
    ]
    with Workspace.create({"report.md": b"# Report\n", "docs/a.txt": b"a", "docs/b.txt": b"b"}) as workspace:
        os.symlink(outside, workspace.root / "link.md")
        os.symlink(workspace.root, workspace.root / "via")
        targets = read_targets(rubric, workspace)
    assert (targets["report.md"].kind, targets["report.md"].text) == ("text", "# Report\n")
    assert targets["link.md"].kind == "symlink" and "TOP SECRET" not in targets["link.md"].describe()
    assert targets["docs"].kind == "folder" and "`a.txt`, `b.txt`" in targets["docs"].describe()
    assert targets["gone.md"].kind == "missing"
    assert targets["via/report.md"].kind == "other" and "`via` is a symbolic link" in targets["via/report.md"].detail
    assert targets["report.md/inner.md"].detail == "not reachable: `report.md` is a file, not a folder"
    assert targets["../escape.md"].kind == "invalid"


def test_no_judge_endpoint_is_a_clear_error(db):
    revision = make_revision([rule("Accuracy")])
    with pytest.raises(JudgingError, match="no enabled model endpoint serves the role 'judge'"):
        judge_rubric(revision, {}, "")


def test_the_first_enabled_judge_endpoint_is_picked(judge, scripted_upstream):
    ModelEndpoint.objects.create(name="generator", base_url="http://127.0.0.1:9/v1", model="g", roles=["generator"])
    ModelEndpoint.objects.create(
        name="a-off", base_url="http://127.0.0.1:9/v1", model="o", roles=["judge"], enabled=False
    )
    revision = make_revision([rule("Accuracy")])
    scripted_upstream.push(verdict(1))
    [judgement] = judge_rubric(revision, {"report.md": b"ok"}, "")
    assert judgement.judge == "judge" and judgement.score == 1.0
    judge.enabled = False
    judge.save()
    with pytest.raises(JudgingError, match="'judge' is disabled"):
        judge_rubric(revision, {}, "", endpoint=judge)


def test_a_stored_judgement_round_trips():
    judgement = Judgement(rule="r", weight=2.0, target_file="a.md", score=0.5, reason="half", model_calls=[3])
    assert Judgement.from_dict(json.loads(json.dumps(judgement.as_dict()))) == judgement
