"""Each demo model answers only its own kind of request (issue 34, item 3): the weak demo agent's endpoint, asked
without tools for a synthesis stage, was answered as the generator is, with the task's checker and reference solution
in full. The demo server, on loopback, routes by the model a request names, and within the generator and the judge by
the purpose ClawGym's client sends (a header the proxy never passes on), never by text in the prompt."""

import json

import httpx
import pytest

from demo import server
from demo.agent import GOOD, WEAK
from demo.kinds import KINDS
from llm.models import served_key
from llm.wire import PURPOSE_HEADER
from synthesis.qa_checks import QATask, messages_for
from synthesis.stages import verify
from synthesis.stages.generation import normalized

KIND = KINDS[0]
DRAFT = {**normalized(KIND.task()), "files": KIND.input_texts(), "checker": {"check.py": KIND.check_py()}}


def ask(base_url: str, model: str, messages: list[dict], purpose: str = "", **extra) -> str:
    headers = {"Authorization": f"Bearer {served_key(server.KEY_ENV)}"}
    if purpose:
        headers[PURPOSE_HEADER] = purpose
    response = httpx.post(
        f"{base_url}/chat/completions",
        json={"model": model, "messages": messages, **extra},
        headers=headers,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"] or ""


def reveals_the_solution(text: str) -> bool:
    return KIND.check_py() in json.dumps(text) or any(
        content.strip() in text for content in KIND.solution().values() if content.strip()
    )


def test_the_generator_alone_answers_a_stage_with_the_checker_and_solution(demo_server):
    stage = verify.prompt(DRAFT)
    answered = json.loads(ask(demo_server, server.GENERATOR, stage, "synthesis:verify"))
    assert answered["check_py"] == KIND.check_py()  # what the generator is for: the test below would see it
    # Without its purpose the same prompt is nobody's request: the prompt alone names no stage.
    assert ask(demo_server, server.GENERATOR, stage).startswith("I am a ClawGym demo model")
    for model in (WEAK.model, GOOD.model, server.JUDGE):
        text = ask(demo_server, model, stage, "synthesis:verify")
        assert not reveals_the_solution(text) and "check_py" not in text, model
        assert text.startswith(f"I am a ClawGym demo model ({model})")


@pytest.mark.parametrize("tools", [None, []])
def test_an_agent_model_without_tools_gets_no_judging_or_generating_answer(demo_server, tools):
    qa = messages_for("difficulty", QATask(KIND.question, {}, {}, [], None, None))
    extra = {} if tools is None else {"tools": tools}
    for messages, purpose in ((verify.prompt(DRAFT), "synthesis:verify"), (qa, "qa:difficulty")):
        text = ask(demo_server, WEAK.model, messages, purpose, **extra)
        assert text.startswith(f"I am a ClawGym demo model ({WEAK.model})") and "demo judge" not in text


def test_the_judge_does_not_answer_as_the_generator_nor_the_generator_as_the_judge(demo_server):
    qa = messages_for("difficulty", QATask(KIND.question, {}, {}, [], None, None))
    assert json.loads(ask(demo_server, server.JUDGE, qa, "qa:difficulty"))["level"] == KIND.difficulty
    assert ask(demo_server, server.GENERATOR, qa, "qa:difficulty").startswith("I am a ClawGym demo model")
