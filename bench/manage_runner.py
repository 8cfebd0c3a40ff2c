"""Running ClawGym's management commands as a user would, for the benches that drive it through them (each runs as
`python bench/NAME.py`, so this folder is on sys.path)."""

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(BASE_DIR / "manage.py")]


class BenchError(RuntimeError):
    pass


def run_manage(args, *, timeout: float, log: Callable[[str], None]) -> dict | list:
    """`manage.py ARGS` in a process of its own: its last stdout line parsed as JSON ({} without one, {"text": stdout}
    when that line is not JSON). Raises BenchError with the end of its output when it exits non-zero."""
    log("$ manage.py " + " ".join(map(str, args))[:300])
    result = subprocess.run([*MANAGE, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=BASE_DIR)
    if result.returncode != 0:
        raise BenchError(
            f"manage.py {' '.join(map(str, args))[:200]} exited {result.returncode}:\n"
            f"{result.stderr[-3000:]}\n{result.stdout[-1000:]}"
        )
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    if not lines:
        return {}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"text": result.stdout}
