"""Ready containers for the Docker backend: created and started before the run that takes them, each used by one run.

Starting a container is most of a throw-away run's time (about 0.44 s of the engine's on the 2-core test machine,
against 0.05 s to create one and 0.04 s to remove it), and nothing in it depends on the command. So a container is
created and started ahead with everything a run fixes at creation (image, limits, binds, user) and, for its command,
`sh -s` reading its stdin (attached before the start, with the output). Its workspace paths are bound to an empty
folder that is a shared mount (a bind of the folder onto itself) with slave propagation, so the run's size-limited
workspace, mounted there on the host once the run is asked for, appears inside the running container.

The run then sends one line: stdin becomes /dev/null, the shell enters the working directory and execs
`/usr/bin/env -i` with exactly the environment a throw-away container gets (Docker's PATH default and HOSTNAME, then
the run's), which execs the command. So the command is the child of Docker's init, as in a throw-away container: its
end (or the kill at a limit) ends the container and empties its PID namespace, the exit code and OOMKilled come from
the container's state, and the output from the same attach stream. Before that line the container held only our
shell, which has read nothing; after the run it is removed (in the background) and never started again.

A ready container is taken only by a run with the same creation options, and only while its deadline label (set at
creation to cover READY_SECONDS of waiting plus the run) still covers the run: stale cleanup elsewhere never removes
one in use. Containers left by a killed worker are removed by remove_stale like any other (same labels), their slot
folders by volume.remove_stale (same naming).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shlex
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from . import mounts, process_exit, volume
from .cgroups import _start_time

# How long a ready container may wait for its run; older ones are removed instead of used.
READY_SECONDS = 600
# Ready containers kept per process, all option sets together: AHEAD for each of two option sets (a worker's checker
# runs and another kind of run), so that two kinds taken in turn do not push out each other's.
POOL_SIZE = 4
# Containers ready or being made ahead for options asked for again: runs that come back to back each take one made
# while the run before was running, and two engine starts side by side finish sooner than two one after another.
AHEAD = 2
# Docker's PATH when the environment has none (moby's oci default), so both paths give the same environment.
DOCKER_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LAUNCHER = ["/bin/sh", "-s"]
_MS_BIND, _MS_SHARED = 4096, 1 << 20
log = logging.getLogger("sandbox")


@dataclass
class Ready:
    """A started container waiting on its stdin for the command, and the folder its workspace paths are bound to."""

    key: tuple
    container: Any
    connection: socket.socket
    slot_dir: Path
    deadline: float
    made: float = field(default_factory=time.monotonic)

    @property
    def mount_point(self) -> Path:
        return self.slot_dir / "workspace"


def launch_line(args: list[str], env: dict[str, str], cwd: str, hostname: str) -> bytes:
    """What the ready container's shell runs: the command as a throw-away container would have run it."""
    full = {"PATH": DOCKER_DEFAULT_PATH, "HOSTNAME": hostname} if "PATH" not in env else {"HOSTNAME": hostname}
    full.update(env)
    words = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in full.items()), *args]
    return (
        f"exec 0</dev/null; cd -- {shlex.quote(cwd)} || exit 126; exec {' '.join(map(shlex.quote, words))}\n"
    ).encode()


def launchable(args: list[str], cwd: str, workspace_root: Path, workspace_path: str) -> bool:
    """Whether the launcher runs this exactly as Docker would: env takes a first word with "=" for a variable, and
    Docker makes a missing working directory where the shell's cd would fail (or follow a link)."""
    if "=" in args[0]:
        return False
    if cwd == workspace_path:
        return True
    if not cwd.startswith(workspace_path + "/"):
        return False
    inside = workspace_root / cwd.removeprefix(workspace_path + "/")
    return inside.is_dir() and os.path.realpath(inside) == os.path.normpath(inside)


def make_slot() -> Path:
    """A folder whose `workspace` is a shared mount of itself (named as volumes are: removed after a killed worker)."""
    libc = mounts.syscalls()
    if not libc:
        raise SandboxError("no libc mount here: the Docker backend's ready containers need it")
    base = volume.scratch_dir()
    base.mkdir(mode=0o711, exist_ok=True)
    slot = base / f"run-{os.getpid()}-{_start_time(os.getpid())}-{secrets.token_hex(4)}"
    slot.mkdir(mode=0o711)
    point = slot / "workspace"
    point.mkdir(mode=0o700)
    if libc.mount(bytes(point), bytes(point), None, _MS_BIND, None) != 0:
        shutil.rmtree(slot, ignore_errors=True)
        raise SandboxError("could not bind the ready container's workspace folder onto itself")
    if libc.mount(None, bytes(point), None, _MS_SHARED, None) != 0:
        remove_slot(slot)
        raise SandboxError("could not make the ready container's workspace folder a shared mount")
    return slot


