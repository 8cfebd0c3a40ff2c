"""The checker protocol (ClawGym-compatible): run a task's checker on a workspace and read its score.

- The revision's `reward/` files are copied into the workspace at `reward/` (replacing anything the agent left
  there), with the payload file `reward/.payload.json` = {task_id, user_query, metadata, final_message, transcript};
  `OPENCLAW_REWARD_PAYLOAD` holds its absolute path inside the sandbox.
- The revision's entry command (default `bash reward/reward.sh`) runs in the sandbox from the workspace.
- Output: check.py prints a JSON object of named sub-scores, reward.sh prints the final float as its last line.

The score is reward.sh's last line, as ClawGym defines the reward. The sub-scores are kept for display: those
reward.sh printed, or else those check.py printed. ClawGym's own reward.sh pipes check.py's JSON into a one-line
averager and prints only the float, so what `reward/check.py` writes to stdout is also copied to a file while it
runs (CAPTURE_HOOK, a `sitecustomize` module on the checker's PYTHONPATH that acts only in the Python process
running reward/check.py, however reward.sh calls it). When the sub-scores and the last line disagree (a reward.sh
may weight its checks) the result says so in its reason, but the last line still counts. The same hook makes every
Python of the checker run import the runtime's modules from the runtime: a `json.py` the agent left in the workspace
is never what ClawGym's `python3 -c "import sys,json; ..."` averager imports.

Anything the checker does wrong gives score 0 and a status with a one-line reason, never an exception: a non-zero
exit, a timeout, a kill, an output flood, no or garbled output, NaN/inf, a value outside [0, 1]: then no score
could be read. Writing into the workspace while judging is not among them: ClawGym's checkers run the agent's own
scripts, which write files. The score stands; the result lists what changed (`workspace_writes`) and its reason
says so. A sandbox that cannot run at all is status `sandbox_error`: that is not the checker's fault, and callers
that judge checkers must not count it against one (see tasks.sanity).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from django.conf import settings

from sandbox import OPENCLAW_WORKSPACE_PATH, Backend, Limits, SandboxError, Status, Workspace, get_backend
from sandbox.workspace import WorkspaceDiff

from .paths import normalize_path

REWARD_DIR = "reward"
PAYLOAD_PATH = f"{REWARD_DIR}/.payload.json"
PAYLOAD_ENV = "OPENCLAW_REWARD_PAYLOAD"
CHECK_SCRIPT = f"{REWARD_DIR}/check.py"
# The capture of what reward/check.py writes to stdout (see CAPTURE_HOOK), and the folder of the hook itself.
CAPTURE_PATH = f"{REWARD_DIR}/.check-stdout"
HOOK_DIR = f"{REWARD_DIR}/.clawgym"
CAPTURE_BYTES = 256 * 1024
# Files of the protocol, not of the checker or the agent: never reported as the checker's writes.
PROTOCOL_PATHS = frozenset({PAYLOAD_PATH, CAPTURE_PATH, HOOK_DIR, f"{HOOK_DIR}/sitecustomize.py"})
WRITES_KEPT = 50  # the writes a stored result lists (all are counted)
# reward.sh rounds the mean to 6 decimals: a smaller difference from the sub-scores' mean is only that rounding.
MEAN_TOLERANCE = 1e-6
TAIL_CHARS = 2000
REASON_CHARS = 400

# The `sitecustomize` module put on the checker's PYTHONPATH: tasks/checker_hook.py (its docstring says what it does).
CAPTURE_HOOK = (Path(__file__).parent / "checker_hook.py").read_text()


class CheckStatus(StrEnum):
    OK = "ok"
    # The sandbox's own statuses (sandbox.Status) for a run that did not exit 0.
    ERROR = "error"
    TIMEOUT = "timeout"
    OOM = "oom"
    DISK_FULL = "disk_full"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    # Exited 0, but what it printed is not a score: nothing, not a number, NaN/inf, out of [0, 1], bad sub-scores.
    BAD_OUTPUT = "bad_output"
    # The sandbox could not run the checker at all (bubblewrap missing, unsandboxed runs refused, setup failure).
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class CheckerSpec:
    """What running a revision's checker needs, read from the database once (so threads need no database)."""

    task_id: str
    instruction: str
    metadata: dict
    entry: str
    reward_files: dict[str, bytes]  # paths relative to reward/

    @classmethod
    def from_revision(cls, revision) -> CheckerSpec:
        files = revision.files.filter(role="reward").select_related("blob")
        return cls(
            task_id=revision.task.external_id,
            instruction=revision.instruction,
            metadata=dict(revision.metadata),
            entry=revision.checker_entry,
            reward_files={f.path: f.blob.content for f in files},
        )


