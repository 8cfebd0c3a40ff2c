"""The Docker backend's ready containers (sandbox.backends.docker_pool): started before their run, each used once,
removed in the background. A command must find the same sandbox as in a throw-away container, and nothing of an
earlier run."""

from __future__ import annotations

import json

import pytest

from sandbox import Limits, Status, Workspace
from sandbox.backends import docker_pool
from sandbox.backends.docker import DockerBackend

from .test_docker_hostile import sandbox_containers, volumes_of_this_process

pytestmark = pytest.mark.docker

LAUNCHED_BY_THE_READY_SHELL = "/sbin/docker-init -- /bin/sh -s"


def pid1(backend: DockerBackend, workspace: Workspace) -> str:
    result = backend.run("tr '\\0' ' ' < /proc/1/cmdline", workspace)
    assert result.ok, result
    return result.stdout.strip()


def test_a_run_after_a_hostile_run_sees_none_of_its_leftovers(docker_sandbox, workspace):
    hostile = (
        "setsid sleep 600 </dev/null >/dev/null 2>&1 & "
        "echo left > /tmp/left; echo left > /root/left; echo left > /dev/shm/left; mkfifo /tmp/fifo; "
        "echo kept > kept.txt"
    )
    assert docker_sandbox.run(hostile, workspace).ok
    look = (
        "import json, os; "
        "print(json.dumps({'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
        "'tmp': os.listdir('/tmp'), 'root': os.listdir('/root'), 'shm': os.listdir('/dev/shm'), "
        "'pid1': open('/proc/1/cmdline').read().replace(chr(0), ' ').strip(), 'kept': open('kept.txt').read()}))"
    )
    result = docker_sandbox.run(["python3", "-c", look], workspace)
    assert result.ok, result
    seen = json.loads(result.stdout)
    assert seen["pid1"] == LAUNCHED_BY_THE_READY_SHELL  # it did run in a ready container
    assert len(seen["pids"]) == 2 and seen["pids"][0] == 1  # Docker's init and the command: no sleep
    assert (seen["tmp"], seen["root"], seen["shm"]) == ([], [".openclaw"], [])  # its workspace mount point
    assert seen["kept"] == "kept\n"  # the workspace is what the run before left, as it should be


def test_a_ready_container_gives_the_command_the_same_sandbox_as_a_throwaway_one(docker_sandbox, workspace):
    # Everything a command can see of its limits, identity and filesystems, minus what names the run itself (mount
    # sources and ids, which loop device holds the workspace). Under a ready container's workspace lies the empty
    # folder it was started on, covered by the workspace's filesystem (no capability here can unmount it).
    look = r"""
import json, os, resource
def status():
    keep = ("Uid", "Gid", "Groups", "Cap", "NoNewPrivs", "Seccomp")
    return [line for line in open("/proc/self/status").read().splitlines() if line.startswith(keep)]
def mounts():  # what is seen at each mount point: the last mount made there
    return {f[4]: [f[5], f[f.index("-") + 1]] for f in map(str.split, open("/proc/self/mountinfo"))}
def cgroup(path):
    return open("/sys/fs/cgroup/" + path).read().strip()
print(json.dumps({
    "env": dict(os.environ), "cwd": os.getcwd(), "argv": __import__("sys").argv, "umask": os.umask(0),
    "status": status(), "limits": open("/proc/self/limits").read(), "mounts": mounts(),
    "fds": sorted(os.listdir("/proc/self/fd")), "stdin": os.readlink("/proc/self/fd/0"),
    "ppid": os.getppid(), "hostname": os.uname().nodename,
    "cgroups": [cgroup("memory/memory.limit_in_bytes"), cgroup("memory/memory.memsw.limit_in_bytes"),
                cgroup("pids/pids.max")],
}))
"""
    (workspace.root / "sub").mkdir()
    limits = Limits(wall_seconds=60, memory_bytes=300 << 20, max_processes=40, address_space_bytes=4 << 30)
    args = ["python3", "-c", look, "it's", "a $(word)", "two\nlines", "*"]
    env = {"QUOTED": "a 'b' \"c\" $HOME `x`", "EMPTY": "", "LINES": "1\n2"}
    seen = {}
    for ready in (True, False):
        backend = DockerBackend(ready_containers=ready)
        result = backend.run(args, workspace, env=env, limits=limits, cwd="sub")
        assert result.status is Status.OK, result
        seen[ready] = json.loads(result.stdout)
    assert seen[True] == seen[False]
    assert seen[True]["argv"][1:] == args[3:] and seen[True]["env"]["QUOTED"] == env["QUOTED"]