def remove_slot(slot: Path) -> None:
    libc = mounts.syscalls()
    point = bytes(slot / "workspace")
    for _mount in range(3):  # the run's filesystem (when its volume was not removed), then the bind
        if not libc or libc.umount2(point, 2) != 0:  # MNT_DETACH: the container may still hold it
            break
    shutil.rmtree(slot, ignore_errors=True)


def discard(ready: Ready) -> None:
    """Remove a ready container and its slot (in the removal thread)."""
    with contextlib.suppress(OSError):
        ready.connection.close()
    remove_soon(ready.container, ready.slot_dir)


class Pool:
    """The process's ready containers, by creation options (one pool for every backend made here: callers make a
    backend per run). `make()`, given with each take, creates and starts one (slow)."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self.size = size
        self.cond = threading.Condition()
        self.ready: list[Ready] = []
        self.filling: dict[tuple, int] = {}
        self.asked: Counter[tuple] = Counter()

    def take(self, key: tuple, needed_until: float, make: Callable[[], Ready]) -> Ready:
        """A ready container for `key` whose deadline covers `needed_until` (epoch seconds): one waiting, the one
        being made for this key (it is ahead of a new one), or else one made now. Then another is made behind it,
        once the key has been asked for before, until AHEAD are ready or on their way: options seen once (a
        rollout's own socket bound in) never leave a container started for nothing."""
        with self.cond:
            self.asked[key] += 1
            while True:
                found = self._pop(key, needed_until)
                if found or not self.filling.get(key):
                    break
                self.cond.wait()
            more = 0
            if self.asked[key] > 1:
                have = self.filling.get(key, 0) + sum(1 for ready in self.ready if ready.key == key)
                more = max(0, min(AHEAD, self.size) - have)
                if more:
                    self.filling[key] = self.filling.get(key, 0) + more
        for _ in range(more):
            threading.Thread(target=self._fill, args=(key, make), name="sandbox-docker-ready", daemon=True).start()
        return found or make()

    def _pop(self, key: tuple, needed_until: float) -> Ready | None:
        now = time.monotonic()
        for ready in list(self.ready):
            if ready.key == key and ready.deadline >= needed_until and now - ready.made < READY_SECONDS:
                self.ready.remove(ready)
                return ready
        return None

    def _fill(self, key: tuple, make: Callable[[], Ready]) -> None:
        made = None
        try:
            made = make()
        except Exception:  # the next run makes its own and says why
            log.exception("could not make a ready Docker container")
        with self.cond:
            self.filling[key] -= 1
            if not self.filling[key]:
                del self.filling[key]
            dropped = []
            if made:
                self.ready.append(made)
                now = time.monotonic()
                dropped = [r for r in self.ready if now - r.made >= READY_SECONDS]
                dropped += self.ready[: max(0, len(self.ready) - len(dropped) - self.size)]
                self.ready = [r for r in self.ready if r not in dropped]
            self.cond.notify_all()
        for ready in dropped:
            discard(ready)

    def wait_filled(self) -> None:
        """Until no container is being made (benches and tests: the next run then finds one waiting)."""
        with self.cond:
            while self.filling:
                self.cond.wait()

    def close(self) -> None:
        with self.cond:
            while self.filling:
                self.cond.wait()
            ready, self.ready = self.ready, []
        for entry in ready:
            discard(entry)


def remove_now(container: Any, slot: Path | None = None, disk: volume.Volume | None = None) -> None:
    """The container first (its mounts go with it), then the run's filesystem, then the slot it was mounted on."""
    import docker.errors

    try:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    finally:
        if disk:
            disk.remove()
        if slot:
            remove_slot(slot)


def _container_remover() -> volume.Remover:
    return volume.Remover(
        "sandbox-docker-removal", lambda job: remove_now(*job), lambda job: f"the sandbox container {job[0].name}"
    )


_remover = _container_remover()
pool = Pool()


def _after_fork_in_child() -> None:
    # The parent's threads are not in the child, and its ready containers are the parent's (its owner label).
    global _remover, pool
    _remover = _container_remover()
    pool = Pool()


os.register_at_fork(after_in_child=_after_fork_in_child)


def remove_soon(container: Any, slot: Path | None = None, disk: volume.Volume | None = None) -> None:
    """remove_now() in this process's removal thread (or now, when volume.REMOVAL_BACKLOG wait there). Nothing of a
    run's result depends on it: the command has ended and its workspace has been copied back."""
    if not _remover.put((container, slot, disk)):
        remove_now(container, slot, disk)


def settle() -> None:
    """Remove every ready container of this process, and wait until every container handed over is removed."""
    pool.close()
    _remover.settle()


# After volume's (imported above): so it runs first, and the volumes it hands over are gone.
process_exit.on_exit(settle)
