"""The tree passes `ruff check` with ruff.toml's rules and is laid out by `ruff format`: a lint error or a hand-packed
line fails the suite rather than waiting for a reader."""

import subprocess
import sys
from pathlib import Path

from django.conf import settings


def test_ruff_check_passes():
    ruff = Path(sys.executable).parent / "ruff"  # pinned in requirements-dev.txt
    assert ruff.exists(), "ruff is missing from the virtualenv: make install"
    found = subprocess.run(
        [str(ruff), "check", "--no-cache", "--quiet", "."], cwd=settings.BASE_DIR, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stdout + found.stderr


def test_ruff_format_leaves_the_tree_as_it_is():
    ruff = Path(sys.executable).parent / "ruff"
    found = subprocess.run(
        [str(ruff), "format", "--check", "--no-cache", "--quiet", "."],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, "run `ruff format .`:\n" + found.stdout + found.stderr