class WorkspaceWrite(NamedTuple):
    """A file or link of the judged workspace that the checker added, modified or deleted while it ran."""

    path: str
    change: str  # "added" | "modified" | "deleted"


@dataclass(frozen=True)
class CheckResult:
    score: float  # the code score s_code in [0, 1]; 0 unless status is ok
    status: CheckStatus
    reason: str  # one line; empty for a clean run with nothing to remark
    subscores: dict[str, float] = field(default_factory=dict)
    duration: float = 0.0
    backend: str = ""
    isolated: bool = True  # False: the checker ran without a sandbox (the "process" backend)
    stdout: str = ""  # the last TAIL_CHARS of each
    stderr: str = ""
    # What the checker wrote into the workspace it judged, by path (a warning: the score stands).
    workspace_writes: tuple[WorkspaceWrite, ...] = ()
    runtime: str = ""  # the version of the sandbox runtime that ran the checker, where the backend reports one

    @property
    def ok(self) -> bool:
        return self.status is CheckStatus.OK

    @property
    def paying_checks(self) -> dict[str, float]:
        """The sub-scores that gave points."""
        return {name: value for name, value in self.subscores.items() if value > 0}

    def as_dict(self) -> dict:
        """The JSON form kept in sanity reports; a failed run keeps the end of its stderr for diagnosis."""
        data = {
            "score": self.score,
            "status": str(self.status),
            "reason": self.reason,
            "subscores": self.subscores,
            "duration": round(self.duration, 3),
            "runtime": self.runtime,
        }
        if self.workspace_writes:
            data["workspace_writes"] = [w._asdict() for w in self.workspace_writes[:WRITES_KEPT]]
            data["workspace_writes_count"] = len(self.workspace_writes)
        if not self.ok and self.stderr:
            data["stderr"] = self.stderr
        return data


class BadOutput(ValueError):
    """What the checker printed is not a valid score; the message says why."""


def checker_limits() -> Limits:
    wall = settings.CLAWGYM_CHECKER_WALL_SECONDS
    return Limits(
        wall_seconds=wall,
        cpu_seconds=wall,
        memory_bytes=settings.CLAWGYM_CHECKER_MEMORY_MB * 1024 * 1024,
        max_output_bytes=settings.CLAWGYM_CHECKER_MAX_OUTPUT_BYTES,
    )


def checker_backend(name: str | None = None) -> Backend:
    """The sandbox backend named in settings (CLAWGYM_SANDBOX_BACKEND) unless `name` says otherwise."""
    return get_backend(name or settings.CLAWGYM_SANDBOX_BACKEND)


