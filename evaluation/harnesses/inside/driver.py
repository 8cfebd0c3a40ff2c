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
"""

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


def run(step):
    """Run one command in its own process group; kill the group at its deadline. Returns what happened."""
    started = time.monotonic()
    env = dict(os.environ)
    env.update(step.get("env") or {})
    with open(step["stdout"], "wb") as out, open(step["stderr"], "wb") as err:
        proc = subprocess.Popen(
            step["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=step.get("cwd"), env=env,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=step["timeout"])
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(proc)
    # Whatever the agent left running in its group (background jobs of its exec tool) goes now.
    kill_group(proc.pid, signal.SIGKILL)
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
    bridge = spec.get("bridge")
    if bridge:
        serve_bridge(int(bridge["port"]), bridge["socket"])
    result = run(spec["agent"])
    # The largest resident set of any one process the agent ran (kB); for Node that is the whole agent.
    result["max_rss_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["after"] = [run(step) for step in spec.get("after") or []]
    with open(spec["result"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
