"""The moves lazy agents make (tasks.lazy_workspaces) in a sanity check: stubs, deleted, emptied and copied inputs,
a final message claiming success, a workspace the judge model writes; the highest score with the workspace that
earned it; every run's stdout and stderr on the report."""

import json

from llm.models import ModelCall
from llm.testing import Reply
from tasks.lazy_workspaces import CLAIM_MESSAGE, LLM_PURPOSE, plan, stub
from tasks.models import SanityReport
from tasks.sanity import check_revision
from tasks.testing import make_sanity_task

# The published task's shape: the checker pays for output files being there and agreeing with each other, and its
# expectations come from the inputs, so a workspace with the inputs deleted, a header-only CSV and a summary of 0
# agrees with itself.
SELF_CONSISTENT_CHECK = r"""
import csv, json, os, re
W = os.environ.get("CLAWGYM_WORKSPACE", ".")
def read(path):
    try:
        return open(path, encoding="utf-8").read()
    except OSError:
        return None
expected = 0
try:
    expected = sum(1 for row in csv.DictReader(open("orders.csv")) if row["status"] == "late")
except Exception:
    pass  # swallowed: a missing input becomes an expectation of 0
print("expected late orders:", expected, file=__import__("sys").stderr)
rows = None
text = read("late/late_orders.csv")
if text is not None:
    rows = list(csv.DictReader(text.splitlines()))
summary = read("late/summary.txt") or ""
found = re.search(r"\d+", summary)
scores = {
    "csv_written": float(rows is not None),
    "csv_has_columns": float(text is not None and text.splitlines()[:1] == ["order_id,customer,days_late"]),
    "rows_match_inputs": float(rows is not None and len(rows) == expected),
    "summary_count_matches": float(found is not None and int(found.group()) == expected),
}
print(json.dumps(scores))
"""
INSTRUCTION = (
    "Find the late orders in orders.csv. Write late/late_orders.csv with the columns order_id,customer,days_late and "
    "write the number of late orders to late/summary.txt."
)
ORDERS = {"orders.csv": b"order_id,customer,status\n1,ann,late\n2,bo,ok\n3,cy,late\n"}
SOLUTION = {
    "late/late_orders.csv": b"order_id,customer,days_late\n1,ann,3\n3,cy,5\n",
    "late/summary.txt": b"2\n",
}
# Pays only for the agent saying it is done.
CLAIM_CHECK = r"""
import json, os
payload = json.load(open(os.environ["OPENCLAW_REWARD_PAYLOAD"]))
print(json.dumps({"reported_done": float("done" in payload["final_message"].lower()), "work": 0.0}))
"""


def test_stubs_of_every_named_output_and_a_count_of_zero():
    header = {"a.csv": "id,name"}.get
    assert stub("a.csv", "id,name") == b"id,name\n"
    assert stub("x.json", "") == b"{}\n" and stub("x.json", "", json_list=True) == b"[]\n"
    assert stub("s.txt", "") == b"0\n" and b"0" in stub("s.md", "") and stub("c.yaml", "") == b"total: 0\n"
    assert stub("x.py", "") == b""
    inputs = {"in.csv": b"id,name\n1,a\n", "notes.txt": b"hello\n"}
    lazy = plan(inputs, ["a.csv", "out.json"], {**inputs, "a.csv": b"id,name\n", "out.json": b"{}\n"}, header)
    assert list(lazy.workspaces) == [
        "empty",
        "initial",
        "scaffold",
        "inputs_emptied",
        "stubs_list",
        "stubs_only",
        "inputs_copied",
        "claim",
    ]
    assert lazy.not_run == {
        "stubs": "the same workspace as scaffold",
        "llm": "no model-written workspace was asked for",
    }
    assert lazy.workspaces["inputs_emptied"] == {"in.csv": b"", "notes.txt": b""}
    assert lazy.workspaces["stubs_only"] == {"a.csv": b"id,name\n", "out.json": b"{}\n"}
    assert lazy.workspaces["stubs_list"]["out.json"] == b"[]\n"
    # A copy of the input of the same extension, else the first input.
    assert lazy.workspaces["inputs_copied"]["a.csv"] == inputs["in.csv"]
    assert lazy.workspaces["inputs_copied"]["out.json"] == inputs["in.csv"]
    assert lazy.messages == {"claim": CLAIM_MESSAGE}
    nothing_named = plan(inputs, [], dict(inputs), header)
    assert list(nothing_named.workspaces) == ["empty", "initial", "scaffold", "inputs_emptied", "claim"]
    assert nothing_named.not_run["stubs"] == "the instruction names no output file"


