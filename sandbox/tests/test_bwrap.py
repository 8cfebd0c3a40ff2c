"""The bubblewrap backend doing ordinary work: mounts, environment, binds, statuses, limits."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from sandbox import OPENCLAW_WORKSPACE_PATH, WORKSPACE_PATH, Limits, SandboxError, Status, Workspace
from sandbox.testing import as_unprivileged

# Positive cases get a generous wall clock: the machine running the tests may be busy.
ROOMY = Limits(wall_seconds=60)


def py(source: str, *args: str) -> list[str]:
    return ["python3", "-c", source, *args]


def test_system_python_runs_in_the_workspace(bwrap, workspace):
    result = bwrap.run(
        py("import os, sys, json; print(json.dumps([sys.executable, os.getcwd(), open('input.txt').read()]))"),
        workspace,
        limits=ROOMY,
    )
    assert result.status is Status.OK, result
    assert result.reason == "exited 0" and result.returncode == 0
    assert json.loads(result.stdout) == ["/usr/bin/python3", WORKSPACE_PATH, "hello\n"]
    assert result.isolated and result.backend == "bwrap"
    assert result.duration > 0


def test_workspace_is_mounted_at_both_paths_and_changes_come_back(bwrap, workspace):
    script = (
        "open('/root/.openclaw/workspace/out.txt', 'w').write('from clawgym path');"
        "print(open('/workspace/out.txt').read());"
        "import os; os.remove('/workspace/input.txt')"
    )
    result = bwrap.run(py(script), workspace, limits=ROOMY)
    assert result.stdout == "from clawgym path\n", result
    diff = workspace.diff()
    assert diff.added["out.txt"].content == b"from clawgym path"
    assert set(diff.deleted) == {"input.txt"}
    assert "__pycache__" not in str(workspace.snapshot().entries)


ETC_SEEN = """
import json, os
mounts = [line.split()[4] for line in open("/proc/self/mountinfo")]
print(json.dumps({
    "listing": sorted(os.listdir("/etc")),
    "files": {name: open("/etc/" + name).read() for name in ("passwd", "group", "hosts", "clawgym-runtime")},
    "modes": {name: oct(os.stat("/etc/" + name).st_mode & 0o777) for name in ("passwd", "group", "hosts")},
    "links": {name: os.readlink("/etc/" + name) for name in ("localtime", "os-release")},
    "mounts_under_etc": sum(m == "/etc" or m.startswith("/etc/") for m in mounts),
    "writable": os.access("/etc", os.W_OK),
}))
"""


def test_etc_is_one_prepared_folder_that_shows_what_file_by_file_binds_showed(bwrap, workspace, monkeypatch):
    from sandbox.backends.bwrap import ETC_FILES, ETC_VIEWS, BwrapBackend

    if not os.access(bwrap.runtime, os.W_OK):
        pytest.skip("the runtime folder is not writable by this user: /etc is bound file by file (tested below)")
    whole = bwrap.run(py(ETC_SEEN), workspace, limits=ROOMY)
    assert whole.status is Status.OK, whole
    views = [p for p in (bwrap.runtime / ETC_VIEWS).iterdir() if not p.name.startswith(".")]
    # A second backend (a second worker) finds the same folder instead of making another.
    assert BwrapBackend()._etc_view() in views

    monkeypatch.setattr(BwrapBackend, "_etc_view", lambda self: None)
    one_by_one = BwrapBackend().run(py(ETC_SEEN), workspace, limits=ROOMY)
    assert one_by_one.status is Status.OK, one_by_one
    whole, one_by_one = json.loads(whole.stdout), json.loads(one_by_one.stdout)
    # One mount against one per file: the runtime's (links are made, not bound) and passwd, group and hosts.
    assert whole.pop("mounts_under_etc") == 1
    assert one_by_one.pop("mounts_under_etc") == 3 + sum(
        (bwrap.runtime / path.lstrip("/")).exists() and not (bwrap.runtime / path.lstrip("/")).is_symlink()
        for path in ETC_FILES
    )
    assert whole == one_by_one
    assert {"passwd", "group", "hosts", "ssl", "ld.so.cache"} <= set(whole["listing"])
    assert whole["modes"] == dict.fromkeys(["passwd", "group", "hosts"], "0o444")
    assert whole["links"]["os-release"] == "../usr/lib/os-release"
    assert not whole["writable"]


def test_shell_string_and_cwd(bwrap, workspace):
    result = bwrap.run("pwd; cat table.csv | wc -l", workspace, cwd="data", limits=ROOMY)
    assert result.stdout.split() == [f"{WORKSPACE_PATH}/data", "2"], result
    result = bwrap.run(["pwd"], workspace, cwd=f"{OPENCLAW_WORKSPACE_PATH}/data", limits=ROOMY)
    assert result.stdout == f"{OPENCLAW_WORKSPACE_PATH}/data\n"


def test_environment_is_the_base_plus_what_is_passed(bwrap, workspace, monkeypatch):
    monkeypatch.setenv("LEAKY_PARENT_VARIABLE", "from the parent")
    result = bwrap.run(
        py("import os, json; print(json.dumps(dict(os.environ)))"), workspace, env={"TASK_ID": "t-1"}, limits=ROOMY
    )
    env = json.loads(result.stdout)
    assert env["TASK_ID"] == "t-1"
    assert env["HOME"] == "/root" and env["CLAWGYM_WORKSPACE"] == WORKSPACE_PATH
    assert env["PATH"] == "/usr/bin:/bin:/usr/sbin:/sbin"
    assert "LEAKY_PARENT_VARIABLE" not in env


def test_bad_env_names_are_refused(bwrap, workspace):
    with pytest.raises(SandboxError, match="invalid environment variable name"):
        bwrap.run(["true"], workspace, env={"A=B": "x"})


def test_runs_unprivileged_without_capabilities(bwrap, workspace):
    script = (
        "import os, socket, json\n"
        "caps = [l.split() for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]\n"
        "print(json.dumps([os.getuid(), [c[1] for c in caps], socket.gethostname()]))\n"
    )
    result = bwrap.run(py(script), workspace, limits=ROOMY)
    uid, caps, hostname = json.loads(result.stdout)
    assert uid != 0
    assert caps == ["0000000000000000"] * 3
    assert hostname == "sandbox"


def test_exit_codes_and_statuses(bwrap, workspace):
    failed = bwrap.run("echo oops >&2; exit 3", workspace, limits=ROOMY)
    assert (failed.status, failed.returncode, failed.reason, failed.stderr) == (
        Status.ERROR,
        3,
        "exit code 3",
        "oops\n",
    )
    missing = bwrap.run(["no-such-program"], workspace, limits=ROOMY)
    assert missing.status is Status.ERROR and missing.returncode == 127
    crashed = bwrap.run(py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), workspace, limits=ROOMY)
    assert crashed.status is Status.KILLED and "SIGSEGV" in crashed.reason


@pytest.fixture
def host_dir():
    """A host folder the sandbox user can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="clawgym-bind-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_read_only_and_writable_binds(bwrap, workspace, host_dir):
    shared = host_dir / "tools"
    shared.mkdir()
    (shared / "tool.txt").write_text("a tool")
    drop = host_dir / "drop"
    drop.mkdir()
    os.chmod(drop, 0o777)
    script = (
        "print(open('/opt/tools/tool.txt').read())\n"
        "try:\n    open('/opt/tools/new', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
        "open('/run/drop/hello', 'w').write('hi')\n"
    )
    result = bwrap.run(
        py(script), workspace, ro_binds=[(shared, "/opt/tools")], extra_binds=[(drop, "/run/drop")], limits=ROOMY
    )
    assert result.stdout == "a tool\nro 30\n", result
    assert (drop / "hello").read_text() == "hi"
    assert sorted(p.name for p in shared.iterdir()) == ["tool.txt"]


