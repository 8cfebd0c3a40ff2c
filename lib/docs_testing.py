"""Keeping the docs true: tutorials walked as their reader would, and screenshots taken by the browser tests.

walk(): a tutorial of the docs walked as its reader would, so that the page and its test cannot drift apart.

The reader of docs/tutorials/*.md types the page's ```sh blocks, in order, into one shell at the top of a checkout.
walk() does the same: it joins every ```sh block of the page into one bash script (`set -euo pipefail`, so the first
command that fails fails the test, with the output so far) and runs it in a scratch folder laid out like a checkout
(.venv, manage.py and examples/ linked from this one; var/ its own), against the test database.

What a test cannot type (a command that serves until Ctrl-C, such as `make demo`) is a stand-in: the test names the
exact line and does its work with a fixture. Every stand-in must be on the page, so dropping or changing that line
fails the test too.

    result = walk(DOCS / "tutorials" / "first-hour.md", tmp_path, stand_ins={"make demo": "demo_server fixture"})
    assert '"status": "complete"' in result.stdout

docs_screenshot(): with CLAWGYM_DOCS_SCREENSHOTS=1 (`make docs-screenshots`), a browser test saves what its page
shows, 1280×800, as docs/images/NAME.png, where the docs' pages show it; otherwise it does nothing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
DOCS = BASE_DIR / "docs"
# What a tutorial may use of the checkout besides what it makes itself.
CHECKOUT_LINKS = (".venv", "manage.py", "examples")
IMAGES = DOCS / "images"
SCREENSHOT_VIEWPORT = {"width": 1280, "height": 800}
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass
class Walked:
    script: str
    stdout: str
    stderr: str


def sh_blocks(page: Path) -> list[str]:
    """The page's ```sh blocks, in order."""
    blocks = SH_BLOCK.findall(page.read_text())
    if not blocks:
        raise AssertionError(f"{page} has no ```sh block to walk")
    return blocks


def script_of(page: Path, stand_ins: dict[str, str]) -> str:
    """The page's commands as one script, each stand-in line replaced by a comment naming what stands in for it."""
    lines = "\n".join(sh_blocks(page)).splitlines()
    for line, by in stand_ins.items():
        if line not in (text.strip() for text in lines):
            raise AssertionError(f"{page.name} no longer has the line {line!r} that the test stands in for ({by})")
    return "\n".join(
        f"# {text.strip()}: {stand_ins[text.strip()]}" if text.strip() in stand_ins else text for text in lines
    )


def checkout(folder: Path) -> Path:
    """A scratch folder the tutorial's relative paths work in: links to this checkout's .venv, manage.py and
    examples/, and a var/ of its own."""
    for name in CHECKOUT_LINKS:
        link = folder / name
        if not link.exists():
            link.symlink_to(BASE_DIR / name)
    (folder / "var").mkdir(exist_ok=True)
    return folder


def walk(page: Path, folder: Path, *, env: dict[str, str], stand_ins: dict[str, str] | None = None) -> Walked:
    """Run the page's ```sh blocks in `folder` (see checkout) with `env` added to this process's environment.
    Raises AssertionError, with the script's output, when a command fails."""
    script = script_of(page, stand_ins or {})
    folder = checkout(folder)
    full_env = {**os.environ, "CLAWGYM_VAR_DIR": str(folder / "var"), "PYTHONUNBUFFERED": "1", **env}
    # A session of its own, so that a test stopped early (its timeout, Ctrl-C) ends every command the script started
    # (a `manage.py evaluate --here` under bash), not only bash, and none goes on writing to the test database.
    shell = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=folder,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = shell.communicate()
    except BaseException:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
        raise
    if shell.returncode != 0:
        raise AssertionError(
            f"walking {page.name} failed (exit {shell.returncode})\n--- stdout\n{stdout[-6000:]}\n"
            f"--- stderr\n{stderr[-6000:]}"
        )
    return Walked(script=script, stdout=stdout, stderr=stderr)


def docs_screenshot(page, name: str) -> Path | None:
    """Save the page's viewport at 1280×800 as docs/images/NAME.png when CLAWGYM_DOCS_SCREENSHOTS=1."""
    if os.environ.get("CLAWGYM_DOCS_SCREENSHOTS") != "1":
        return None
    page.set_viewport_size(SCREENSHOT_VIEWPORT)
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{name}.png"
    page.screenshot(path=str(path))
    return path