def test_a_move_that_does_the_task_is_not_a_lazy_one():
    # A copy task: copying the input to the output named is its solution, so a checker paying that is right.
    inputs = {"notes.txt": b"buy milk\n"}
    solved = {**inputs, "backup/notes.txt": b"buy milk\n"}
    scaffold = {**inputs, "backup/notes.txt": b"0\n"}
    lazy = plan(inputs, ["backup/notes.txt"], scaffold, lambda path: "", solved=solved)
    assert "inputs_copied" not in lazy.workspaces
    assert lazy.not_run["inputs_copied"] == "the reference solution's own workspace: that move is the task's work"
    # Without a solution to compare with, the move runs.
    assert "inputs_copied" in plan(inputs, ["backup/notes.txt"], scaffold, lambda path: "").workspaces


def test_deleted_inputs_and_header_only_stubs_earn_full_marks_and_the_report_says_where(db, bwrap):
    task = make_sanity_task(
        "late-orders", SELF_CONSISTENT_CHECK, instruction=INSTRUCTION, inputs=ORDERS, solution=SOLUTION
    )
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.solvable is True and not report.crashed
    # The three base workspaces under-count: with the inputs there, 2 late orders are expected and the stubs have 0.
    assert report.lazy_scores["scaffold"] == 0.5 and report.lazy_scores["stubs"] == 0.5
    assert report.lazy_scores["stubs_only"] == 1.0 and report.lazy_score == 1.0 and report.over_lenient
    assert report.lazy_best == "stubs_only"
    assert report.lazy_best_run == {
        "workspace": "stubs_only",
        "score": 1.0,
        "paying_checks": {
            "csv_written": 1.0,
            "csv_has_columns": 1.0,
            "rows_match_inputs": 1.0,
            "summary_count_matches": 1.0,
        },
        "description": "the inputs deleted and a stub of each named output",
        "files": [{"path": "late/late_orders.csv", "size": 28}, {"path": "late/summary.txt", "size": 2}],
        "final_message": "",
    }
    assert "over-lenient: a lazy agent earns 1 on the stubs_only workspace" in " ".join(report.problems)
    # Every run keeps its stdout and stderr, clean ones too: the swallowed exception's expectation of 0 shows.
    for kind, run in report.runs.items():
        assert "stdout" in run and "stderr" in run, kind
    assert "expected late orders: 0" in report.runs["stubs_only"]["stderr"]
    assert "expected late orders: 2" in report.runs["initial"]["stderr"]
    assert '"csv_written": 1.0' in report.runs["stubs_only"]["stdout"]
    assert "expected late orders: 2" in report.solution_run["stderr"]
    assert report.as_dict()["lazy_best"]["workspace"] == "stubs_only"
    assert set(report.as_dict()["lazy_workspaces"]) == set(report.runs)


def test_a_checker_paying_for_a_final_message_claiming_success(db, bwrap):
    task = make_sanity_task(
        "says-done", CLAIM_CHECK, instruction="Write out.txt.", inputs={"in.txt": b"x\n"}, solution=None
    )
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.lazy_scores["initial"] == 0.0 and report.lazy_scores["claim"] == 0.5
    assert report.lazy_best == "claim" and report.lazy_best_run["paying_checks"] == {"reported_done": 1.0}
    assert report.lazy_workspaces["claim"]["final_message"] == CLAIM_MESSAGE
    assert report.lazy_best_run["files"] == [{"path": "in.txt", "size": 2}, {"path": "out.txt", "size": 2}]


