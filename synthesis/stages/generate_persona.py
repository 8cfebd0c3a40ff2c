"""Task generation, persona route: (persona, subcategory, k operations) from the item's seed → one task."""

from __future__ import annotations

from ..llm_json import ask_json
from . import PROMPT_VERSIONS, messages, quoted
from .generation import TASK_RULES, TASK_SCHEMA, judge_task

STAGE = "generate"
PROMPT_VERSION = PROMPT_VERSIONS["generate_persona"]

SYSTEM = (
    "You write workspace tasks for AI agents, from a persona (who asks), a scenario (what their request is about) "
    "and the basic operations the task must exercise. " + TASK_RULES
)


def prompt(seed: dict) -> list[dict]:
    operations = "\n".join(f"- {op['name']}: {op.get('description', '')}" for op in seed["operations"])
    user = (
        f"## Persona\n{quoted('PERSONA', seed['persona']['text'])}\n\n"
        f"## Scenario\n{seed['subcategory']['category']} / {seed['subcategory']['name']}: "
        f"{seed['subcategory'].get('description', '')}\n\n"
        f"## Operations the task must need (all of them)\n{operations}\n\n"
        "Write the task as this persona would ask it."
    )
    return messages(SYSTEM, user, TASK_SCHEMA)


def run(item, ctx):
    task, call = ask_json(item, ctx.generator, STAGE, prompt(item.seed), TASK_SCHEMA)
    return judge_task(
        task, {"category": item.seed["subcategory"]["category_slug"], "subcategory": item.seed["subcategory"]["slug"]}
    )