@pytest.mark.parametrize("target", ["/workspace", "/root", "/root/.openclaw", "relative", "/a/../b", "/"])
def test_binds_may_not_hide_the_workspace(bwrap, workspace, tmp_path, target):
    with pytest.raises(SandboxError, match="bind target"):
        bwrap.run(["true"], workspace, ro_binds=[(tmp_path, target)])


def test_missing_bind_source_is_an_error(bwrap, workspace, tmp_path):
    with pytest.raises(SandboxError, match="does not exist"):
        bwrap.run(["true"], workspace, ro_binds=[(tmp_path / "nope", "/opt/nope")])


def test_unreachable_bind_source_is_explained(bwrap, workspace, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root caller hands the sandbox to another uid")
    (tmp_path / "private").mkdir()
    with pytest.raises(SandboxError, match="Permission denied .*must be reachable by it"):
        bwrap.run(["true"], workspace, ro_binds=[(tmp_path / "private", "/opt/private")])


def test_setup_failure_raises_with_bubblewraps_message(bwrap, workspace):
    with pytest.raises(SandboxError, match="bubblewrap could not set up the sandbox: bwrap: Can't chdir"):
        bwrap.run(["true"], workspace, cwd="no/such/folder")


def test_wall_clock_timeout(bwrap, workspace):
    result = bwrap.run(py("while True: pass"), workspace, limits=Limits(wall_seconds=1))
    assert result.status is Status.TIMEOUT, result
    assert "wall-clock limit of 1 s" in result.reason
    assert result.returncode is None
    # How soon after the limit the run ends is measured in bench/sandbox_bench.py, not asserted here.


def test_a_wall_clock_shorter_than_the_sandbox_start_is_a_timeout(bwrap, workspace):
    # Killed before bubblewrap even reported its child: the command's limit, not a broken sandbox.
    result = bwrap.run(["sleep", "5"], workspace, limits=Limits(wall_seconds=0.001))
    assert result.status is Status.TIMEOUT and result.returncode is None, result


def test_cpu_time_limit(bwrap, workspace):
    result = bwrap.run(py("while True: pass"), workspace, limits=Limits(wall_seconds=60, cpu_seconds=1))
    assert result.status is Status.TIMEOUT, result
    assert "CPU-time limit of 1 s" in result.reason


# Bounded: asks for at most 2 GiB, 64 MiB at a time, writing every page so an unlimited run would really use it.
MEMORY_HOG = (
    "chunks = []\n"
    "for _ in range(32):\n"
    "    chunk = bytearray(64 << 20)\n"
    "    chunk[::4096] = b'x' * len(range(0, 64 << 20, 4096))\n"
    "    chunks.append(chunk)\n"
)


def test_memory_limit(bwrap, workspace):
    result = bwrap.run(py(MEMORY_HOG), workspace, limits=Limits(wall_seconds=60, memory_bytes=256 << 20))
    assert result.status is Status.OOM, result
    if "memory_bytes" in result.unenforced:  # no cgroup here: each process's address space was the bound
        assert "MemoryError" in result.stderr
    else:  # the run's cgroup: the kernel's OOM killer, counted there, whatever the program printed
        assert "killed by the kernel" in result.reason


def test_an_address_space_limit_applies_on_top(bwrap, workspace):
    limits = Limits(wall_seconds=60, memory_bytes=1 << 30, address_space_bytes=256 << 20)
    result = bwrap.run(py(MEMORY_HOG), workspace, limits=limits)
    assert result.status is Status.OOM and "MemoryError" in result.stderr, result
    assert "memory limit of 268435456 bytes" in result.reason


def test_memory_errors_on_stderr_are_not_oom_when_a_cgroup_is_the_bound(bwrap, workspace):
    result = bwrap.run("echo 'MemoryError: Cannot allocate memory' >&2; exit 1", workspace, limits=ROOMY)
    expected = Status.OOM if "memory_bytes" in result.unenforced else Status.ERROR
    assert result.status is expected, result


def test_shared_memory_mappings_count_too(bwrap, workspace):
    # Anonymous shared mappings escape RLIMIT_DATA; the cgroup (or, without one, the address-space limit) counts them.
    script = "import mmap; m = mmap.mmap(-1, 2 << 30); m[::4096] = b'x' * len(range(0, 2 << 30, 4096))"
    result = bwrap.run(py(script), workspace, limits=Limits(wall_seconds=60, memory_bytes=256 << 20))
    assert result.status is Status.OOM, result


def test_file_size_limit(bwrap, workspace):
    script = "open('big.bin', 'wb').write(b'x' * (2 << 20))"
    result = bwrap.run(py(script), workspace, limits=Limits(wall_seconds=60, max_file_bytes=1 << 20))
    assert result.status is Status.ERROR and "file-size limit" in result.reason, result
    assert (workspace.root / "big.bin").stat().st_size == 1 << 20
    shell = bwrap.run("head -c 2000000 /dev/zero > big2.bin", workspace, limits=Limits(max_file_bytes=1 << 20))
    assert shell.status is Status.KILLED and "SIGXFSZ" in shell.reason, shell


def test_tmpfs_is_bounded(bwrap, workspace):
    script = (
        "import errno\n"
        "for path in ['/tmp/fill', '/root/fill', '/dev/shm/fill']:\n"
        "    try:\n"
        "        with open(path, 'wb') as f:\n"
        "            for _ in range(8): f.write(b'x' * (1 << 20))\n"
        "        print(path, 'unbounded')\n"
        "    except OSError as e:\n"
        "        print(path, errno.errorcode[e.errno])\n"
    )
    result = bwrap.run(py(script), workspace, limits=Limits(wall_seconds=60, tmpfs_bytes=4 << 20))
    assert result.stdout.split("\n")[:3] == ["/tmp/fill ENOSPC", "/root/fill ENOSPC", "/dev/shm/fill ENOSPC"], result


def test_output_is_captured_up_to_the_cap(bwrap, workspace):
    result = bwrap.run(
        "head -c 5000 /dev/zero | tr '\\0' a; echo; head -c 100 /dev/zero | tr '\\0' e >&2",
        workspace,
        limits=Limits(max_output_bytes=6000),
    )
    assert result.status is Status.OK, result
    assert result.stdout == "a" * 5000 + "\n" and not result.stdout_truncated
    assert result.stderr == "e" * 100


def test_concurrent_runs_count_processes_separately(bwrap, workspace):
    # RLIMIT_NPROC is per user namespace: two sandboxes running as the same uid at the same time each get the
    # whole allowance (22 processes each here, 44 together, under a limit of 32).
    from concurrent.futures import ThreadPoolExecutor

    script = (
        "import os, time\n"
        "for _ in range(20):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "time.sleep(2)\n"
        "print('forked 20')\n"
    )
    limits = Limits(wall_seconds=60, max_processes=32)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: bwrap.run(py(script), workspace, limits=limits), range(2)))
    assert [r.stdout for r in runs] == ["forked 20\n", "forked 20\n"], runs


