"""A rollout as the scanners read it (RolloutView), from what was recorded: the transcript the proxy's record gives
(Rollout.transcript, evaluation.proxy_record), the model calls of the rollout's proxy session (which call answered
which assistant turn, which calls failed), the final workspace's changed files (RolloutFile) and the checker's
results. Never the agent's own account (Rollout.agent_account)."""

from __future__ import annotations

import json

from llm.models import ModelCall
from tasks.verification import REWARD_DIR

from ..models import Rollout
from ..proxy_record import transcript_entry
from ..trajectories import _reply
from .base import RolloutView, WorkspaceFile

HEAD_BYTES = 2048  # of each changed file: enough to tell an empty or placeholder file, never a whole large one


def rollout_view(rollout: Rollout) -> RolloutView:
    """The view of one rollout (its latest attempt)."""
    transcript = [m for m in (rollout.transcript or []) if isinstance(m, dict)]
    calls = (
        # Their answers and errors only: what each request held is in the transcript already.
        list(
            ModelCall.objects.filter(session_id=rollout.proxy_session_id)
            .only("id", "response", "error", "created_at")
            .order_by("created_at", "id")
        )
        if rollout.proxy_session_id
        else []
    )
    revision = rollout.revision
    return RolloutView(
        rollout=rollout.pk,
        task=revision.task.external_id,
        model=rollout.endpoint.name,
        instruction=revision.instruction,
        transcript=transcript,
        answered_by=answered_by(transcript, calls),
        final_message=rollout.final_message,
        status=rollout.status,
        exit_reason=rollout.exit_reason,
        error=rollout.error,
        score=rollout.score,
        code_score=rollout.code_score,
        sub_scores=rollout.sub_scores if isinstance(rollout.sub_scores, dict) else {},
        check_status=rollout.check_status,
        files=workspace_files(rollout),
        reward_paths=[f"{REWARD_DIR}/{f.path}" for f in revision.files.filter(role="reward").order_by("path")],
        failed_calls=[{"id": c.pk, "error": c.error} for c in calls if c.error],
    )


def answered_by(transcript: list[dict], calls: list[ModelCall]) -> list[int | None]:
    """For each transcript message, the id of the recorded call whose answer it is (assistant turns), else None.
    Matched in order by what the answer says (text and tool calls), as the transcript was rebuilt from them."""
    answers = []
    for call in calls:
        reply = _reply(call.response) if not call.error else None
        if reply is not None:
            answers.append((call.pk, _answer_key(transcript_entry(reply))))
    matched: list[int | None] = []
    start = 0
    for message in transcript:
        found = None
        if message.get("role") == "assistant":
            key = _answer_key(message)
            for position in range(start, len(answers)):
                if answers[position][1] == key:
                    found, start = answers[position][0], position + 1
                    break
        matched.append(found)
    return matched


def _answer_key(entry: dict) -> str:
    calls = [[c.get("name"), c.get("arguments")] for c in entry.get("tool_calls") or []]
    return json.dumps([str(entry.get("content") or "").strip(), calls], sort_keys=True, default=str)


def workspace_files(rollout: Rollout) -> list[WorkspaceFile]:
    files = []
    for row in rollout.files.select_related("blob").order_by("path"):
        head = bytes(row.blob.data[:HEAD_BYTES]) if row.blob_id and row.kind == "file" else b""
        files.append(WorkspaceFile(path=row.path, change=row.change, kind=row.kind, size=row.size, head=head))
    return files
