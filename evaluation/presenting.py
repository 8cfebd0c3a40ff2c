"""Shaping a rollout for its page: the transcript as a conversation, and the workspace diff. Pure functions over
stored rows; nothing here knows about requests or templates."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tasks.diffing import MAX_DIFF_FILE_BYTES, DiffLine, diff_lines
from tasks.models import RevisionFile
from tasks.viewers import decode_text, is_binary

from .models import Rollout, RolloutFile

FOLD_LINES = 12  # longer texts are shown folded, with their first lines as the summary
FOLD_CHARS = 1200
PREVIEW_LINES = 3
MAX_TOTAL_DIFF_LINES = 6000  # over all files of one page


@dataclass
class Text:
    body: str
    folded: bool
    preview: str

    @classmethod
    def of(cls, body: str) -> Text:
        lines = body.splitlines()
        folded = len(lines) > FOLD_LINES or len(body) > FOLD_CHARS
        preview = "\n".join(lines[:PREVIEW_LINES])[:300]
        return cls(body, folded, preview + (" …" if folded else ""))


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Text
    result: Entry | None = None


@dataclass
class Entry:
    role: str  # system, user, assistant, tool
    text: Text
    reasoning: Text | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_name: str = ""
    is_error: bool = False
    error: str = ""


def conversation(transcript: list[dict]) -> list[Entry]:
    """The transcript as entries; each tool result is attached to the call it answers (shown under it), and
    kept as an entry of its own only when no call of that id came before."""
    entries: list[Entry] = []
    pending: dict[str, ToolCall] = {}
    for message in transcript:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        content = message.get("content")
        text = Text.of(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=1))
        if role == "tool":
            name, is_error = str(message.get("name") or ""), bool(message.get("is_error"))
            entry = Entry("tool", text, tool_name=name, is_error=is_error)
            call = pending.pop(str(message.get("tool_call_id", "")), None)
            if call is not None:
                entry.tool_name = entry.tool_name or call.name
                call.result = entry
                continue
            entries.append(entry)
            continue
        entry = Entry(role, text, error=str(message.get("error") or ""))
        if message.get("reasoning"):
            entry.reasoning = Text.of(str(message["reasoning"]))
        for raw in message.get("tool_calls") or []:
            if not isinstance(raw, dict):
                continue
            arguments = Text.of(show_arguments(raw.get("arguments")))
            call = ToolCall(str(raw.get("id", "")), str(raw.get("name", "")), arguments)
            entry.tool_calls.append(call)
            # Harnesses reuse ids across turns (OpenClaw numbers them per answer): the latest call owns the id.
            pending[call.id] = call
        entries.append(entry)
    return entries


def show_arguments(arguments) -> str:
    """Tool arguments as `name: value` lines; a multi-line string (a command, a file's content) keeps its line
    breaks, indented under its name, instead of showing as one JSON string full of \\n."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if not isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False, indent=1)
    lines = []
    for name, value in arguments.items():
        if isinstance(value, str) and "\n" in value.rstrip("\n"):
            lines.append(f"{name}:")
            lines.extend("  " + line for line in value.splitlines())
        elif isinstance(value, str):
            lines.append(f"{name}: {value}")
        else:
            lines.append(f"{name}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines)


@dataclass
class FileDiff:
    path: str
    change: str
    kind: str
    size: int
    lines: list[DiffLine] = field(default_factory=list)
    note: str = ""


def workspace_diff(rollout: Rollout) -> list[FileDiff]:
    """Each changed path with a unified diff against its initial contents where both sides are text."""
    initial = {f.path: f.blob for f in rollout.revision.files_by_role(RevisionFile.Role.INPUT)}
    budget = MAX_TOTAL_DIFF_LINES
    shown = []
    for entry in rollout.files.select_related("blob").exclude(kind=RolloutFile.Kind.DIR):
        item = FileDiff(entry.path, entry.change, entry.kind, entry.size)
        if entry.kind == RolloutFile.Kind.SYMLINK:
            item.note = f"symbolic link to {entry.target}"
        elif entry.kind == RolloutFile.Kind.TOO_LARGE:
            item.note = f"{entry.size} bytes: too large to keep (sha256 {entry.sha256[:16]}…)"
        elif entry.kind == RolloutFile.Kind.SPECIAL:
            item.note = entry.detail or "special file"
        elif budget <= 0:
            item.note = "diff not shown: the page's diff limit was reached (use rollout_files to get the workspace)"
        else:
            old = initial.get(entry.path)
            old_data = old.content if old is not None and entry.change != "added" else b""
            new_data = entry.blob.content if entry.blob_id else b""
            if max(len(old_data), len(new_data)) > MAX_DIFF_FILE_BYTES:
                item.note = "too large to diff here"
            elif is_binary(old_data) or is_binary(new_data):
                item.note = "binary file"
            else:
                old_text, new_text = decode_text(old_data), decode_text(new_data)
                item.lines = diff_lines(old_text, new_text, f"a/{entry.path}", f"b/{entry.path}")
                budget -= len(item.lines)
        shown.append(item)
    return shown