def test_no_file_descriptor_leaks(bwrap, workspace, tmp_path):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    bwrap.run(["true"], workspace)
    before = open_fds()
    for _ in range(5):
        bwrap.run(["true"], workspace)
        bwrap.run(["sleep", "5"], workspace, limits=Limits(wall_seconds=0.2))
        bwrap.run(["yes"], workspace, limits=Limits(max_output_bytes=100))
        with pytest.raises(SandboxError):
            bwrap.run(["true"], workspace, cwd="missing")
        with pytest.raises(SandboxError):
            bwrap.run(["true"], workspace, ro_binds=[(tmp_path / "missing", "/opt/x")])
    assert open_fds() == before


def test_a_non_root_caller_runs_the_sandbox_as_itself(bwrap):
    def scenario():
        from sandbox import get_backend

        with Workspace.create({"in.txt": b"1"}) as ws:
            backend = get_backend("bwrap")
            ok = backend.run(["python3", "-c", "import os; print(os.getuid()); open('out.txt', 'w')"], ws)
            bomb = backend.run(
                ["python3", "-c", "import os, time\nfor _ in range(64):\n    if os.fork() == 0: time.sleep(5)"],
                ws,
                limits=Limits(wall_seconds=60, max_processes=16),
            )
            return os.getuid(), ok.stdout, sorted(ws.diff().added), bomb.status, bomb.stderr, ok.unenforced

    uid, stdout, added, bomb_status, bomb_stderr, unenforced = as_unprivileged(scenario)
    assert stdout == f"{uid}\n"
    assert added == ["out.txt"]
    assert bomb_status is Status.ERROR and "BlockingIOError" in bomb_stderr
    if os.geteuid() == 0:
        # The child ran as uid 65534: no cgroup (v1 is root's) and no loop mount for it, and the result says so.
        assert unenforced == ("memory_bytes", "disk_bytes")
