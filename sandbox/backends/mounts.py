"""Mounting a workspace's filesystem image with the kernel's calls directly, not through mount(8) and umount(8): two
programs fewer per run, and no libmount reading the mount table and locking /run/mount/utab each time. Where any step
is refused (no libc mount, no loop-control, an old kernel without LOOP_CONFIGURE) these return False and the caller
runs the programs instead (sandbox.backends.volume).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
from pathlib import Path

from ..errors import SandboxError

_LOOP_CTL_GET_FREE = 0x4C82
_LOOP_CONFIGURE = 0x4C0A
_LO_FLAGS_AUTOCLEAR = 4
_MS_NOSUID, _MS_NODEV = 2, 4
# struct loop_config: fd, block_size, struct loop_info64 (lo_flags at offset 52 of it; 232 bytes), 8 reserved u64.
_LOOP_CONFIG = struct.Struct("=II52xI176x64x")
_libc = None


def syscalls():
    """libc with mount(2) and umount2(2) typed, loaded once a process; False where it cannot be had."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
            _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        except (OSError, AttributeError):
            _libc = False
    return _libc


def loop_mount(image: Path, mount_point: Path) -> bool:
    """Attach `image` to a free loop device (detached again by the kernel once unmounted) and mount it ext4,
    nosuid, nodev. False, with nothing left attached, when this path is not available here."""
    libc = syscalls()
    if not libc:
        return False
    try:
        control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
        try:
            for _attempt in range(16):  # another process may take the free device first: ask again
                number = fcntl.ioctl(control, _LOOP_CTL_GET_FREE)
                try:
                    device = os.open(f"/dev/loop{number}", os.O_RDWR | os.O_CLOEXEC)
                except OSError:
                    return False  # no device node (a container without devtmpfs): mount(8) knows what to do
                try:
                    try:
                        fcntl.ioctl(device, _LOOP_CONFIGURE, _LOOP_CONFIG.pack(backing, 0, _LO_FLAGS_AUTOCLEAR))
                    except OSError as exc:
                        if exc.errno == errno.EBUSY:
                            continue
                        return False
                    # Mounted before the device is closed: with autoclear, its last close detaches it.
                    if (
                        libc.mount(
                            f"/dev/loop{number}".encode(), bytes(mount_point), b"ext4", _MS_NOSUID | _MS_NODEV, None
                        )
                        == 0
                    ):
                        return True
                    code = ctypes.get_errno()
                    raise SandboxError(f"could not mount the workspace's filesystem: {os.strerror(code)}")
                finally:
                    os.close(device)
            return False
        finally:
            os.close(backing)
    finally:
        os.close(control)


def umount(mount_point: Path) -> bool:
    """umount2(2), lazily when still busy; False when the call is not available here (umount(8) then)."""
    libc = syscalls()
    if not libc:
        return False
    if libc.umount2(bytes(mount_point), 0) == 0:
        return True
    if ctypes.get_errno() == errno.EBUSY:  # a process of ours still holding a file: detach it now, free it later
        return libc.umount2(bytes(mount_point), 2) == 0  # MNT_DETACH
    return False
