"""A size-limited filesystem for the workspace during one run: disk use bounded by the kernel, not by watching.

The sandbox never writes the host's workspace folder directly. For each run the backend makes an ext4 image of the
workspace's current size plus Limits.disk_bytes (a sparse file: only what is written takes host disk), fills it from
the folder at format time (`mke2fs -d`, no mount needed for that), loop-mounts it nosuid,nodev and binds the mount
into the sandbox. A command that writes past the room left gets ENOSPC from the kernel, however many processes or
files it uses. After the run the folder is made an exact copy of the filesystem (links kept as links, never
followed), then the image is unmounted and deleted: no more than the image's size ever reached the host's disk.
Whether the filesystem was full is read from the filesystem itself (statvfs: no free blocks, or no free inodes).

Needs root (mount) and mke2fs. Where either is missing, available() says why and the backend runs on the folder
itself, listing disk_bytes in ExecResult.unenforced. Volumes of processes that died mid-run (their pid and start time
name their folder) are unmounted and deleted by the next volume made here.

Unmounting is the slowest step of a run (the kernel writes the filesystem back to its image and detaches the loop
device: 15-80 ms, nearly all of it waiting) and nothing of the result depends on it once the folder holds the copy
and the sandbox is gone. So remove_soon() hands a finished volume to one thread of this process that unmounts and
deletes it: at most REMOVAL_BACKLOG wait there (past that the caller removes its own), and settle(), also called at
exit, waits for all of them.

Making and removing a volume still cost more CPU than the rest of the sandbox's own work, so the bubblewrap backend
takes its volumes with take() and hands them back with release(): a volume whose run ended cleanly is emptied and
kept mounted for this process's next run of the same size class, room and owner, which is filled by copying instead
of mke2fs (see "a pool of mounted volumes" below for when a volume is kept and when it is not).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..limits import MiB
from . import mounts, process_exit
from .cgroups import _start_time

SCRATCH_ENV = "CLAWGYM_SANDBOX_SCRATCH"
BLOCK = 4096
_RUN_NAME = re.compile(r"^run-(\d+)-(\d+)-[0-9a-f]+$")
# Under the size asked for, ext4 keeps inode tables, bitmaps and directory blocks (about 1/64 of the image with
# 16 KiB per inode) plus a few fixed MiB; the image is made that much larger so the command really gets its room.
_OVERHEAD_FRACTION = 1 / 40
_OVERHEAD_FIXED = 8 * MiB


def scratch_dir() -> Path:
    return Path(os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / "clawgym-volumes")


def available() -> tuple[bool, str]:
    """Whether volumes can be made here, and if not, why (a sentence)."""
    if os.geteuid() != 0:
        return False, "a size-limited workspace needs root (to loop-mount its filesystem)"
    if not shutil.which("mke2fs", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        return False, "mke2fs is missing (install e2fsprogs: scripts/system-deps.sh)"
    if not os.path.exists("/dev/loop-control"):
        return False, "no loop devices on this host (/dev/loop-control)"
    return True, ""


def _tree_bytes(root: Path) -> tuple[int, int]:
    """(bytes the tree takes in whole blocks, number of entries), without following links."""
    total, count = BLOCK, 1
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                count += 1
                st = entry.stat(follow_symlinks=False)
                total += max(BLOCK, -(-st.st_size // BLOCK) * BLOCK)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
    return total, count


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SandboxError(f"could not {what}: {(done.stderr or done.stdout).strip()}")


class Volume:
    """One run's workspace filesystem. `mount_point` is what the sandbox sees as the workspace."""

    def __init__(
        self,
        source: Path,
        disk_bytes: int,
        uid: int,
        gid: int,
        mount_point: Path | None = None,
        *,
        pooled_for: int | None = None,
    ) -> None:
        """mount_point: an empty folder of the caller's to mount the filesystem on (left in place by remove());
        by default one of the volume's own. pooled_for: make the filesystem empty, sized as for a workspace taking
        that many bytes (a pool's volume, see take()); the caller then fills it."""
        self.source = source
        self.pool_key: tuple[int, int, int, int] | None = None
        self.empty_free: tuple[int, int] | None = None  # (free blocks, free inodes) as made, for a pooled volume
        base = scratch_dir()
        base.mkdir(mode=0o711, exist_ok=True)
        remove_stale(base)
        self.dir = base / f"run-{os.getpid()}-{_start_time(os.getpid())}-{secrets.token_hex(4)}"
        self.dir.mkdir(mode=0o711)
        self.image = self.dir / "disk.img"
        self.own_mount_point = mount_point is None
        self.mount_point = self.dir / "workspace" if mount_point is None else mount_point
        self.mounted = False
        try:
            if pooled_for is None:
                with _locked(source, fcntl.LOCK_SH):  # not while another run copies its result back into the folder
                    self._fill(source, disk_bytes, uid, gid)
            else:
                self._format(pooled_for, pooled_for // BLOCK, disk_bytes, uid, gid, None)
            if self.own_mount_point:
                self.mount_point.mkdir(mode=0o700)
            if not mounts.loop_mount(self.image, self.mount_point):
                _run(
                    ["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", str(self.image), str(self.mount_point)],
                    "mount the workspace's filesystem",
                )
            self.mounted = True
            with contextlib.suppress(FileNotFoundError):
                (self.mount_point / "lost+found").rmdir()
            if pooled_for is not None:
                st = os.statvfs(self.mount_point)
                self.empty_free = (st.f_bfree, st.f_ffree)
                self.pool_key = (pooled_for, disk_bytes, uid, gid)
                return
            self._own_root(source, uid, gid)
        except BaseException:
            self.remove()
            raise

    def _own_root(self, source: Path, uid: int, gid: int) -> None:
        os.chown(self.mount_point, uid, gid)
        os.chmod(self.mount_point, stat.S_IMODE(os.lstat(source).st_mode) | stat.S_IRWXU)

    def _fill(self, source: Path, disk_bytes: int, uid: int, gid: int) -> None:
        """Make the image: the folder's files, owners and modes, with disk_bytes of room besides."""
        used, entries = _tree_bytes(source)
        self._format(used, entries, disk_bytes, uid, gid, source)

    def _format(self, used: int, entries: int, disk_bytes: int, uid: int, gid: int, source: Path | None) -> None:
        """mke2fs an image for `used` bytes in `entries` entries plus disk_bytes of room, filled from `source`."""
        size = used + disk_bytes
        size += int(size * _OVERHEAD_FRACTION) + _OVERHEAD_FIXED
        size = -(-size // BLOCK) * BLOCK
        with open(self.image, "wb") as image:
            image.truncate(size)
        inodes = max(entries + 1024, size // (16 * 1024))
        # No journal (nothing to recover: the image lives for one run), no reserved blocks, no lost+found clutter
        # left in the workspace (removed after mounting).
        _run(
            [
                "mke2fs",
                "-q",
                "-F",
                "-t",
                "ext4",
                "-b",
                str(BLOCK),
                "-m",
                "0",
                "-N",
                str(inodes),
                "-O",
                "^has_journal,^resize_inode",
                "-E",
                f"nodiscard,root_owner={uid}:{gid}",
                *(["-d", str(source)] if source else []),
                str(self.image),
            ],
            "make the workspace's filesystem",
        )

    def full(self) -> bool:
        """No room left: no free inodes (a command that made a million empty files), or under 1% of the blocks
        (at least 1 MiB) free. Not zero: ext4 answers ENOSPC while it still holds back a reserve for the metadata
        of delayed writes (checked: 247 of 18,545 blocks free after a writer got ENOSPC)."""
        st = os.statvfs(self.mount_point)
        margin = max(1 * MiB, st.f_blocks * st.f_frsize // 100)
        return st.f_bavail * st.f_frsize < margin or st.f_favail == 0

    def copy_back(self) -> None:
        """Make the workspace folder an exact copy of the filesystem the run left.

        Runs that share one workspace folder each start from it as it was and do not see each other's writes; their
        copies back are serialised by a lock on the folder, so the last to finish leaves its whole result."""
        try:
            with _locked(self.source, fcntl.LOCK_EX):
                self._replace_source()
        except OSError as exc:
            raise SandboxError(f"could not copy the workspace back from its filesystem: {exc}") from exc

    def _replace_source(self) -> None:
        _clear(self.source)
        _copy_tree(str(self.mount_point), str(self.source))

    def remove(self) -> None:
        if self.mounted:
            if not mounts.umount(self.mount_point):
                done = subprocess.run(["umount", str(self.mount_point)], capture_output=True, stdin=subprocess.DEVNULL)
                if done.returncode != 0:  # still busy (a process of ours holding a file): detach now, free it later
                    subprocess.run(
                        ["umount", "-l", str(self.mount_point)], capture_output=True, stdin=subprocess.DEVNULL
                    )
            self.mounted = False
        shutil.rmtree(self.dir, ignore_errors=True)


REMOVAL_BACKLOG = 8


class Remover:
    """A thread of this process that does removals handed to it (`remove(job)` for each, in order), started on first
    use: at most REMOVAL_BACKLOG wait (past that `put` says no and the caller removes its own). A forked child makes
    its own (it has none of its parent's threads)."""

    def __init__(self, name: str, remove: Callable[[Any], None], what: Callable[[Any], str]) -> None:
        self.name, self.remove, self.what = name, remove, what
        self.cond = threading.Condition()
        self.waiting: list[Any] = []
        self.busy = 0  # handed over and not removed yet
        self.thread: threading.Thread | None = None

    def put(self, job: Any) -> bool:
        with self.cond:
            if self.busy >= REMOVAL_BACKLOG:
                return False
            self.busy += 1
            self.waiting.append(job)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self.thread.start()
            self.cond.notify_all()
        return True

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.waiting:
                    self.cond.wait()
                job = self.waiting.pop(0)
            try:
                self.remove(job)
            except Exception:  # never end the thread: what it leaves, remove_stale() takes once this process is gone
                logging.getLogger("sandbox").exception("could not remove %s", self.what(job))
            finally:
                with self.cond:
                    self.busy -= 1
                    self.cond.notify_all()

    def settle(self) -> None:
        with self.cond:
            while self.busy:
                self.cond.wait()


def _volume_remover() -> Remover:
    return Remover("sandbox-volume-removal", Volume.remove, lambda vol: f"the workspace volume {vol.dir}")


_remover = _volume_remover()


def _new_remover() -> None:
    global _remover
    _remover = _volume_remover()


os.register_at_fork(after_in_child=_new_remover)


def remove_soon(vol: Volume) -> None:
    """Unmount and delete `vol` in this process's removal thread (or now, when REMOVAL_BACKLOG are waiting)."""
    if not _remover.put(vol):
        vol.remove()


def settle() -> None:
    """Wait until every volume handed to remove_soon() is unmounted and deleted."""
    _remover.settle()


# --- a pool of mounted volumes, emptied and filled again -----------------------------------------------------------
#
# Making a volume (mke2fs, a loop device, a mount) and removing it (unmount, detach, delete) cost about 8-12 ms of CPU
# a run with runs side by side on two cores, more than the rest of the sandbox's own work. A volume whose run ended
# cleanly (the sandbox's init gone, so no process of it is left to touch the filesystem again) is emptied and kept
# mounted for the next run of this process with a workspace of the same size class, room and owner: the same
# filesystem size as a new one (its workspace size rounded up to POOL_GRANULE, so at most that much more room), at
# least as many inodes, and only when emptying left it exactly as free as it was made (blocks and inodes): anything
# the last run left that emptying did not reach keeps the volume out of the pool. Up to POOL_ENV idle volumes a
# process (default 8, 0: none); exit, a failed mount (no free loop device) and drain() unmount them.

POOL_ENV = "CLAWGYM_SANDBOX_VOLUME_POOL"
POOL_GRANULE = 1 * MiB
# Larger workspaces get a volume of their own, as before.
POOL_MAX_USED = 16 * MiB
# A run that left more than this many files is not emptied on the caller's time: its volume is removed in the
# background instead.
_POOL_MAX_LEFT_INODES = 2000


def pool_capacity() -> int:
    try:
        return max(0, int(os.environ.get(POOL_ENV, "8")))
    except ValueError:
        return 8


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[Volume] = []

    def pop(self, key: tuple) -> Volume | None:
        with self.lock:
            for n, vol in enumerate(self.idle):
                if vol.pool_key == key:
                    return self.idle.pop(n)
        return None

    def push(self, vol: Volume) -> Volume | None:
        """Keep `vol`; returns the volume that no longer fits (the oldest idle one, or `vol`), or None."""
        with self.lock:
            self.idle.append(vol)
            return self.idle.pop(0) if len(self.idle) > pool_capacity() else None

    def take_all(self) -> list[Volume]:
        with self.lock:
            found, self.idle = self.idle, []
        return found


_pool = _Pool()


def _new_pool() -> None:
    global _pool
    _pool = _Pool()  # a forked child's: its parent's idle volumes stay the parent's


os.register_at_fork(after_in_child=_new_pool)


def take(source: Path, disk_bytes: int, uid: int, gid: int) -> Volume:
    """A volume holding a copy of `source` with disk_bytes of room, as Volume(): an idle one of this process's pool
    when one fits, filled again; else a new one. Hand it back with release()."""
    used, _entries = _tree_bytes(source)
    if used > POOL_MAX_USED or not pool_capacity():
        return Volume(source, disk_bytes, uid, gid)
    used = -(-used // POOL_GRANULE) * POOL_GRANULE
    vol = _pool.pop((used, disk_bytes, uid, gid))
    if vol is None:
        try:
            vol = Volume(source, disk_bytes, uid, gid, pooled_for=used)
        except SandboxError:
            if not drain():  # the pool's idle volumes may hold every loop device there is
                raise
            vol = Volume(source, disk_bytes, uid, gid, pooled_for=used)
    vol.source = source
    try:
        with _locked(source, fcntl.LOCK_SH):  # not while another run copies its result back into the folder
            _copy_tree(str(source), str(vol.mount_point))
        vol._own_root(source, uid, gid)
    except BaseException:
        remove_soon(vol)
        raise
    return vol


def release(vol: Volume, *, sandbox_gone: bool) -> None:
    """After a run on `vol` (its result copied back, or not wanted): back to the pool, emptied, when it came from
    there, `sandbox_gone` (nothing of the run can touch it any more) and emptying leaves it as made; otherwise
    unmounted and deleted as remove_soon() does."""
    if vol.pool_key is None or not sandbox_gone or not vol.mounted or not pool_capacity():
        remove_soon(vol)
        return
    try:
        st = os.statvfs(vol.mount_point)
        if vol.empty_free[1] - st.f_ffree > _POOL_MAX_LEFT_INODES:
            remove_soon(vol)
            return
        _empty(vol.mount_point)
        st = os.statvfs(vol.mount_point)
    except OSError:
        remove_soon(vol)
        return
    if (st.f_bfree, st.f_ffree) != vol.empty_free:
        remove_soon(vol)
        return
    dropped = _pool.push(vol)
    if dropped is not None:
        remove_soon(dropped)


def idle() -> list[Path]:
    """The folders of this process's idle pooled volumes, oldest first."""
    with _pool.lock:
        return [vol.dir for vol in _pool.idle]


def drain() -> int:
    """Unmount and delete every idle volume of this process's pool; returns how many there were."""
    idle = _pool.take_all()
    for vol in idle:
        vol.remove()
    return len(idle)


def _clear(folder: Path) -> None:
    """Delete everything in `folder`, links not followed."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _empty(folder: Path) -> None:
    """_clear() and the extended attributes of the folder itself."""
    _clear(folder)
    for name in os.listxattr(folder, follow_symlinks=False):
        os.removexattr(folder, name, follow_symlinks=False)


def _at_exit() -> None:
    drain()
    settle()


process_exit.on_exit(_at_exit)


@contextlib.contextmanager
def _locked(folder: Path, how: int):
    """flock on the folder itself: shared while a run's image is filled from it, exclusive while one is copied back."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # and with it the lock


def remove_stale(base: Path) -> None:
    """Unmount and delete the volumes of processes that are gone."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        match = _RUN_NAME.match(name)
        if not match or _start_time(int(match[1])) == int(match[2]):
            continue
        mount_point = base / name / "workspace"
        # Up to three mounts stacked there (the Docker backend's ready containers: a shared bind of the folder onto
        # itself, the workspace's filesystem on top); a bind of the same filesystem is no mount to os.path.ismount,
        # so umount(8) says when nothing is left.
        for _mount in range(3):
            done = subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                break
        if not os.path.ismount(mount_point):
            shutil.rmtree(base / name, ignore_errors=True)


def _copy_tree(source: str, target: str) -> None:
    """Copy folders, files, symlinks and fifos with their modes, owners and times; sockets and devices are left out
    (a command cannot make devices in the sandbox, and a socket is nothing without its process)."""
    stack = [(source, target)]
    folders: list[tuple[str, os.stat_result]] = []
    while stack:
        src_dir, dst_dir = stack.pop()
        with os.scandir(src_dir) as entries:
            for entry in entries:
                src, dst = entry.path, os.path.join(dst_dir, entry.name)
                st = entry.stat(follow_symlinks=False)
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    os.mkdir(dst, 0o700)
                    stack.append((src, dst))
                    folders.append((dst, st))
                    continue
                if stat.S_ISLNK(mode):
                    os.symlink(os.readlink(src), dst)
                elif stat.S_ISREG(mode):
                    with open(src, "rb") as reader, open(dst, "xb") as writer:
                        shutil.copyfileobj(reader, writer, 1 * MiB)
                elif stat.S_ISFIFO(mode):
                    os.mkfifo(dst)
                else:
                    continue
                _copy_metadata(dst, st)
    # Folders last, deepest first: a read-only folder must be filled before its mode is set.
    for dst, st in reversed(folders):
        _copy_metadata(dst, st)
    _copy_metadata(target, os.lstat(source))


def _copy_metadata(path: str, st: os.stat_result) -> None:
    os.chown(path, st.st_uid, st.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(path, stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
