"""The sandbox's test helpers: pytest fixtures for code that runs things in the sandbox (registered in the root
conftest.py), and plain helpers of its own tests (`processes_with`, `as_unprivileged`).

What a test needs and this machine lacks (bubblewrap, the OpenClaw harness, a Docker engine) skips the test on a
developer's machine, but fails it in CI: a CI run must never lose a module to a quiet skip.

Docker: every test marked `docker` gets the session fixture `docker_engine`, which starts an engine where none
answers (scripts/docker-engine.sh start: installs docker.io, starts dockerd; it is left running for the next run).
`docker_sandbox` is the Docker backend with its image built (scripts/images/sandbox.sh: about 1 s when it is up to
date, a minute otherwise).
"""

import os
import pickle
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from . import SandboxUnavailable, get_backend

PROJECT_DIR = Path(__file__).resolve().parent.parent


def volumes_of(pid: int) -> list[str]:
    """The names of the workspace volumes (sandbox.backends.volume) that process `pid` made and that are still there:
    mounted and idle in its pool, or waiting for its removal thread."""
    from .backends import volume

    scratch = volume.scratch_dir()
    return [name for name in os.listdir(scratch) if name.startswith(f"run-{pid}-")] if scratch.exists() else []


def in_ci() -> bool:
    """True where the CI variable is set to anything but empty, 0, false or no (CI services set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip the test: `reason` says what this machine lacks. In CI, fail it instead: CI must run it."""
    if in_ci():
        pytest.fail(f"CI must run this test, but {reason}", pytrace=False)
    pytest.skip(reason)


def require_bwrap():
    """The default (bubblewrap) backend; `unavailable` where it cannot work."""
    backend = get_backend("bwrap")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        unavailable(f"the default sandbox cannot run here: {exc}")
    return backend


@pytest.fixture
def bwrap():
    return require_bwrap()


def run_script(*args: str, timeout: int) -> str:
    """Run one of the project's scripts (scripts/<args[0]> <args[1:]>): '' when it succeeded, else why not."""
    shown = "scripts/" + " ".join(args)
    try:
        done = subprocess.run(
            [str(PROJECT_DIR / "scripts" / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=PROJECT_DIR,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{shown} failed: {exc}"
    if done.returncode != 0:
        return f"{shown} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}"
    return ""


@pytest.fixture(scope="session")
def docker_engine():
    """A Docker engine answering at DOCKER_HOST or /var/run/docker.sock, started here where none does."""
    failed = run_script("docker-engine.sh", "start", timeout=300)
    if failed:
        unavailable(f"no Docker engine could be started: {failed}")


@pytest.fixture(scope="session")
def docker_sandbox_image(docker_engine):
    """The sandbox image of this code's runtime, built where it is missing or out of date."""
    failed = run_script("images/sandbox.sh", timeout=600)
    if failed:
        unavailable(f"the Docker sandbox image could not be built: {failed}")


def require_docker():
    """The Docker backend, its engine and image ready; `unavailable` where they cannot be."""
    backend = get_backend("docker")
    try:
        backend.check_available()
    except SandboxUnavailable as exc:
        unavailable(f"the Docker sandbox cannot run here: {exc}")
    return backend


@pytest.fixture
def docker_sandbox(docker_sandbox_image):
    yield require_docker()
    # The ready containers a test's runs left waiting (sandbox.backends.docker_pool) are removed, and its used ones
    # waited for, before the next test: each starts with none of this process's containers or volumes about.
    from .backends import docker_pool

    docker_pool.settle()


# A docker test's time limit (pytest-timeout; pytest.ini's 600 s for the others): the engine's start and the sandbox
# image's build (the session fixtures above: up to 300 + 600 s) fall in the set-up of whichever docker test comes first.
DOCKER_TEST_TIMEOUT = 1500


def pytest_collection_modifyitems(config, items):
    # A test marked `docker` gets the engine whether or not it asks for a fixture that needs it.
    for item in items:
        if item.get_closest_marker("docker") and "docker_engine" not in item.fixturenames:
            item.fixturenames.insert(0, "docker_engine")
        if item.get_closest_marker("docker") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DOCKER_TEST_TIMEOUT))


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds `marker` (a sandbox's PID namespace is visible from here)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue  # exited while we looked
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def as_unprivileged(function):
    """Call `function` in a forked child that runs as uid 65534 when we are root, and return what it returned.

    CI runs as root; developers do not. This is how the tests reach the code paths of a non-root caller.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            payload = pickle.dumps(("returned", function()))
        except BaseException as exc:
            payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    outcome, value = pickle.loads(data)
    if outcome == "raised":
        raise AssertionError(f"in the unprivileged child: {value}")
    return value
