#!/usr/bin/env python3
"""ClawGym's builtin agent: a compact tool-calling loop over the OpenAI chat completions API.

Standalone (system python3, standard library only): it is copied read-only into the sandbox and runs there against
the real workspace, reaching the model only through the sandbox's loopback bridge to the recording proxy.

    python3 builtin_agent.py CONFIG.json

CONFIG = {"base_url": "http://127.0.0.1:18789/v1", "api_key": TOKEN, "model": ID, "instruction": TEXT,
          "workspace": DIR, "max_turns": 40, "request_timeout": 300, "tool_timeout": 120, "sampling": {...},
          "system_prompt": TEXT (optional), "few_shot": true (optional: FEW_SHOT opens the conversation),
          "output": PATH}

Tools: read, write, edit, ls (confined to the workspace) and exec (a shell command in the workspace, with a
timeout). One model call per turn; the run ends when the model answers without a tool call (completed), after
max_turns calls (max_turns), or when the model cannot be reached (error). The output file holds
{exit_reason, detail, final_message, turns, tool_calls, tools_used, usage, messages}, written after every turn, so
a run killed at its deadline still leaves its transcript so far.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

MAX_TOOL_OUTPUT = 20_000  # characters of a tool result given back to the model
MAX_READ_LINES = 2000
RETRIES = 2  # more attempts for a model call that failed with 429, 5xx or a broken connection
RETRY_PAUSE = 2.0

SYSTEM_PROMPT = (
    "You are an agent working on the user's files in the workspace folder {workspace}. "
    "Use the tools to look at the files, change them and run commands. Relative paths are relative to the "
    "workspace. When the task is done, answer with a short summary and no tool call."
)

# One worked example (config "few_shot"): a request, the tool call that answers it, the tool's result and the closing
# answer, as the chat template renders any conversation. It shows the format only: it reads a file and writes none,
# so it teaches no task of the curriculum or a benchmark.
FEW_SHOT = [
    {"role": "user", "content": "What does the file welcome.md say?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "example-1",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": "welcome.md"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "example-1", "content": "Welcome to the team!"},
    {"role": "assistant", "content": "welcome.md says: Welcome to the team!"},
]


def tool(name, description, properties, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


STRING = {"type": "string"}
TOOLS = [
    tool(
        "read",
        "Read a text file. Long files: use offset (1-based line) and limit (lines).",
        {"path": STRING, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
        ["path"],
    ),
    tool(
        "write",
        "Create or overwrite a file with the given content (parent folders are created).",
        {"path": STRING, "content": STRING},
        ["path", "content"],
    ),
    tool(
        "edit",
        "Replace old_text, which must occur exactly once in the file, with new_text.",
        {"path": STRING, "old_text": STRING, "new_text": STRING},
        ["path", "old_text", "new_text"],
    ),
    tool("ls", "List a folder of the workspace (default: the workspace itself).", {"path": STRING}, []),
    tool(
        "exec",
        "Run a shell command in the workspace; returns its exit code and output.",
        {"command": STRING, "timeout": {"type": "integer", "description": "seconds"}},
        ["command"],
    ),
]


class ToolError(Exception):
    pass


class Tools:
    def __init__(self, workspace, tool_timeout):
        self.workspace = os.path.realpath(workspace)
        self.tool_timeout = tool_timeout

    def path(self, raw):
        if not isinstance(raw, str) or not raw:
            raise ToolError("path must be a non-empty string")
        full = os.path.realpath(os.path.join(self.workspace, raw))
        if full != self.workspace and not full.startswith(self.workspace + os.sep):
            raise ToolError(f"{raw} is outside the workspace {self.workspace}")
        return full

    def read(self, path, offset=1, limit=MAX_READ_LINES):
        with open(self.path(path), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
        start = max(int(offset or 1), 1) - 1
        count = max(1, min(int(limit or MAX_READ_LINES), MAX_READ_LINES))
        shown = lines[start : start + count]
        text = "\n".join(shown)
        if start + count < len(lines):
            text += f"\n[{len(lines) - start - count} more lines: read again with offset={start + count + 1}]"
        return text

    def write(self, path, content):
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        full = self.path(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(content)
        return f"wrote {len(content.encode())} bytes to {path}"

    def edit(self, path, old_text, new_text):
        full = self.path(path)
        with open(full, encoding="utf-8") as handle:
            text = handle.read()
        found = text.count(old_text) if old_text else 0
        if found != 1:
            raise ToolError(f"old_text occurs {found} times in {path}; it must occur exactly once")
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text.replace(old_text, new_text, 1))
        return f"edited {path}"

    def ls(self, path="."):
        full = self.path(path or ".")
        rows = []
        for name in sorted(os.listdir(full)):
            entry = os.path.join(full, name)
            if os.path.isdir(entry) and not os.path.islink(entry):
                rows.append(name + "/")
            else:
                rows.append(f"{name}  {os.lstat(entry).st_size} B")
        return "\n".join(rows) or "(empty)"

    def exec(self, command, timeout=None):
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        limit = min(int(timeout or self.tool_timeout), self.tool_timeout)
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                cwd=self.workspace,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=limit,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            output = (exc.output or b"").decode("utf-8", "replace")
            return f"timed out after {limit} s\n{output}"
        return f"exit code {done.returncode}\n{done.stdout.decode('utf-8', 'replace')}"

    def call(self, name, arguments):
        handlers = {"read": self.read, "write": self.write, "edit": self.edit, "ls": self.ls, "exec": self.exec}
        handler = handlers.get(name)
        if handler is None:
            return f"error: unknown tool {name!r}; the tools are read, write, edit, ls, exec"
        try:
            args = json.loads(arguments or "{}") if isinstance(arguments, str) else (arguments or {})
        except ValueError as exc:
            return f"error: the arguments are not valid JSON: {exc}"
        if not isinstance(args, dict):
            return "error: the arguments must be a JSON object"
        try:
            result = handler(**args)
        except TypeError as exc:
            return f"error: bad arguments for {name}: {exc}"
        except (ToolError, OSError, UnicodeError, ValueError) as exc:
            return f"error: {exc}"
        if len(result) > MAX_TOOL_OUTPUT:
            result = result[:MAX_TOOL_OUTPUT] + f"\n[cut: {len(result) - MAX_TOOL_OUTPUT} more characters]"
        return result


class ModelError(Exception):
    pass


def chat(config, messages):
    body = {
        "model": config["model"],
        "messages": messages,
        "tools": TOOLS,
        "tool_choice": "auto",
        **(config.get("sampling") or {}),
    }
    request = urllib.request.Request(
        config["base_url"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {config['api_key']}"},
    )
    last = ""
    for attempt in range(RETRIES + 1):
        if attempt:
            time.sleep(RETRY_PAUSE * attempt)
        try:
            with urllib.request.urlopen(request, timeout=config.get("request_timeout", 300)) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}: {exc.read()[:500].decode('utf-8', 'replace')}"
            if exc.code != 429 and exc.code < 500:
                break
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
    raise ModelError(f"the model call failed: {last}")


def run(config):
    tools = Tools(config["workspace"], int(config.get("tool_timeout", 120)))
    system = config.get("system_prompt") or SYSTEM_PROMPT.format(workspace=tools.workspace)
    example = [dict(message) for message in FEW_SHOT] if config.get("few_shot") else []
    messages = [{"role": "system", "content": system}, *example, {"role": "user", "content": config["instruction"]}]
    state = {
        "exit_reason": "running",
        "detail": "",
        "final_message": "",
        "turns": 0,
        "tool_calls": 0,
        "tools_used": {},
        "usage": {"input": 0, "output": 0},
        "messages": messages,
    }
    save(config, state)
    for _turn in range(int(config.get("max_turns", 40))):
        try:
            answer = chat(config, messages)
            message = answer["choices"][0]["message"]
        except ModelError as exc:
            state.update(exit_reason="error", detail=str(exc))
            break
        except (KeyError, IndexError, TypeError) as exc:
            state.update(exit_reason="error", detail=f"the model's answer has no message: {exc!r}")
            break
        state["turns"] += 1
        usage = answer.get("usage") or {}
        state["usage"]["input"] += usage.get("prompt_tokens") or 0
        state["usage"]["output"] += usage.get("completion_tokens") or 0
        calls = message.get("tool_calls") or []
        kept = {"role": "assistant", "content": message.get("content")}
        if calls:
            kept["tool_calls"] = calls
        messages.append(kept)
        if not calls:
            state.update(exit_reason="completed", final_message=message.get("content") or "")
            break
        for call in calls:
            function = call.get("function") or {}
            name = function.get("name", "")
            state["tool_calls"] += 1
            state["tools_used"][name] = state["tools_used"].get(name, 0) + 1
            result = tools.call(name, function.get("arguments"))
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
        save(config, state)
    else:
        state["exit_reason"] = "max_turns"
        state["detail"] = f"stopped after {config.get('max_turns', 40)} model calls without a final answer"
    save(config, state)
    return 0 if state["exit_reason"] == "completed" else 1


def save(config, state):
    # Write then rename: a run killed mid-write leaves the previous complete file, never half of one.
    partial = config["output"] + ".partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    os.replace(partial, config["output"])


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as config_file:
        sys.exit(run(json.load(config_file)))