def test_a_ready_container_is_used_only_with_the_limits_it_was_made_with(docker_sandbox, workspace):
    read = "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max"
    for memory, processes in [(300 << 20, 40), (200 << 20, 30), (300 << 20, 40)]:
        result = docker_sandbox.run(read, workspace, limits=Limits(memory_bytes=memory, max_processes=processes))
        assert result.ok and result.stdout.split() == [str(memory), str(processes)], result


def test_without_ready_containers_each_command_gets_a_container_made_for_it(docker_sandbox, workspace):
    assert (
        pid1(DockerBackend(ready_containers=False), workspace)
        == "/sbin/docker-init -- /bin/sh -c tr '\\0' ' ' < /proc/1/cmdline"
    )
    # A working directory Docker would make (missing in the workspace) is left to a throw-away container too.
    result = docker_sandbox.run("pwd; tr '\\0' ' ' < /proc/1/cmdline", workspace, cwd="not/there")
    assert result.ok and result.stdout.startswith("/workspace/not/there\n/sbin/docker-init -- /bin/sh -c"), result


def test_every_container_and_workspace_filesystem_is_gone_once_settled(docker_sandbox):
    for n in range(4):
        workspace = Workspace.create({"n.txt": f"{n}\n".encode()})
        try:
            result = docker_sandbox.run("cat n.txt; echo more >> n.txt", workspace)
            assert result.ok and result.stdout == f"{n}\n", result
            assert (workspace.root / "n.txt").read_text() == f"{n}\nmore\n"
        finally:
            workspace.cleanup()
    assert sandbox_containers(docker_sandbox), "a ready container waits for the next run"
    docker_pool.settle()
    assert sandbox_containers(docker_sandbox) == []
    assert volumes_of_this_process() == []


def test_backends_made_per_run_share_the_process_ready_containers_and_never_pile_them_up(docker_sandbox):
    # Callers make a backend per run (tasks.verification.checker_backend): the ready containers are the process's.
    docker_pool.settle()
    common, once = Limits(max_processes=40), Limits(max_processes=77)

    def ready_for(limits: Limits) -> int:
        docker_pool.pool.wait_filled()
        return sum(1 for r in docker_pool.pool.ready if r.key[1] == repr(limits))

    for n in range(3):
        if n == 2:  # asked for twice before: AHEAD were made behind the second run
            assert ready_for(common) == docker_pool.AHEAD == 2
        workspace = Workspace.create({})
        try:
            assert pid1_with(DockerBackend(), workspace, common) == LAUNCHED_BY_THE_READY_SHELL
        finally:
            workspace.cleanup()
    workspace = Workspace.create({})
    try:
        assert pid1_with(DockerBackend(), workspace, once) == LAUNCHED_BY_THE_READY_SHELL
    finally:
        workspace.cleanup()
    assert ready_for(once) == 0  # options seen once (a rollout's own socket bound in) leave none started for nothing
    assert ready_for(common) == 2 and len(docker_pool.pool.ready) <= docker_pool.POOL_SIZE
    docker_pool.settle()
    assert sandbox_containers(docker_sandbox) == []


def test_two_kinds_of_run_taken_in_turn_each_keep_their_ready_containers(docker_sandbox):
    # A worker's checker runs and another kind of run in turn: each kind's containers made ahead stay for it.
    docker_pool.settle()
    kinds = Limits(max_processes=41), Limits(max_processes=42)
    for _round in range(2):
        for limits in kinds:
            workspace = Workspace.create({})
            try:
                assert pid1_with(DockerBackend(), workspace, limits) == LAUNCHED_BY_THE_READY_SHELL
            finally:
                workspace.cleanup()
    docker_pool.pool.wait_filled()
    ready = [r.key[1] for r in docker_pool.pool.ready]
    assert sorted(ready) == sorted([repr(kinds[0])] * docker_pool.AHEAD + [repr(kinds[1])] * docker_pool.AHEAD)
    docker_pool.settle()
    assert sandbox_containers(docker_sandbox) == []


def pid1_with(backend: DockerBackend, workspace: Workspace, limits: Limits) -> str:
    result = backend.run("tr '\\0' ' ' < /proc/1/cmdline", workspace, limits=limits)
    assert result.ok, result
    return result.stdout.strip()
