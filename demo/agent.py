"""The demo agents: they work a catalog task from its reference solution, one tool call a turn.

Stateless, as a model is: the conversation says which task (the instruction in its user turn, looked up among the
catalog's revisions) and how far along it is (its number of assistant turns so far). Each plays a part of
demo.plans.reference_plan (read every input file, then write what the solution changes), then says it is done:

    clawgym-demo/agent-good  the whole plan: a task whose reference solution passes its checker scores 1.0
    clawgym-demo/agent-weak  stops halfway: it writes the first half of the files the solution changes (none of a
                             solution that changes one file), so it scores less, and nothing on one-file tasks

A task without a reference solution (or not in the catalog) gets an answer saying so, with no tool call: the
rollout completes and its checker scores what it finds. Solution files that are not UTF-8 text are not written.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from llm.wire import Reply
from tasks.models import RevisionFile, TaskRevision

from .plans import reference_plan

MIN_MATCH_CHARS = 40  # a line of the user turn this long may name the task when the whole turn is not its instruction


@dataclass(frozen=True)
class Skill:
    model: str
    title: str
    share: float  # of the files the solution changes that it writes (rounded down)


GOOD = Skill("clawgym-demo/agent-good", "writes the whole reference solution", 1.0)
WEAK = Skill("clawgym-demo/agent-weak", "writes the first half of the reference solution", 0.5)
AGENTS = {skill.model: skill for skill in (GOOD, WEAK)}


def _text(content) -> str:
    """A message's text (chat content may be a list of parts)."""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def revision_for(user_text: str):
    """The newest catalog revision whose instruction is the user turn, or is in it: a harness may wrap it, and
    OpenClaw puts a timestamp before its first line and a runtime line after it. The longest lines of the turn are
    looked up whole, then by their end and by their start, so a line with the harness's words on it still finds
    the instruction; a candidate is taken only when its whole instruction is in the turn."""
    text = user_text.strip()
    found = TaskRevision.objects.filter(instruction=text).order_by("-pk").first()
    if found is not None:
        return found
    lines = sorted((line.strip() for line in text.splitlines()), key=len, reverse=True)
    for line in (line for line in lines[:3] if len(line) >= MIN_MATCH_CHARS):
        for fragment in dict.fromkeys((line, line[-MIN_MATCH_CHARS:], line[:MIN_MATCH_CHARS])):
            for revision in TaskRevision.objects.filter(instruction__contains=fragment).order_by("-pk")[:20]:
                if revision.instruction.strip() in text:
                    return revision
    return None


def plan_of(revision) -> tuple[tuple[str, str], ...] | None:
    """The revision's reference plan (JSON arguments), or None when it has no solution."""
    return _plan(revision.pk, revision.content_hash)


# By id and content: revisions never change, but an id may come again (SQLite reuses the highest one after a delete).
@functools.lru_cache(maxsize=256)
def _plan(revision_id: int, content_hash: str) -> tuple[tuple[str, str], ...] | None:
    revision = TaskRevision.objects.get(pk=revision_id)
    files = {
        role: {f.path: f.blob.content for f in revision.files_by_role(role)}
        for role in (RevisionFile.Role.INPUT, RevisionFile.Role.SOLUTION)
    }
    solution = {}
    for path, data in files[RevisionFile.Role.SOLUTION].items():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        solution[path] = data
    if not solution:
        return None
    plan = reference_plan(files[RevisionFile.Role.INPUT], solution)
    return tuple((name, json.dumps(arguments)) for name, arguments in plan)


def played(plan: tuple[tuple[str, str], ...], skill: Skill) -> list[tuple[str, str]]:
    """The part of the plan the agent plays: every read, and its share of the writes."""
    reads = [step for step in plan if step[0] != "write"]
    writes = [step for step in plan if step[0] == "write"]
    return reads + writes[: int(len(writes) * skill.share)]


def reply(body: dict, skill: Skill) -> Reply:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    user_text = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
    revision = revision_for(user_text)
    plan = plan_of(revision) if revision is not None else None
    if plan is None:
        return Reply.text(
            "I am a ClawGym demo agent: I can only work tasks of the catalog that have a reference solution, and "
            "this is not one of them. I stop here."
        )
    steps = played(plan, skill)
    done = sum(1 for m in messages if m.get("role") == "assistant")
    if done < len(steps):
        name, arguments = steps[done]
        return Reply.tool_call(name, arguments)
    written = sum(1 for name, _ in steps if name == "write")
    left = sum(1 for name, _ in plan if name == "write") - written
    if left:
        return Reply.text(f"Done (demo agent): I wrote {written} file(s) and left {left} undone.")
    return Reply.text(f"Done (demo agent): I wrote the {written} file(s) the task needs.")