def test_a_lazy_workspace_the_judge_model_writes(db, bwrap, judge, scripted_upstream):
    task = make_sanity_task(
        "late-orders-llm", SELF_CONSISTENT_CHECK, instruction=INSTRUCTION, inputs=ORDERS, solution=None
    )
    answer = {
        "files": [
            {"path": "late/late_orders.csv", "content": "order_id,customer,days_late\n"},
            {"path": "late/summary.txt", "content": "0 late orders\n"},
            {"path": "reward/check.py", "content": "print('{}')"},  # the checker's own folder: dropped
            {"path": "../outside.txt", "content": "x"},  # outside the workspace: dropped
        ],
        "delete": ["orders.csv"],
        "final_message": "All late orders are listed.",
    }
    scripted_upstream.push(Reply.text(json.dumps(answer)))
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.lazy_scores["llm"] == 1.0 and "llm" not in report.moves_not_run
    assert report.lazy_workspaces["llm"] == {
        "description": "a lazy workspace written by the judge model",
        "files": [{"path": "late/late_orders.csv", "size": 28}, {"path": "late/summary.txt", "size": 14}],
        "final_message": "All late orders are listed.",
    }
    (call,) = ModelCall.objects.filter(purpose=LLM_PURPOSE)
    assert call.endpoint_name == "judge" and call.subject == f"revision:{task.current_revision_id}"
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert INSTRUCTION in prompt and "### orders.csv" in prompt and "late/late_orders.csv" in prompt


def test_a_judge_answer_that_is_no_workspace_is_not_run_and_says_why(db, bwrap, judge, scripted_upstream, settings):
    task = make_sanity_task(
        "late-orders-bad-llm", SELF_CONSISTENT_CHECK, instruction=INSTRUCTION, inputs=ORDERS, solution=None
    )
    scripted_upstream.push(Reply.text("I will not play along."), Reply.text('{"files": "nope"}'))
    report = check_revision(task.current_revision, backend=bwrap)
    assert "llm" not in report.runs
    assert report.moves_not_run["llm"].startswith("the judge endpoint 'judge' gave no lazy workspace")
    settings.CLAWGYM_SANITY_LLM_LAZY = False
    report = check_revision(task.current_revision, backend=bwrap)
    assert report.moves_not_run["llm"] == "CLAWGYM_SANITY_LLM_LAZY is off"
    assert ModelCall.objects.filter(purpose=LLM_PURPOSE).count() == 2  # the bad answer and its one repair
    assert SanityReport.objects.count() == 2


def test_the_task_page_and_api_show_where_a_lazy_agent_earns_most(db, bwrap, admin_client):
    task = make_sanity_task(
        "late-orders-page", SELF_CONSISTENT_CHECK, instruction=INSTRUCTION, inputs=ORDERS, solution=None
    )
    check_revision(task.current_revision, backend=bwrap)
    page = admin_client.get(f"/tasks/{task.external_id}/").content.decode()
    assert 'data-testid="sanity-lazy-best"' in page and "<strong>stubs_only</strong>" in page
    assert "<code>late/late_orders.csv</code>" in page and "expected late orders: 0" in page  # the run's stderr
    sanity = admin_client.get(f"/api/tasks/{task.external_id}/revisions/1/").json()["sanity"]
    assert sanity["lazy_best"]["workspace"] == "stubs_only" and sanity["lazy_best"]["score"] == 1.0
    assert "llm" in sanity["moves_not_run"] and set(sanity["lazy_workspaces"]) == set(sanity["runs"])
    assert "expected late orders: 2" in sanity["runs"]["initial"]["stderr"] and sanity["runs"]["initial"]["stdout"]
