"""The harness interface: how one agent is started in the sandbox and what is read back once it stopped.

A harness is a black box that gets an instruction, a model reachable at an OpenAI-compatible base URL with an API
key, and a workspace. It never talks to the database or the network itself: `run_agent`
(evaluation.harnesses.sandboxed) puts it in the sandbox behind the recording proxy and hands back an AgentOutcome.

What the agent writes about itself (its output files: final answer, turns, transcript, errors) is its own account,
never a fact: anything inside the sandbox may have written those files. So a harness reads them into an AgentAccount,
kept and shown as such, and says in AgentOutcome.detail only what it observed itself (exit statuses, its deadline);
the turns, tool calls, transcript and final message a rollout stores come from the proxy's record
(evaluation.proxy_record).
"""

from __future__ import annotations

import json
import os
import stat
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

# Paths inside the sandbox.
RUN_DIR = "/run/clawgym"  # the rollout's own host folder (spec, config, agent state, outputs, the proxy socket)
INSIDE_DIR = "/opt/clawgym"  # evaluation/harnesses/inside, read-only
SOCKET_PATH = f"{RUN_DIR}/proxy.sock"
OUT_DIR = f"{RUN_DIR}/out"
# The loopback port inside the sandbox's own network namespace where the bridge to the proxy listens. Every
# sandbox has its own namespace, so every rollout can use the same port.
BRIDGE_PORT = 18789
BASE_URL = f"http://127.0.0.1:{BRIDGE_PORT}/v1"
# Kept of an agent's stderr for the rollout's log.
LOG_TAIL_CHARS = 8000


class ExitReason:
    """Why the agent stopped (Rollout.exit_reason)."""

    COMPLETED = "completed"  # it gave its final answer
    ERROR = "error"  # it stopped on an error (a model call that failed, a harness error)
    TIMEOUT = "timeout"  # it ran past its deadline
    MAX_TURNS = "max_turns"  # it used all its turns without a final answer
    TOKEN_LIMIT = "token_limit"  # its calls used all its tokens (the proxy refused the next: llm.proxy)
    OOM = "oom"  # it ran out of memory
    CRASHED = "crashed"  # it died on a signal, or its output could not be read
    SANDBOX_ERROR = "sandbox_error"  # the sandbox could not run it at all
    HARNESS_UNAVAILABLE = "harness_unavailable"  # the harness is not installed here
    WORKER_LOST = "worker_lost"  # the process running the rollout died
    RUNNER_ERROR = "runner_error"  # the rollout could not be run (an unexpected error of ClawGym's own)
    CANCELLED = "cancelled"
    # Infrastructure, not the model (evaluation.infra): the agent could not reach its model, or not on the record.
    # proxy_unavailable: the preflight found the proxy unreachable or misconfigured, or the proxy could not record one
    # of the answers the agent got.
    PROXY_UNAVAILABLE = "proxy_unavailable"
    UPSTREAM_ERROR = "upstream_error"  # the agent stopped on the model server's failures (5xx, unreachable, our key)

    CHOICES = [
        (COMPLETED, "Completed"),
        (ERROR, "Error"),
        (TIMEOUT, "Timed out"),
        (MAX_TURNS, "Out of turns"),
        (TOKEN_LIMIT, "Out of tokens"),
        (OOM, "Out of memory"),
        (CRASHED, "Crashed"),
        (SANDBOX_ERROR, "Sandbox error"),
        (HARNESS_UNAVAILABLE, "Harness not installed"),
        (WORKER_LOST, "Worker lost"),
        (RUNNER_ERROR, "Runner error"),
        (CANCELLED, "Cancelled"),
        (PROXY_UNAVAILABLE, "Model proxy unavailable"),
        (UPSTREAM_ERROR, "Model server failed"),
    ]


class HarnessUnavailable(RuntimeError):
    """The harness cannot run here (not installed, or no sandbox it can run in); the message says how to fix it."""


@dataclass(frozen=True)
class AgentTask:
    """What the agent is asked, and how it reaches its model (through the proxy: the key is the session token)."""

    instruction: str
    model: str
    api_style: str  # "chat" or "responses"
    api_key: str
    timeout: int  # seconds the agent may run
    sampling: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # harness-specific settings (see each harness)


@dataclass
class AgentAccount:
    """What the agent reported about itself, as its output files had it when every process of the sandbox was gone.
    Stored and shown labelled as its own account (Rollout.agent_account); never used for a score, a trajectory, or
    the turns and transcript a rollout stores."""

    exit_reason: str = ""  # how it said it ended (the builtin agent's own exit_reason; OpenClaw's status)
    detail: str = ""  # its words on why (an error message, its last log line)
    final_message: str = ""
    turns: int | None = None  # model round trips (assistant turns)
    tool_calls: int | None = None
    tools_used: dict[str, int] = field(default_factory=dict)  # tool name -> calls
    # The conversation, one message a dict: {"role": system|user|assistant|tool, "content": text,
    # "tool_calls": [{"id", "name", "arguments"}], "tool_call_id", "name", "is_error"} (keys present when set).
    transcript: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        """As stored (Rollout.agent_account); {} when the agent said nothing at all."""
        return asdict(self) if self != AgentAccount() else {}


