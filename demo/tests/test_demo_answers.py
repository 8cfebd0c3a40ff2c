"""The demo models' answers, asked with ClawGym's own prompts (no HTTP): each matches the schema its caller checks it
against and passes the caller's own checks; the demo agents play the reference solution (the good one whole, the
weak one half of its writes)."""

import json
from pathlib import Path

import pytest

from demo import server
from demo.agent import GOOD, WEAK
from demo.kinds import KINDS
from llm import jsonout
from review.diagnosis import DIAGNOSIS_SCHEMA
from review.diagnosis import SYSTEM_PROMPT as DIAGNOSIS_PROMPT
from synthesis.annotation import ANNOTATION_SCHEMA
from synthesis.annotation import SYSTEM_PROMPT as ANNOTATION_PROMPT
from synthesis.qa_checks import JUDGED, QATask, messages_for
from synthesis.qa_prompts import SCHEMAS
from synthesis.stages import files, generate_persona, rubric, verify
from synthesis.stages.generation import TASK_SCHEMA, judge_task, normalized
from tasks.categorizing import answer_schema, categorize_messages
from tasks.importing import import_path
from tasks.judging import TargetFile, judge_messages, verdict_schema
from tasks.models import BenchmarkCategory, TaskRevision
from tasks.package import validate_rubric

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def ask(model: str, messages: list[dict], schema: dict, purpose: str = "") -> dict:
    """The demo model's answer, asked as ClawGym's client asks (`purpose`: the call's, which it sends along)."""
    reply = server.answer({"model": model, "messages": messages}, purpose)
    assert not reply.tool_calls
    return jsonout.parse_answer(reply.content, schema)


def seed(n: int) -> dict:
    return {
        "persona": {"text": f"A bookkeeper at a bakery, number {n}"},
        "subcategory": {
            "category": "Data",
            "name": "Aggregation",
            "description": "Totals of tables",
            "category_slug": "data",
            "slug": "aggregation",
        },
        "operations": [{"name": "read a CSV file", "description": "parse rows"}],
    }


def draft_of(kind) -> dict:
    return {**normalized(kind.task()), "files": kind.input_texts(), "checker": {"check.py": kind.check_py()}}


def test_the_generate_answer_is_a_task_the_stage_passes_and_seeds_spread_over_the_kinds():
    picked = set()
    for n in range(12):
        task = ask(server.GENERATOR, generate_persona.prompt(seed(n)), TASK_SCHEMA, "synthesis:generate")
        assert judge_task(task).verdict == "pass", judge_task(task).reason
        picked.add(task["output_files"][0])
    assert len(picked) >= 5
    # The same seed, the same task: a resumed batch is asked the same and answered the same.
    assert ask(server.GENERATOR, generate_persona.prompt(seed(0)), TASK_SCHEMA, "synthesis:generate") == ask(
        server.GENERATOR, generate_persona.prompt(seed(0)), TASK_SCHEMA, "synthesis:generate"
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.key)
def test_files_verify_and_rubric_answers_match_their_schemas_and_checks(kind):
    draft = draft_of(kind)
    answer = ask(server.GENERATOR, files.prompt(draft), files.SCHEMA, "synthesis:files")
    written, problems = files.file_problems(draft, answer)
    assert not problems and written == kind.input_texts()

    answer = ask(server.GENERATOR, verify.prompt(draft), verify.SCHEMA, "synthesis:verify")
    solution = {f["path"]: f["content"].encode() for f in answer["solution_files"]}
    assert not verify.static_problems(answer["check_py"], solution)
    assert set(solution) == set(draft["output_files"])

    answer = ask(server.GENERATOR, rubric.prompt(draft), rubric.SCHEMA, "synthesis:rubric")
    assert answer["needed"] == bool(kind.rubric)
    if answer["needed"]:
        assert [r["target_file"] for r in validate_rubric(answer["rules"])] == draft["output_files"]


@pytest.mark.parametrize("stage", JUDGED)
def test_every_judged_qa_stage_gets_an_answer_of_its_schema(stage):
    kind = KINDS[0]
    task = QATask(
        instruction=kind.question,
        input_files={p: t.encode() for p, t in kind.input_texts().items()},
        checker_files={"check.py": kind.check_py().encode()},
        rubric=kind.rubric,
        category=None,
        subcategory=None,
    )
    answer = ask(server.JUDGE, messages_for(stage, task), SCHEMAS[stage], f"qa:{stage}")
    assert "demo judge" in answer["reason"]


RULE = {
    "name": "clear",
    "target_file": "notes.md",
    "weight": 1,
    "scores": {"0": "none", "0.25": "poor", "0.5": "fair", "0.75": "good", "1": "clear"},
}


