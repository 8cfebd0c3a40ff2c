"""Tiny typed readers for settings from the environment. They fail loudly on bad values.

Every reader also declares the variable it reads (name, default, meaning) in VARIABLES, and `declare` does the same
for a variable read elsewhere (the sandbox package, a shell script, the compose file): settings.py is the one place
that says what each variable is, and the settings reference (scripts/gen_reference.py) is generated from it.
"""

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path


class ImproperlyConfiguredEnv(Exception):
    pass


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # as a reader of the reference should see it
    help: str
    # Who reads it: "settings" (settings.py, at start-up), or the place that reads it itself: a package without
    # Django, a script, the compose file, a process ClawGym starts ("internal": set by ClawGym, never by hand).
    read_by: str = "settings"


VARIABLES: dict[str, Variable] = {}


def declare(name: str, default: str, help: str = "", *, read_by: str = "settings") -> None:
    """Record an environment variable for the reference. A later declaration with a meaning replaces one without."""
    known = VARIABLES.get(name)
    if known is not None and known.help and not help:
        return
    VARIABLES[name] = Variable(name=name, default=default, help=help, read_by=read_by)


def env_str(name: str, default: str, help: str = "", *, shown: str | None = None) -> str:
    declare(name, default if shown is None else shown, help)
    return os.environ.get(name, default)


def env_bool(name: str, default: bool, help: str = "", *, shown: str | None = None) -> bool:
    declare(name, ("1" if default else "0") if shown is None else shown, help)
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int, help: str = "", *, shown: str | None = None) -> int:
    declare(name, str(default) if shown is None else shown, help)
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {raw!r}") from None


def env_float(name: str, default: float, help: str = "", *, shown: str | None = None) -> float:
    declare(name, f"{default:g}" if shown is None else shown, help)
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be a number, got {raw!r}") from None


def env_json(name: str, default, help: str = "", *, shown: str | None = None):
    declare(name, (json.dumps(default) if default else "") if shown is None else shown, help)
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfiguredEnv(f"{name} must be JSON: {exc}") from None


def env_list(name: str, default: list[str], help: str = "", *, shown: str | None = None) -> list[str]:
    declare(name, ",".join(default) if shown is None else shown, help)
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: set[str], help: str = "") -> str:
    declare(name, default, f"{help} One of: {', '.join(sorted(choices))}.".strip() if help else "")
    value = os.environ.get(name) or default
    if value not in choices:
        raise ImproperlyConfiguredEnv(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def secret_key(path: Path) -> str:
    """SECRET_KEY from the environment, else one generated once and kept in a git-ignored file."""
    declare(
        "SECRET_KEY",
        "generated once into .secret_key",
        "Signs sessions and derives the keys of the model servers ClawGym starts. Set it in deployment; never print it.",
    )
    from_env = os.environ.get("SECRET_KEY")
    if from_env:
        return from_env
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    # Create with 0600 so the key is never world-readable.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key
