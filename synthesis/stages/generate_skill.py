"""Task generation, skill route: one main skill and up to three supporting ones (the item's seed) → one task.

The prompt shows each skill's annotation (summary, core content, input and output formats): the skills' own files
stay out of the prompt, the annotation already says what they teach.
"""

from __future__ import annotations

from ..llm_json import ask_json
from ..models import Skill
from . import PROMPT_VERSIONS, messages, quoted
from .generation import TASK_RULES, TASK_SCHEMA, judge_task

STAGE = "generate"
PROMPT_VERSION = PROMPT_VERSIONS["generate_skill"]

SYSTEM = (
    "You write workspace tasks for AI agents that have skills (instructions for a kind of work). The task must "
    "need the main skill, and may use the supporting skills where they fit naturally. " + TASK_RULES
)


def _skill_text(skill: Skill) -> str:
    annotation = skill.latest_annotation()
    if annotation is None:
        return f"{skill.name}: {skill.description}"
    return (
        f"{skill.name}: {annotation.summary}\nCore content: {annotation.core_content}\n"
        f"Input format: {annotation.input_format}\nOutput format: {annotation.output_format}"
    )


def prompt(seed: dict) -> list[dict]:
    skills = {
        s.pk: s for s in Skill.objects.filter(pk__in=[seed["main"]["id"], *(s["id"] for s in seed["supporting"])])
    }
    main = quoted("MAIN SKILL", _skill_text(skills[seed["main"]["id"]]))
    supporting = "\n\n".join(
        quoted("SUPPORTING SKILL", _skill_text(skills[s["id"]])) for s in seed["supporting"] if s["id"] in skills
    )
    user = f"## Main skill\n{main}\n\n## Supporting skills\n{supporting or '(none)'}\n\nWrite one task."
    return messages(SYSTEM, user, TASK_SCHEMA)


def run(item, ctx):
    task, call = ask_json(item, ctx.generator, STAGE, prompt(item.seed), TASK_SCHEMA)
    return judge_task(task, {"skills": [item.seed["main"]["name"], *(s["name"] for s in item.seed["supporting"])]})
