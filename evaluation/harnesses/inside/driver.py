#!/usr/bin/env python3
"""Runs one agent inside the sandbox: the loopback bridge to the proxy, the agent under a deadline, then its
follow-up steps (e.g. dumping OpenClaw's transcript). Standalone: the system python3 and its standard library only.

    python3 driver.py SPEC.json

SPEC = {
  "bridge": {"port": 18789, "socket": "/run/clawgym/proxy.sock"},   # 127.0.0.1:port inside -> Unix socket
  "agent": {"argv": [...], "env": {...}, "cwd": "...", "timeout": 600, "stdout": PATH, "stderr": PATH},
  "after": [{"argv": [...], "timeout": 60, "stdout": PATH, "stderr": PATH}, ...],
  "result": PATH
}

The sandbox has a network namespace of its own with only a loopback interface: the agent's one way out is the
port this bridge listens on, and the Unix socket behind it leads to the host's proxy relay, which only passes
OpenAI API requests of this rollout to the recording proxy. The result file holds
{"returncode", "timed_out", "signal", "seconds", "max_rss_kb", "after": [{"returncode", "timed_out", "seconds"}]}.

The agent runs as this driver's uid and may write anywhere this driver writes, so what the driver records is only
worth something once nothing of the agent is left to rewrite it: with "pid_namespace": true (the sandbox has a PID
namespace of its own, whose init is this driver's parent) every other process of the sandbox is killed after each
step, not only the step's process group (a `setsid` daemon the agent started leaves that group), and the result file
is written after that, as a new file (never through a link the agent left in its place). The driver also makes
itself undumpable, so that a process of the agent (same uid) cannot ptrace it or read its memory.
"""

import ctypes
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL of a process group past its deadline
CHUNK = 64 * 1024
KILL_ALL_SECONDS = 10.0  # for every process of the sandbox to be gone after a step
PR_SET_DUMPABLE = 4


def pipe(source, target):
    """Copy bytes one way until either side closes, then half-close the other side."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve_bridge(port, socket_path):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)

    def handle(client):
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(socket_path)
        except OSError:
            client.close()
            upstream.close()
            return
        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def accept_loop():
        while True:
            client, _ = listener.accept()
            threading.Thread(target=handle, args=(client,), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()


def run(step, kill_all=False):
    """Run one command in its own process group; kill the group at its deadline, and afterwards whatever it left
    running (with kill_all, every other process of the sandbox). Returns what happened."""
    started = time.monotonic()
    env = dict(os.environ)
    env.update(step.get("env") or {})
    with open(step["stdout"], "wb") as out, open(step["stderr"], "wb") as err:
        proc = subprocess.Popen(
            step["argv"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=step.get("cwd"),
            env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=step["timeout"])
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(proc)
    # Whatever the agent left running in its group (background jobs of its exec tool) goes now; with kill_all also
    # what it started elsewhere (a new session, a double fork).
    kill_group(proc.pid, signal.SIGKILL)
    if kill_all:
        kill_everything_else()
    code = proc.returncode
    return {
        "returncode": code if code is None or code >= 0 else 128 - code,
        "signal": -code if code is not None and code < 0 else None,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 3),
    }


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_everything_else():
    """SIGKILL every process of the sandbox's PID namespace but this one and its init, until none is left alive.

    kill(-1) reaches every process this uid may signal except init and the caller, and only inside the caller's PID
    namespace. It is repeated because a process forked while it ran may have escaped it; a killed process counts as
    gone once it is a zombie (it can do nothing more), which this driver's own children stay until reaped here.
    """
    deadline = time.monotonic() + KILL_ALL_SECONDS
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # nothing else left to signal
        reap_children()
        alive = others_alive()
        if not alive:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"driver: processes {alive} of the sandbox outlived SIGKILL for {KILL_ALL_SECONDS} s")
        time.sleep(0.01)


def reap_children():
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def others_alive():
    """Pids of this namespace's processes other than this one and init that are not zombies."""
    me = os.getpid()
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (me, 1):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state not in (b"Z", b"X"):
            alive.append(int(name))
    return alive


def undumpable():
    """Forbid ptrace and /proc/<pid>/mem access to this process by the agent's processes (they share its uid)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SystemExit(f"driver: prctl(PR_SET_DUMPABLE) failed: {os.strerror(ctypes.get_errno())}")


def write_new(path, data):
    """Write `data` as a new regular file at `path`, replacing whatever the agent left there (a link is removed, not
    followed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with open(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def stop_group(proc):
    kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    kill_all = bool(spec.get("pid_namespace"))
    if kill_all and os.getppid() != 1:
        # kill(-1) outside a sandbox's own PID namespace would reach every process of this uid on the host.
        raise SystemExit("driver: the spec asks for a PID namespace of its own, but this driver's parent is no init")
    undumpable()
    bridge = spec.get("bridge")
    if bridge:
        serve_bridge(int(bridge["port"]), bridge["socket"])
    result = run(spec["agent"], kill_all)
    # The largest resident set of any one process the agent ran (kB); for Node that is the whole agent.
    result["max_rss_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["after"] = [run(step, kill_all) for step in spec.get("after") or []]
    write_new(spec["result"], result)


if __name__ == "__main__":
    main()
