"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages are written from the code before every build, so that the
site never shows a command, setting or job kind the code no longer has (scripts/gen_reference.py)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def on_pre_build(config, **kwargs):
    # A process of its own: the generator sets Django up, which must not happen inside mkdocs' process twice (serve
    # rebuilds on every change).
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_reference.py")], cwd=ROOT, check=True)