def run_checker(
    revision,
    workspace: Workspace,
    final_message: str = "",
    transcript: Sequence = (),
    *,
    backend: Backend | None = None,
    limits: Limits | None = None,
) -> CheckResult:
    """Score `workspace` with the checker of `revision` (a TaskRevision, or its CheckerSpec).

    Installs reward/ and the payload into the workspace, so pass a workspace the caller may change (a copy of
    the final state, not the only one). `transcript` must be JSON-serialisable. Never raises for what the
    checker does; see the module docstring for the statuses.
    """
    spec = revision if isinstance(revision, CheckerSpec) else CheckerSpec.from_revision(revision)
    backend = backend or checker_backend()
    limits = limits or checker_limits()
    payload = {
        "task_id": spec.task_id,
        "user_query": spec.instruction,
        "metadata": spec.metadata,
        "final_message": final_message,
        "transcript": list(transcript),
    }
    payload_bytes = json.dumps(payload, ensure_ascii=False).encode()
    try:
        install_checker(workspace.root, spec.reward_files, payload_bytes)
    except OSError as exc:
        return _failed(CheckStatus.SANDBOX_ERROR, f"could not install the checker in the workspace: {exc}", backend)
    # The process backend runs in place, so the payload's path is a host path there.
    root = OPENCLAW_WORKSPACE_PATH if backend.isolated else str(workspace.root)
    env = {
        PAYLOAD_ENV: f"{root}/{PAYLOAD_PATH}",
        "PYTHONPATH": f"{root}/{HOOK_DIR}",
        "CLAWGYM_CHECK_SCRIPT": f"{root}/{CHECK_SCRIPT}",
        "CLAWGYM_CHECK_CAPTURE": f"{root}/{CAPTURE_PATH}",
    }
    before = workspace.snapshot()
    try:
        executed = backend.run(spec.entry, workspace, env=env, limits=limits)
    except SandboxError as exc:
        return _failed(CheckStatus.SANDBOX_ERROR, f"{type(exc).__name__}: {exc}", backend)
    after = workspace.snapshot()
    # A snapshot cut short at its entry limit cannot tell a deleted file from one past the limit: no list then.
    writes = () if before.truncated or after.truncated else workspace_writes(WorkspaceDiff.between(before, after))
    common = {
        "duration": executed.duration,
        "backend": executed.backend,
        "isolated": executed.isolated,
        "stdout": executed.stdout[-TAIL_CHARS:],
        "stderr": executed.stderr[-TAIL_CHARS:],
        "workspace_writes": writes,
        "runtime": executed.runtime,  # "" for the process backend: the host's own tools judged
    }
    wrote = writes_note(writes)
    if executed.status is not Status.OK:
        reason = executed.reason + _last_line(executed.stderr)
        return CheckResult(0.0, CheckStatus(str(executed.status)), _short(_join(reason, wrote)), **common)
    try:
        score, subscores, note = parse_output(executed.stdout, captured=_read_capture(workspace.root))
    except BadOutput as exc:
        return CheckResult(0.0, CheckStatus.BAD_OUTPUT, _short(_join(str(exc), wrote)), **common)
    stands = f"{wrote}; the score stands" if wrote else ""
    return CheckResult(score, CheckStatus.OK, _short(_join(note, stands)), subscores=subscores, **common)


def install_checker(root: Path, reward_files: dict[str, bytes], payload: bytes) -> None:
    """Put the checker's files at reward/ in the workspace folder, replacing whatever is there, with the payload
    and the capture hook.

    Whatever the agent left at reward/ goes first, without following links: a `reward` symlink made by the
    agent must not lead these writes out of the workspace.
    """
    reward = root / REWARD_DIR
    if reward.is_symlink() or (reward.exists() and not reward.is_dir()):
        reward.unlink()
    elif reward.is_dir():
        shutil.rmtree(reward)
    reward.mkdir()
    for path, data in reward_files.items():
        target = reward / normalize_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (root / PAYLOAD_PATH).write_bytes(payload)
    hook = root / HOOK_DIR
    hook.mkdir(exist_ok=True)  # reward/ was just made from the checker's own files: nothing of the agent's is here
    (hook / "sitecustomize.py").write_text(CAPTURE_HOOK)


def workspace_writes(diff: WorkspaceDiff) -> tuple[WorkspaceWrite, ...]:
    """The files and links the checker added, modified or deleted (folders and the protocol's files left out)."""
    found = [
        WorkspaceWrite(path, change)
        for change, entries in (("modified", diff.modified), ("deleted", diff.deleted), ("added", diff.added))
        for path, entry in entries.items()
        if entry.kind != "dir" and path not in PROTOCOL_PATHS
    ]
    return tuple(sorted(found, key=lambda w: (("modified", "deleted", "added").index(w.change), w.path)))


