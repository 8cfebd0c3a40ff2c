"""Errors the sandbox raises. A command that fails inside the sandbox is never an exception: it is an ExecResult.

These mean the sandbox itself could not do its job, so a caller must not score the run as the command's fault.
"""


class SandboxError(Exception):
    """The sandbox could not run the command (bad arguments, setup failure, a process it could not stop)."""


class SandboxUnavailable(SandboxError):
    """The backend cannot work on this machine (bubblewrap missing, no Docker engine, missing image)."""


class UnsandboxedRefused(SandboxError):
    """The unisolated `process` backend was asked to run code without CLAWGYM_ALLOW_UNSANDBOXED=1."""


class WorkspaceError(SandboxError):
    """A workspace path is unsafe (absolute, `..`, NUL) or the files conflict with each other."""
