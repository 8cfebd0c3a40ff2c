"""Running one harness in the sandbox (bubblewrap, or Docker), with the recording proxy as its only way out.

    outcome = run_agent(get_harness("openclaw"), task, workspace, proxy_base=proxy_base_url(session))

Per run, a private host folder (the run dir) is bound writable at /run/clawgym: the harness's config and state, the
agent's outputs, and the Unix socket of a ProxyRelay (evaluation.relay) that passes this rollout's OpenAI requests to
the proxy. Inside, harnesses/inside/driver.py listens on 127.0.0.1:BRIDGE_PORT, forwards to that socket, runs the
agent under its deadline and then the harness's follow-up steps. The sandbox has its own network namespace (only
loopback), so the web app, the database, Redis, DNS and the outside cannot be reached; the relay refuses any request
that is not an OpenAI API call of this rollout. The run dir is deleted afterwards.

What the agent left is read once, after the sandbox is gone: both backends give the sandbox a PID namespace of its
own and return only once it is empty (bubblewrap waits for its init, Docker for the container), and inside it the
driver kills every process but itself once the agent stopped, before the harness's follow-up steps and before it
writes its own record. So nothing the agent started (a `setsid` loop, a double fork) can rewrite an output after it
was read, nor the driver's record after it was written. The output folder is read without following links
(harnesses.base.AgentFiles).

With the Docker backend the same happens in a container with network "none": the run dir (and the socket in it) is
bound in the same way, and the harness itself comes from the image (scripts/images/sandbox.sh puts OpenClaw at the
paths it has inside), so only the folders the image lacks are bound from this host.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from sandbox import OPENCLAW_WORKSPACE_PATH, Backend, Limits, SandboxError, Status, Workspace, get_backend
from sandbox.limits import MiB

from ..relay import ProxyRelay
from .base import (
    BRIDGE_PORT,
    INSIDE_DIR,
    OUT_DIR,
    RUN_DIR,
    SOCKET_PATH,
    AgentFiles,
    AgentOutcome,
    AgentTask,
    ExitReason,
    Harness,
    HarnessUnavailable,
)

INSIDE_HOST_DIR = Path(__file__).resolve().parent / "inside"
# Beyond the agent's own deadline: start-up, the transcript dump and the driver's grace before it kills the agent.
WALL_MARGIN_SECONDS = 150
SANDBOX_STATUS_REASONS = {
    Status.TIMEOUT: ExitReason.TIMEOUT,
    Status.OOM: ExitReason.OOM,
    Status.DISK_FULL: ExitReason.CRASHED,  # the detail names it: "the workspace is full: ..."
    Status.KILLED: ExitReason.CRASHED,
    Status.OUTPUT_LIMIT: ExitReason.CRASHED,
    Status.ERROR: ExitReason.CRASHED,
}


def agent_limits(task: AgentTask) -> Limits:
    wall = task.timeout + WALL_MARGIN_SECONDS
    return Limits(
        wall_seconds=wall,
        cpu_seconds=int(wall),
        # The whole sandbox's memory (its cgroup) is what the slot scheduler set aside for one rollout; node still
        # needs its large address space per process on top.
        memory_bytes=settings.CLAWGYM_ROLLOUT_SLOT_MEMORY_MB * MiB,
        address_space_bytes=settings.CLAWGYM_ROLLOUT_ADDRESS_SPACE_MB * MiB,
        max_processes=512,
        max_output_bytes=1 * MiB,  # the driver prints nothing; the agent's output goes to files in the run dir
        tmpfs_bytes=256 * MiB,  # /tmp and /root: OpenClaw keeps caches and plugin state under $HOME
        max_open_files=4096,
    )


# Backends that can give the agent its only route out: a Unix socket bound into an otherwise network-less sandbox.
ROLLOUT_BACKENDS = ("bwrap", "docker")


def sandbox_backend(name: str | None = None) -> Backend:
    backend = get_backend(name or settings.CLAWGYM_SANDBOX_BACKEND)
    if backend.name not in ROLLOUT_BACKENDS:
        raise HarnessUnavailable(
            f"rollouts run in the {' or '.join(ROLLOUT_BACKENDS)} sandbox only "
            f"(CLAWGYM_SANDBOX_BACKEND is {backend.name!r})"
        )
    return backend


def run_agent(
    harness: Harness,
    task: AgentTask,
    workspace: Workspace,
    *,
    proxy_base: str,
    backend: Backend | None = None,
    limits: Limits | None = None,
    scratch_dir: str | Path | None = None,
    preflight: Callable[[], str] | None = None,
) -> AgentOutcome:
    """Run the agent to its end and read back what it did. Raises HarnessUnavailable when it cannot start here;
    a sandbox that fails is exit reason sandbox_error; whatever the agent does ends in an AgentOutcome.

    scratch_dir: where the run dir is made (default: the system temp folder); it must be traversable by the
    sandbox's uid, and short enough for the Unix socket's path (108 bytes).
    preflight: called once the harness is known to be able to run, before the sandbox starts; a non-empty answer
    (why the agent could not reach its model) ends the run there, exit reason proxy_unavailable.
    """
    backend = backend or sandbox_backend()
    harness.check_available()
    limits = limits or agent_limits(task)
    run_dir = Path(tempfile.mkdtemp(prefix="clawgym-run-", dir=scratch_dir))
    inside = INSIDE_HOST_DIR
    try:
        if backend.name == "docker":
            # The engine resolves binds on its own host, where a worker in a container (the compose deployment) has
            # no code; the scratch folder it has at the same path there. A copy beside the run dir, not in it: the
            # run dir is the agent's to write.
            inside = Path(tempfile.mkdtemp(prefix="clawgym-inside-", dir=run_dir.parent))
            shutil.copytree(INSIDE_HOST_DIR, inside, dirs_exist_ok=True)
            inside.chmod(0o755)
        (run_dir / "out").mkdir()
        agent_step, after = harness.prepare(task, run_dir, OPENCLAW_WORKSPACE_PATH)
        unreachable = preflight() if preflight else ""
        if unreachable:
            return AgentOutcome(ExitReason.PROXY_UNAVAILABLE, detail=unreachable)
        spec = {
            "bridge": {"port": BRIDGE_PORT, "socket": SOCKET_PATH},
            "agent": agent_step.as_dict(),
            "after": [step.as_dict() for step in after],
            "result": f"{OUT_DIR}/driver.json",
            # Both rollout backends run the driver as the child of the init of a PID namespace of its own.
            "pid_namespace": True,
        }
        (run_dir / "spec.json").write_text(json.dumps(spec))
        owner = (backend.uid, backend.gid) if getattr(backend, "as_root", False) else None
        if owner:
            _chown_tree(run_dir, *owner)
        relay = ProxyRelay(
            run_dir / "proxy.sock",
            proxy_base,
            task.api_key,
            max_body_bytes=settings.CLAWGYM_PROXY_MAX_REQUEST_BYTES,
            read_timeout=float(task.timeout),
            socket_owner=owner,
        )
        with relay:
            try:
                executed = backend.run(
                    ["/usr/bin/python3", f"{INSIDE_DIR}/driver.py", f"{RUN_DIR}/spec.json"],
                    workspace,
                    limits=limits,
                    ro_binds=[(inside, INSIDE_DIR), *_binds_not_in_image(backend, harness.ro_binds())],
                    extra_binds=[(run_dir, RUN_DIR)],
                )
            except SandboxError as exc:
                return AgentOutcome(ExitReason.SANDBOX_ERROR, detail=f"{type(exc).__name__}: {exc}"[:400])
        # The sandbox is gone, and every process in it: what is in the run dir now stays as it is.
        files = AgentFiles(run_dir / "out")
        # The driver exited 0 only after it wrote its record, which it did once nothing else was left in the
        # sandbox. Any other end leaves no record worth reading (the agent may have written one).
        driver = files.json("driver.json", 1 * MiB) if executed.status is Status.OK else None
        if isinstance(driver, dict):
            outcome = harness.collect(task, files, driver)
            outcome.seconds = float(driver.get("seconds") or executed.duration)
            rss = driver.get("max_rss_kb")
            outcome.max_rss_bytes = int(rss) * 1024 if isinstance(rss, int) else None
        else:
            # The sandbox itself stopped the run (its wall clock, memory, a kill) or the driver broke: keep
            # whatever the agent wrote, and the sandbox's reason.
            outcome = harness.collect(task, files, {"returncode": executed.returncode, "timed_out": False})
            outcome.exit_reason = SANDBOX_STATUS_REASONS.get(executed.status, ExitReason.CRASHED)
            outcome.detail = f"the sandbox ended the run: {executed.reason}"[:400]
            outcome.seconds = executed.duration
        if relay.refused:
            outcome.log_tail += "".join(f"\n[proxy relay refused] {line}" for line in relay.refused)
        outcome.relay_failures = [line for line in relay.refused if line.startswith("502 ")]
        outcome.runtime = getattr(executed, "runtime", "")
        return outcome
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if inside != INSIDE_HOST_DIR:
            shutil.rmtree(inside, ignore_errors=True)


def _binds_not_in_image(backend: Backend, binds: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """The harness's folders, less those the sandbox's image holds itself (Docker: DockerBackend.provided_paths)."""
    provided = getattr(backend, "provided_paths", frozenset())
    return [(source, target) for source, target in binds if target not in provided]


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Hand the run dir to the sandbox's unprivileged uid (a root caller runs the sandbox as that uid)."""
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