def writes_note(writes: Sequence[WorkspaceWrite]) -> str:
    """The reason's words for a checker's writes ('' for none)."""
    parts = []
    for change in ("modified", "deleted", "added"):
        paths = [w.path for w in writes if w.change == change]
        if paths:
            shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
            parts.append(f"{change} {shown}")
    return "the checker wrote to the workspace while judging (" + "; ".join(parts) + ")" if parts else ""


def _read_capture(root: Path) -> str | None:
    """What reward/check.py wrote to stdout, or None when it did not run (or not through a Python that loads the
    hook: `python -I`, `python -S`, a PYTHONPATH of the checker's own)."""
    path = root / CAPTURE_PATH
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with path.open("rb") as captured:
            return captured.read(CAPTURE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def parse_output(stdout: str, captured: str | None = None) -> tuple[float, dict[str, float], str]:
    """(score, sub-scores, note) from a checker's stdout, or BadOutput saying what is wrong.

    The score is the last non-empty line, a float in [0, 1]. The sub-scores are the last earlier line holding a
    JSON object, or else the first JSON object in the output (pretty-printed over several lines); each must be a
    number (or true/false) in [0, 1]. No JSON object at all is allowed (the note says so); a garbled one is not.
    `captured`: what reward/check.py itself wrote to stdout. Its JSON object gives the sub-scores when reward.sh
    printed none (ClawGym's averaging reward.sh); a garbled one there is only noted, as the score stands without it.
    """
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise BadOutput("the checker printed nothing; its last line must be the score")
    last = lines[-1]
    try:
        score = float(last)
    except ValueError:
        raise BadOutput(f"the last line is not a number: {_clip(last)!r}") from None
    _check_value("the score", score)
    subscores = _subscores(lines[:-1], stdout[: stdout.rstrip().rfind("\n") + 1])
    notes = []
    if not subscores and captured is not None:
        try:
            subscores = _subscores([line.strip() for line in captured.splitlines() if line.strip()], captured)
        except BadOutput as exc:
            notes.append(f"{CHECK_SCRIPT} printed no valid sub-scores: {exc}")
        else:
            if not subscores:
                notes.append(f"{CHECK_SCRIPT} printed no JSON object of sub-scores")
    if not subscores:
        if not notes:
            notes.append("no sub-scores printed")
    else:
        mean = sum(subscores.values()) / len(subscores)
        if abs(mean - score) > MEAN_TOLERANCE:
            notes.append(
                f"the last line {score:g} differs from the mean of the sub-scores {mean:.6g}; "
                "the last line is the score"
            )
    return score, subscores, "; ".join(notes)


def _subscores(lines: list[str], head: str) -> dict[str, float]:
    error = ""
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError as exc:
                error = error or f"{exc}: {_clip(line)!r}"
                continue
            if isinstance(found, dict):
                return _validated(found)
    start = head.find("{")
    if start >= 0:
        try:
            found, _end = json.JSONDecoder().raw_decode(head, start)
        except ValueError as exc:
            error = error or f"{exc}"
        else:
            if isinstance(found, dict):
                return _validated(found)
    if error:
        raise BadOutput(f"the sub-scores are not valid JSON ({error})")
    return {}


def _validated(found: dict) -> dict[str, float]:
    subscores = {}
    for name, value in found.items():
        if isinstance(value, bool):
            value = float(value)  # a check that printed true/false passed/failed
        if not isinstance(value, (int, float)):
            raise BadOutput(f"the sub-score {_clip(name)!r} is {_clip(json.dumps(value))}, not a number")
        _check_value(f"the sub-score {_clip(name)!r}", float(value))
        subscores[name] = float(value)
    return subscores


def _check_value(what: str, value: float) -> None:
    if not math.isfinite(value):
        raise BadOutput(f"{what} is {value} (not a finite number)")
    if not 0.0 <= value <= 1.0:
        raise BadOutput(f"{what} {value:g} is outside [0, 1]")


def _failed(status: CheckStatus, reason: str, backend: Backend) -> CheckResult:
    return CheckResult(0.0, status, _short(reason), backend=backend.name, isolated=backend.isolated)


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f": {lines[-1]}" if lines else ""


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _join(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _short(text: str) -> str:
    return _clip(" ".join(text.split()), REASON_CHARS)