@dataclass
class AgentOutcome:
    exit_reason: str
    # One line on why, for anything but a clean completion: what ClawGym saw (an exit status, a deadline, the
    # sandbox's reason), never the agent's words (those are in account.detail).
    detail: str = ""
    account: AgentAccount = field(default_factory=AgentAccount)
    usage: dict = field(default_factory=dict)  # as the harness reported it; the proxy's records are authoritative
    seconds: float = 0.0
    max_rss_bytes: int | None = None  # the largest resident set of one agent process (Node: the whole agent)
    log_tail: str = ""
    runtime: str = ""  # the sandbox runtime it ran in (sandbox ExecResult.runtime)
    relay_failures: list[str] = field(default_factory=list)  # the relay's "502 proxy unreachable" answers to it


@dataclass
class DriverStep:
    """One command the in-sandbox driver runs (harnesses/inside/driver.py)."""

    argv: list[str]
    timeout: float
    stdout: str  # paths inside the sandbox
    stderr: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def as_dict(self) -> dict:
        return {
            "argv": self.argv,
            "timeout": self.timeout,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "env": self.env,
            "cwd": self.cwd,
        }


class Harness(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()  # the harness's own options (Rollout.harness_options), besides the common
    durations: ClassVar[tuple[str, ...]] = ()  # those of its options that are seconds (capped: check_options)
    counts: ClassVar[tuple[str, ...]] = ()  # those that are a whole number from 1 (check_options)
    flags: ClassVar[tuple[str, ...]] = ()  # those that are true or false (check_options)

    @abstractmethod
    def check_available(self) -> None:
        """Raise HarnessUnavailable, saying how to install it, when it cannot run here."""

    def ro_binds(self) -> list[tuple[Path, str]]:
        """Host folders it needs read-only inside the sandbox (besides INSIDE_DIR)."""
        return []

    @abstractmethod
    def prepare(self, task: AgentTask, run_dir: Path, workspace_path: str) -> tuple[DriverStep, list[DriverStep]]:
        """Write what the agent needs into run_dir (host side) and return the agent's step and the steps after it."""

    @abstractmethod
    def collect(self, task: AgentTask, files: AgentFiles, agent: dict) -> AgentOutcome:
        """Read what the agent left in its output folder. `agent` is the driver's record of the agent step
        ({returncode, signal, timed_out, seconds}). Never raises for what the agent did or failed to write."""


class AgentFiles:
    """The agent side's output folder (the run dir's out/), read on this host once every process of the sandbox is
    gone (sandboxed.run_agent).

    Everything in it was the agent's to write, so a name in it may be a link (to a file of this host, such as
    /proc/self/environ or another rollout's run dir), a FIFO (whose open would block this worker for ever), or the
    folder itself a link. Only regular files are read, opened without following any link, and never more than asked.
    """

    def __init__(self, folder: Path):
        self.folder = folder

    def read(self, name: str, limit: int) -> bytes | None:
        """The file's bytes, or None when it is missing, not a regular file, or over `limit` bytes."""
        with self._open(name) as handle:
            if handle is None or os.fstat(handle.fileno()).st_size > limit:
                return None
            return handle.read(limit + 1)[:limit]

    def tail(self, name: str, chars: int = LOG_TAIL_CHARS) -> str:
        """The end of a text file (bounded: it may be huge); "" when there is none."""
        with self._open(name) as handle:
            if handle is None:
                return ""
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - chars * 4))
            return handle.read(chars * 4).decode("utf-8", "replace")[-chars:]

    def json(self, name: str, limit: int) -> object | None:
        """A JSON file, or None when it is missing, too large or not JSON."""
        data = self.read(name, limit)
        try:
            return json.loads(data.decode("utf-8", "replace")) if data is not None else None
        except ValueError:
            return None

    def _open(self, name: str):
        return _RegularFile(self.folder, name)


class _RegularFile:
    """`with _RegularFile(folder, name) as handle`: a binary file object, or None (see AgentFiles)."""

    def __init__(self, folder: Path, name: str):
        self.handle = None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            folder_fd = os.open(folder, flags | os.O_DIRECTORY)
        except OSError:
            return
        try:
            # O_NONBLOCK: opening a FIFO for reading returns at once (and is then refused) instead of waiting for a
            # writer that never comes.
            fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=folder_fd)
        except OSError:
            return
        finally:
            os.close(folder_fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return
        self.handle = os.fdopen(fd, "rb")

    def __enter__(self):
        return self.handle

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.close()


def memory_exhausted(stderr: str) -> bool:
    lowered = stderr.lower()
    return any(marker in lowered for marker in ("out of memory", "memoryerror", "cannot allocate memory", "bad_alloc"))
