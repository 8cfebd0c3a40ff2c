"""What the recording proxy saw of one rollout attempt: the turns, tool calls, transcript and final message a rollout
stores, and scores with.

An agent's output files are its own account of itself (harnesses.base.AgentAccount): anything inside the sandbox can
write them. The proxy's record is not the agent's to change: each call as the proxy received it, and the answer as
the upstream gave it. So:
- turns are the calls the upstream answered, tool calls and tools used those its answers asked for;
- the transcript is the conversation of the session's latest trajectory (evaluation.trajectories: the requests as
  received, with the harness's injected blocks and auxiliary prompts taken out, ending in the recorded answer);
- the final message is that conversation's last answer, when it called no tool (the answer that ended the run).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field

from llm.models import ModelCall

from .trajectories import TrajectoryRules, _reply, rebuild_trajectories


@dataclass
class ProxyRecord:
    turns: int = 0
    tool_calls: int = 0
    tools_used: dict[str, int] = field(default_factory=dict)
    # One message a dict, in the shape of AgentAccount.transcript (what the rollout page and checkers read).
    transcript: list[dict] = field(default_factory=list)
    final_message: str = ""
    last_failure: str = ""  # the error the session's last call was recorded with, when it failed


def proxy_record(session_id: int | None) -> ProxyRecord:
    """The record of one proxy session (a rollout attempt); empty for none."""
    if session_id is None:
        return ProxyRecord()
    calls = [
        {"request": call.request, "response": call.response, "error": call.error}
        for call in ModelCall.objects.filter(session_id=session_id).order_by("created_at", "id").with_requests()
    ]
    record = ProxyRecord(last_failure=calls[-1]["error"] if calls else "")
    used: Counter[str] = Counter()
    for call in calls:
        reply = _reply(call["response"]) if not call["error"] else None
        if reply is None:
            continue
        record.turns += 1
        for tool_call in reply.get("tool_calls") or []:
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            used[str((function or {}).get("name") or "?")] += 1
    record.tool_calls, record.tools_used = sum(used.values()), dict(used)
    # Auxiliary calls (a heartbeat's answer) are never the conversation, whatever the settings keep for trajectories.
    rules = dataclasses.replace(TrajectoryRules.from_settings(), drop_auxiliary_calls=True)
    trajectories = rebuild_trajectories(calls, rules=rules)
    if trajectories:
        latest = max(trajectories, key=lambda t: t.call_indices[-1])
        record.transcript = [transcript_entry(m) for m in latest.messages]
        last = latest.messages[-1]
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            record.final_message = record.transcript[-1]["content"]
    return record


def transcript_entry(message: dict) -> dict:
    """A chat message as a transcript entry: {"role", "content" (text), "tool_calls": [{"id", "name", "arguments"}],
    "tool_call_id", "name", "reasoning"} (keys present when set)."""
    entry = {"role": str(message.get("role") or ""), "content": _text(message.get("content"))}
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        arguments = function.get("arguments", "")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # kept as the model wrote it
        calls.append({"id": str(call.get("id") or ""), "name": str(function.get("name") or ""), "arguments": arguments})
    if calls:
        entry["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if message.get(key):
            entry[key] = str(message[key])
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        entry["reasoning"] = reasoning
    return entry


def _text(content) -> str:
    """Text as it reads: a string as it is, the text of content parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
        return "\n".join(p["text"] for p in content)
    return json.dumps(content, ensure_ascii=False)