def test_rubric_judging_pays_the_top_level_for_text_and_the_lowest_for_nothing():
    text = TargetFile("notes.md", "text", text="- ana: call the bank\n", size=21)
    verdict = ask(server.JUDGE, judge_messages("Write notes.md", RULE, text, "Done."), verdict_schema(RULE))
    assert verdict["score"] == 1.0
    missing = TargetFile("notes.md", "missing")
    verdict = ask(server.JUDGE, judge_messages("Write notes.md", RULE, missing, "Done."), verdict_schema(RULE))
    assert verdict["score"] == 0.0


def test_categorizing_annotating_and_diagnosing_get_answers_of_their_schemas(db):
    import_path(EXAMPLES / "fix-proration-bug")
    revision = TaskRevision.objects.get(task__external_id="fix-proration-bug")
    categories = list(BenchmarkCategory.objects.order_by("slug"))
    assert categories  # the taxonomy the migrations load
    answer = ask(server.JUDGE, categorize_messages(revision, categories), answer_schema(categories))
    assert answer["category"] in {c.slug for c in categories}

    annotate = [{"role": "system", "content": ANNOTATION_PROMPT}, {"role": "user", "content": "## Skill: csv-tools"}]
    assert ask(server.JUDGE, annotate, ANNOTATION_SCHEMA)["text_only_compatible"] is True
    diagnose = [{"role": "system", "content": DIAGNOSIS_PROMPT}, {"role": "user", "content": "## The task"}]
    assert ask(server.JUDGE, diagnose, DIAGNOSIS_SCHEMA)["issues"] == []


def play(model: str, instruction: str) -> tuple[list[str], str]:
    """A builtin-harness conversation with a demo agent: the tools it called, and its last words."""
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": instruction}]
    tools = [{"type": "function", "function": {"name": name}} for name in ("read", "write")]
    called = []
    for _turn in range(50):
        reply = server.answer({"model": model, "messages": messages, "tools": tools})
        if not reply.tool_calls:
            return called, reply.content
        [call] = reply.tool_calls
        called.append(f"{call['name']} {json.loads(call['arguments'])['path']}")
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": call}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ]
    raise AssertionError("the demo agent never stopped")


def test_the_good_agent_writes_the_whole_solution_and_the_weak_one_half_of_it(db):
    import_path(EXAMPLES / "meeting-notes-action-items")
    revision = TaskRevision.objects.get(task__external_id="meeting-notes-action-items")
    inputs = sorted(revision.files_by_role("input").values_list("path", flat=True))
    solution = sorted(revision.files_by_role("solution").values_list("path", flat=True))
    assert len(solution) == 2

    called, last = play(GOOD.model, revision.instruction)
    assert called == [f"read {p}" for p in inputs] + [f"write {p}" for p in solution]
    assert last.startswith("Done (demo agent)")
    called, last = play(WEAK.model, revision.instruction)
    assert called == [f"read {p}" for p in inputs] + [f"write {solution[0]}"]
    assert "left 1 undone" in last
    # A task it has no solution for: it says so and stops, with no tool call.
    called, last = play(GOOD.model, "Please tidy up my inbox folder and file every message by sender.")
    assert called == [] and last.startswith("I am a ClawGym demo agent")


def test_the_good_agent_finds_a_one_line_instruction_in_openclaws_user_turn(db):
    # OpenClaw's first user turn as the proxy recorded it: a timestamp on the instruction's line, a runtime line
    # after it. The instruction's only line is then never a line of the turn.
    import_path(EXAMPLES / "fix-proration-bug")
    revision = TaskRevision.objects.get(task__external_id="fix-proration-bug")
    assert "\n" not in revision.instruction.strip()
    turn = (
        f"[Sat 2026-12-05 19:12 UTC] {revision.instruction}\n\n"
        "Runtime: agent=main | host=sandbox | model=clawgym/clawgym-demo/agent-good"
    )
    called, _ = play(GOOD.model, turn)
    assert called and called[-1].startswith("write ")
    # A turn that holds only part of an instruction is not that task.
    called, last = play(GOOD.model, f"[Sat 2026-12-05 19:12 UTC] {revision.instruction[:-40]}")
    assert called == [] and last.startswith("I am a ClawGym demo agent")


def test_anything_else_gets_a_sentence_saying_what_the_demo_models_are():
    reply = server.answer({"model": server.JUDGE, "messages": [{"role": "user", "content": "Reply with: pong"}]})
    assert reply.content.startswith("I am a ClawGym demo model (clawgym-demo/judge)")


def test_the_judge_writes_the_sanity_checks_lazy_workspace():
    from tasks.lazy_workspaces import LLM_PURPOSE, LLM_SCHEMA, llm_messages

    answer = ask(
        server.JUDGE, llm_messages("Write totals.md.", {"sales.csv": b"a,b\n"}, ["totals.md"]), LLM_SCHEMA, LLM_PURPOSE
    )
    assert answer["files"] == [] and answer["final_message"]
