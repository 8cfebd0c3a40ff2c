"""The scanner interface: what a scanner reads of one rollout (RolloutView, built from what the proxy and the sandbox
recorded: evaluation.scanners.view) and what it reports (Finding).

Plain data, no Django: the rule-based scanners are pure functions of a view, so their tests feed them recorded data
directly. A scanner never reads what the agent says about itself (Rollout.agent_account): only the proxy's record of
its model calls, the sandbox's final workspace and the checker's results.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

EXCERPT_CHARS = 600  # evidence kept per finding: enough to see what happened, never a whole file or transcript
SUMMARY_CHARS = 300


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` in at most `limit` characters, its start and end kept (the middle said to be left out)."""
    text = text or ""
    if len(text) <= limit:
        return text
    room = max(limit - len(f" […{len(text):,} characters left out…] "), 2)
    head, tail = text[: room * 2 // 3], text[len(text) - room // 3 :]
    return f"{head} […{len(text) - len(head) - len(tail):,} characters left out…] {tail}"


def arguments_text(arguments) -> str:
    """A tool call's arguments as one line of text (JSON, keys sorted), the way evidence quotes them."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


@dataclass
class ToolStep:
    """One tool call of the agent, from the proxy's record: the assistant turn that asked for it and, when the
    harness sent it back to the model, its result."""

    index: int  # the assistant message's index in the transcript
    call_id: str
    name: str
    arguments: dict | str
    result: str | None = None  # the tool message's text; None when no later request carried it
    result_index: int | None = None
    model_call: int | None = None  # the ModelCall whose answer asked for it

    @property
    def arguments_text(self) -> str:
        return arguments_text(self.arguments)


@dataclass
class WorkspaceFile:
    """A path of the final workspace that differs from the initial one (RolloutFile), with the start of its text."""

    path: str
    change: str  # added | modified | deleted
    kind: str  # file | dir | symlink | too_large | special
    size: int = 0
    head: bytes = b""  # its first HEAD_BYTES (files only)


@dataclass
class RolloutView:
    """What the scanners read of one finished rollout."""

    rollout: int
    task: str = ""
    model: str = ""  # the endpoint's name
    instruction: str = ""
    # The conversation the proxy recorded (Rollout.transcript: {"role", "content", "tool_calls", "tool_call_id"}).
    transcript: list[dict] = field(default_factory=list)
    # For each transcript index, the ModelCall that answered it (assistant messages the proxy recorded), else None.
    answered_by: list[int | None] = field(default_factory=list)
    final_message: str = ""
    status: str = ""
    exit_reason: str = ""
    error: str = ""
    score: float | None = None
    code_score: float | None = None
    sub_scores: dict = field(default_factory=dict)
    check_status: str = ""
    files: list[WorkspaceFile] = field(default_factory=list)
    # The checker's files as the workspace holds them while it scores ("reward/check.py"): never the agent's to see.
    reward_paths: list[str] = field(default_factory=list)
    # The session's model calls that failed ({"id", "error"}): a refused call past the token budget is one.
    failed_calls: list[dict] = field(default_factory=list)

    def model_call_at(self, index: int | None) -> int | None:
        if index is None or not 0 <= index < len(self.answered_by):
            return None
        return self.answered_by[index]

    def tool_steps(self) -> list[ToolStep]:
        """Every tool call in the transcript, in order, each with its result where one came back."""
        results: dict[str, tuple[int, str]] = {}
        for index, message in enumerate(self.transcript):
            if message.get("role") == "tool" and message.get("tool_call_id"):
                results.setdefault(str(message["tool_call_id"]), (index, str(message.get("content") or "")))
        steps = []
        for index, message in enumerate(self.transcript):
            if message.get("role") != "assistant":
                continue
            for call in message.get("tool_calls") or []:
                call_id = str(call.get("id") or "")
                result_index, result = results.get(call_id, (None, None))
                steps.append(
                    ToolStep(
                        index=index,
                        call_id=call_id,
                        name=str(call.get("name") or ""),
                        arguments=call.get("arguments", ""),
                        result=result,
                        result_index=result_index,
                        model_call=self.model_call_at(index),
                    )
                )
        return steps

    def final_index(self) -> int | None:
        """The transcript index of the final message (the last assistant turn, when it called no tool)."""
        if self.transcript:
            last = self.transcript[-1]
            if last.get("role") == "assistant" and not last.get("tool_calls"):
                return len(self.transcript) - 1
        return None

    @property
    def failed_checks(self) -> list[str]:
        """The checker's checks that did not pay in full."""
        return sorted(name for name, value in self.sub_scores.items() if _number(value) < 1.0)

    @property
    def paid_checks(self) -> list[str]:
        return sorted(name for name, value in self.sub_scores.items() if _number(value) > 0.0)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


@dataclass
class Finding:
    """One thing a scanner found in one rollout."""

    scanner: str
    rollout: int
    summary: str  # one line: what it is
    evidence: str = ""  # a bounded excerpt of the record that shows it
    step: int | None = None  # the transcript index it is at
    model_call: int | None = None  # the ModelCall that answered that step
    tool: str = ""
    path: str = ""

    def __post_init__(self):
        self.summary = excerpt(self.summary, SUMMARY_CHARS)
        self.evidence = excerpt(self.evidence)

    def as_dict(self) -> dict:
        return {
            "rollout": self.rollout,
            "scanner": self.scanner,
            "summary": self.summary,
            "step": self.step,
            "model_call": self.model_call,
            "tool": self.tool,
            "path": self.path,
            "evidence": self.evidence,
        }


class ScanError(RuntimeError):
    """A scanner could not scan a rollout (its judge failed): recorded on the scan, never a finding."""


class Scanner(ABC):
    """A named check over a rollout. Subclasses set `name`, `title` and `description`, and implement `scan`."""

    name: str = ""
    title: str = ""
    description: str = ""
    judged = False  # asks a model (costs calls): not among the scanners a run gets when it finishes

    @abstractmethod
    def scan(self, view: RolloutView) -> list[Finding]:
        """What it finds in the rollout (an empty list: nothing). Raises ScanError when it cannot tell."""

    def finding(self, view: RolloutView, summary: str, **fields) -> Finding:
        return Finding(scanner=self.name, rollout=view.rollout, summary=summary, **fields)
