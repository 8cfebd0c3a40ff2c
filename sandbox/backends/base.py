"""The one interface every sandbox backend implements, and what they share."""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from ..errors import SandboxError
from ..limits import Limits
from ..result import ExecResult
from ..workspace import Workspace

# Inside a sandbox the workspace is mounted twice, at a neutral path and where ClawGym checkers expect it.
WORKSPACE_PATH = "/workspace"
OPENCLAW_WORKSPACE_PATH = "/root/.openclaw/workspace"

# The system interpreter and tools only: /usr/local and any venv or pyenv stay off the PATH.
SANDBOX_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

Command = Sequence[str] | str
# (host path, path inside the sandbox)
Bind = tuple[str | Path, str]


class Backend(ABC):
    """Runs one command against a workspace under limits and returns an ExecResult.

    `run` raises SandboxError (or a subclass) only when the sandbox itself fails; whatever the command does,
    including crashing, hanging or flooding its output, ends in an ExecResult with a status and a reason.
    """

    name: ClassVar[str]
    isolated: ClassVar[bool]

    @abstractmethod
    def check_available(self) -> None:
        """Raise SandboxUnavailable, saying why, when this backend cannot run here."""

    @abstractmethod
    def run(
        self,
        command: Command,
        workspace: Workspace,
        *,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        cwd: str | None = None,
        ro_binds: Sequence[Bind] = (),
        extra_binds: Sequence[Bind] = (),
    ) -> ExecResult:
        """Run `command` (an argv list, or a string for /bin/sh -c) with the workspace as its only writable place.

        env: added to a scrubbed base environment (nothing is inherited from the caller's process).
        cwd: a path inside the sandbox, or one relative to the workspace (default: the workspace).
        ro_binds / extra_binds: host paths made visible read-only / writable at the given sandbox paths.
        stdin is always empty.
        """


def argv(command: Command) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    args = [str(part) for part in command]
    if not args:
        raise SandboxError("the command is empty")
    return args


def base_env(workspace_path: str, home: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The whole environment of a sandboxed command: a fixed base plus what the caller passes explicitly."""
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        # Imports of workspace modules must not leave __pycache__ folders in the workspace diff.
        "PYTHONDONTWRITEBYTECODE": "1",
        "CLAWGYM_WORKSPACE": workspace_path,
    }
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise SandboxError(f"invalid environment variable name {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise SandboxError(f"environment variable {key} must be a string without NUL")
        env[key] = value
    return env


def sandbox_cwd(cwd: str | None) -> str:
    """The working directory inside the sandbox: absolute, normalised, the workspace by default."""
    if cwd is None:
        return WORKSPACE_PATH
    joined = posixpath.normpath(posixpath.join(WORKSPACE_PATH, cwd))
    if "\0" in joined:
        raise SandboxError(f"invalid cwd {cwd!r}")
    return joined


def checked_binds(binds: Sequence[Bind]) -> list[tuple[str, str]]:
    """Host sources must exist; targets must be absolute, normalised and not hide the workspace."""
    checked = []
    for source, target in binds:
        host = Path(source)
        if not host.exists():
            raise SandboxError(f"bind source {host} does not exist")
        if not target.startswith("/") or posixpath.normpath(target) != target or target == "/":
            raise SandboxError(f"bind target {target!r} must be an absolute, normalised path other than /")
        for reserved in (WORKSPACE_PATH, OPENCLAW_WORKSPACE_PATH):
            if target == reserved or reserved.startswith(target + "/"):
                raise SandboxError(f"bind target {target!r} would hide the workspace at {reserved}")
        checked.append((str(host.resolve()), target))
    return checked
