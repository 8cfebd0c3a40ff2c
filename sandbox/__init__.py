"""Sandboxed execution of untrusted code (checkers, agents). A plain library: it knows no Django.

Checkers and agents are written by LLMs, so they run only through this package.

    from sandbox import Limits, Workspace, get_backend

    with Workspace.create({"data.csv": b"a,b\\n1,2\\n", "check.py": checker_bytes}) as ws:
        result = get_backend("bwrap").run(["python3", "check.py"], ws, limits=Limits(wall_seconds=30))
        changes = ws.diff()  # WorkspaceDiff(added, modified, deleted), each {path: Entry} with contents

Workspace (sandbox.workspace)
    Workspace.create(files, base_dir=None) materialises {relative path: bytes} into a fresh private folder and keeps
    its snapshot as `initial`. snapshot() reads the tree back as a Snapshot {path: Entry}: files with contents,
    folders, symlinks (recorded with their target, never followed), special files, and files too large to keep
    (size and sha256 only; bounds per file and in total). files() is the {path: bytes} of the regular files.
    diff(initial=None) compares the current state with the initial one. cleanup(), or use it as a context manager.

Backends (sandbox.backends), all with one method:
    run(command, workspace, *, env=None, limits=None, cwd=None, ro_binds=(), extra_binds=()) -> ExecResult
    command is an argv list, or a string run by /bin/sh -c. The environment is scrubbed: a fixed base (PATH of the
    system tools, HOME, LANG, TMPDIR, CLAWGYM_WORKSPACE) plus `env`; nothing of the caller's leaks in. Inside, the
    workspace is mounted at /workspace and at /root/.openclaw/workspace (cwd defaults to it); python and python3 are
    the runtime's interpreter, /usr/bin/python3.
    - "bwrap" (default): bubblewrap, every namespace new (no network, own PID namespace), an unprivileged uid, only
      the sandbox runtime's /usr, /bin, /sbin, /lib* and a few of its /etc files visible read-only, tmpfs /tmp and
      /root; everything the command started is gone when run returns; memory and processes bounded in total by the
      run's cgroup, the workspace by a size-limited filesystem. See sandbox/backends/bwrap.py for each limit.
    - "docker": one container per run through the Docker SDK, network none, the same runtime (the image
      clawgym/sandbox:<runtime version>, `make images`) and the same limits (memory and processes by the container's
      cgroup, the sized workspace). Needs a local Docker engine (`make docker`). See sandbox/backends/docker.py.
    - "process": no isolation, for development machines without bubblewrap. Refused unless the environment has
      CLAWGYM_ALLOW_UNSANDBOXED=1; its results carry isolated=False.

Runtime (sandbox.runtime): what the command finds installed, defined by sandbox/runtime/packages.txt and built by
    `make runtime` into .runtime/<version>/. runtime_version() is "clawgym-runtime-<N>-<sha12 of the definition>";
    every bubblewrap result carries it as ExecResult.runtime.

Limits (sandbox.limits): wall_seconds 60, cpu_seconds 60, memory_bytes 1 GiB (all processes together),
    address_space_bytes None (per process, optional), max_processes 256 (together), max_file_bytes 64 MiB,
    disk_bytes 1 GiB (how much the workspace may grow), max_output_bytes 1 MiB (stdout and stderr each),
    tmpfs_bytes 64 MiB, max_open_files 1024.

ExecResult (sandbox.result): status, reason (one line), returncode (128+N for death by signal N; None when the
    sandbox killed the run), stdout, stderr (text, capped), stdout_truncated, stderr_truncated, duration,
    cpu_seconds (None where unknown), backend, isolated, runtime (the runtime version, or docker's image), unenforced
    (Limits fields this host could not enforce as documented, e.g. memory_bytes without a cgroup). Status values:
    - ok: exited 0.
    - error: exited non-zero (127: command not found).
    - timeout: the wall clock (killed by the sandbox) or the CPU-time limit (SIGXCPU) was reached.
    - oom: the memory limit was hit: an OOM kill counted by the run's cgroup; where only an address-space rlimit
      applied, a failed allocation reported on stderr (MemoryError, bad_alloc, ...; see result.MEMORY_PATTERNS).
    - disk_full: the workspace's size-limited filesystem was full (no free blocks or inodes) when the command ended.
    - output_limit: stdout or stderr went past max_output_bytes; the first max_output_bytes were kept, the run killed.
    - killed: ended by a signal no limit explains (kill -9, a crash such as SIGSEGV, SIGXFSZ from the file-size limit).

Errors (sandbox.errors): run raises only when the sandbox itself fails, never for what the command does.
    SandboxError (setup failed, bad arguments), SandboxUnavailable (backend cannot work here: bubblewrap missing,
    no Docker engine, image missing), UnsandboxedRefused ("process" without CLAWGYM_ALLOW_UNSANDBOXED=1),
    WorkspaceError (unsafe or conflicting workspace paths).
"""

from .backends.base import OPENCLAW_WORKSPACE_PATH, WORKSPACE_PATH, Backend
from .backends.bwrap import BwrapBackend
from .backends.docker import DockerBackend
from .backends.process import ProcessBackend
from .errors import SandboxError, SandboxUnavailable, UnsandboxedRefused, WorkspaceError
from .limits import Limits
from .result import ExecResult, Status
from .runtime import runtime_version
from .workspace import Entry, Snapshot, Workspace, WorkspaceDiff

DEFAULT_BACKEND = "bwrap"
BACKENDS: dict[str, type[Backend]] = {
    BwrapBackend.name: BwrapBackend,
    DockerBackend.name: DockerBackend,
    ProcessBackend.name: ProcessBackend,
}


def get_backend(name: str = DEFAULT_BACKEND, **options) -> Backend:
    """A new backend by name; options go to its constructor (e.g. image= for docker). Unknown names raise."""
    try:
        backend_class = BACKENDS[name]
    except KeyError:
        raise SandboxError(f"unknown sandbox backend {name!r}; known: {', '.join(sorted(BACKENDS))}") from None
    return backend_class(**options)


__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "OPENCLAW_WORKSPACE_PATH",
    "WORKSPACE_PATH",
    "Backend",
    "Entry",
    "ExecResult",
    "Limits",
    "SandboxError",
    "SandboxUnavailable",
    "Snapshot",
    "Status",
    "UnsandboxedRefused",
    "Workspace",
    "WorkspaceDiff",
    "WorkspaceError",
    "get_backend",
    "runtime_version",
]
