"""The demo generator: the answer of each synthesis stage that asks the generator, valid for its schema.

    generate  one of demo.kinds.KINDS, picked by the seed (a hash of the prompt: the same seed, the same kind), as
              synthesis.stages.generation.TASK_SCHEMA
    files     the kind's input files (synthesis.stages.files.SCHEMA)
    verify    its checker and reference solution (synthesis.stages.verify.SCHEMA): sane and solvable in round one
    rubric    its rubric rules when it has any, else needed=false (synthesis.stages.rubric.SCHEMA)

Later stages find the kind by the output file its instruction names (demo.kinds.kind_in). A batch of more items
than there are kinds draws some kind twice: the novelty check rejects the second as a near-duplicate, as it
should, and so do later batches for kinds already in the catalog.
"""

from __future__ import annotations

import hashlib

from .kinds import KINDS, kind_in


def _user_text(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")


def answer(stage: str, messages: list[dict]) -> dict | None:
    """The stage's answer, or None for a stage (or a task) the demo generator does not know."""
    text = _user_text(messages)
    if stage == "generate":
        first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        return KINDS[int(hashlib.sha256(first.encode()).hexdigest(), 16) % len(KINDS)].task()
    kind = kind_in(text)
    if kind is None:
        return None
    if stage == "files":
        return {"files": [{"path": path, "content": content} for path, content in kind.input_texts().items()]}
    if stage == "verify":
        solution = [{"path": path, "content": content} for path, content in kind.solution().items()]
        return {"check_py": kind.check_py(), "solution_files": solution}
    if stage == "rubric":
        if not kind.rubric:
            return {"needed": False, "reason": "The checker verifies every requirement of the task.", "rules": []}
        return {
            "needed": True,
            "reason": "How clearly the result is worded is for a judge to read.",
            "rules": kind.rubric,
        }
    return None
