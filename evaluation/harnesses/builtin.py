"""ClawGym's builtin agent (inside/builtin_agent.py): a compact tool-calling loop run by the sandbox's python3.

For fast tests and small-model RL. It speaks the chat completions API through the same bridge and proxy as
OpenClaw, with tools read, write, edit, ls and exec against the real workspace. Options (Rollout.harness_options):
    max_turns (default CLAWGYM_BUILTIN_MAX_TURNS), tool_timeout (s, default 120), request_timeout (s, default 300),
    system_prompt (replaces the default one), few_shot (true: the conversation opens with one worked example of a tool
    call, so that a model that has never seen the tool-call format sees it once; inside/builtin_agent.FEW_SHOT). Both
    timeouts are capped, like the rollout's (CLAWGYM_MAX_ROLLOUT_TIMEOUT).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from .base import (
    BASE_URL,
    INSIDE_DIR,
    OUT_DIR,
    RUN_DIR,
    AgentAccount,
    AgentFiles,
    AgentOutcome,
    AgentTask,
    DriverStep,
    ExitReason,
    Harness,
    HarnessUnavailable,
    memory_exhausted,
)

MAX_OUTPUT_BYTES = 64 * 1024 * 1024
KNOWN_REASONS = {ExitReason.COMPLETED, ExitReason.ERROR, ExitReason.MAX_TURNS}


class BuiltinHarness(Harness):
    name = "builtin"
    options = ("max_turns", "tool_timeout", "request_timeout", "system_prompt", "few_shot")
    durations = ("tool_timeout", "request_timeout")
    counts = ("max_turns",)
    flags = ("few_shot",)
    title = "Builtin agent loop"

    def check_available(self) -> None:
        if not Path("/usr/bin/python3").exists():
            raise HarnessUnavailable("the builtin agent needs the system python3 (/usr/bin/python3)")

    def prepare(self, task: AgentTask, run_dir: Path, workspace_path: str) -> tuple[DriverStep, list[DriverStep]]:
        if task.api_style != "chat":
            raise HarnessUnavailable(f"the builtin agent speaks the chat completions API only, not {task.api_style!r}")
        options = task.options
        config = {
            "base_url": BASE_URL,
            "api_key": task.api_key,
            "model": task.model,
            "instruction": task.instruction,
            "workspace": workspace_path,
            "max_turns": int(options.get("max_turns", settings.CLAWGYM_BUILTIN_MAX_TURNS)),
            "tool_timeout": int(options.get("tool_timeout", 120)),
            "request_timeout": int(options.get("request_timeout", 300)),
            "sampling": task.sampling,
            "output": f"{OUT_DIR}/agent.json",
        }
        if options.get("system_prompt"):
            config["system_prompt"] = str(options["system_prompt"])
        if options.get("few_shot"):
            config["few_shot"] = True
        (run_dir / "agent.json").write_text(json.dumps(config))
        agent = DriverStep(
            ["/usr/bin/python3", f"{INSIDE_DIR}/builtin_agent.py", f"{RUN_DIR}/agent.json"],
            task.timeout,
            f"{OUT_DIR}/agent.out",
            f"{OUT_DIR}/agent.log",
            cwd=workspace_path,
        )
        return agent, []

    def collect(self, task: AgentTask, files: AgentFiles, agent: dict) -> AgentOutcome:
        log = files.tail("agent.log")
        state = files.json("agent.json", MAX_OUTPUT_BYTES)
        state = state if isinstance(state, dict) else {}
        # The agent's word on how it ended counts only for what it cannot change: the score (the checker judges
        # the workspace) and the infrastructure verdict (the proxy's record) do not depend on it.
        reason, detail = state.get("exit_reason"), ""
        if agent.get("timed_out"):
            reason, detail = ExitReason.TIMEOUT, f"stopped at its deadline of {task.timeout} s"
        elif agent.get("signal") or (agent.get("returncode") or 0) > 128 or reason not in KNOWN_REASONS:
            if memory_exhausted(log):
                reason, detail = ExitReason.OOM, "the agent ran out of memory"
            else:
                # Its last words are in its log (Rollout.log_tail), which is its own.
                reason, detail = ExitReason.CRASHED, f"the agent died (exit {agent.get('returncode')})"
        elif reason == ExitReason.ERROR:
            detail = "the agent stopped on an error"
        elif reason == ExitReason.MAX_TURNS:
            turns = int(task.options.get("max_turns", settings.CLAWGYM_BUILTIN_MAX_TURNS))
            detail = f"the agent used its {turns} turns without a final answer"
        messages = state.get("messages") if isinstance(state.get("messages"), list) else []
        used = state.get("tools_used") if isinstance(state.get("tools_used"), dict) else {}
        account = AgentAccount(
            exit_reason=str(state.get("exit_reason") or "")[:40],
            detail=str(state.get("detail") or "")[:2000],
            final_message=str(state.get("final_message") or ""),
            turns=state.get("turns") if isinstance(state.get("turns"), int) else None,
            tool_calls=state.get("tool_calls") if isinstance(state.get("tool_calls"), int) else None,
            tools_used={str(k): v for k, v in used.items() if isinstance(v, int)},
            transcript=[normalise(m) for m in messages if isinstance(m, dict)],
        )
        usage = state.get("usage") if isinstance(state.get("usage"), dict) else {}
        return AgentOutcome(exit_reason=reason, detail=detail, account=account, usage=usage, log_tail=log)


def normalise(message: dict) -> dict:
    """An OpenAI chat message as a transcript entry (see AgentOutcome.transcript)."""
    out = {"role": str(message.get("role", "")), "content": message.get("content") or ""}
    if not isinstance(out["content"], str):
        out["content"] = json.dumps(out["content"])
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # kept as the model wrote it
        calls.append({"id": call.get("id", ""), "name": function.get("name", ""), "arguments": arguments})
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    if out["role"] == "tool":
        out["is_error"] = out["content"].startswith("error:")
    return out
