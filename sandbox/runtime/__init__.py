"""The sandbox runtime: the system (commands, Python packages) that every checker and agent finds in the sandbox.

What a checker can call is part of its score, so scores must not depend on what one host has under /usr. The runtime
is defined once, by packages.txt beside this module, and built from it by scripts/build-runtime.sh (`make runtime`):
a Debian root folder at `<runtimes_dir()>/<version>/`. The bubblewrap backend mounts that folder's system folders in
place of the host's and refuses to run (SandboxUnavailable) where it is not built; the Docker backend's image is the
same folder, as bubblewrap shows it (scripts/images/sandbox.sh: clawgym/sandbox:<version>).

    runtime_version()   "clawgym-runtime-<N>-<sha12>": N is the manifest's `version` line, sha12 the first 12 hex
                        digits of the manifest file's sha256, so any change of the definition is a new name.
    runtimes_dir()      CLAWGYM_RUNTIME_DIR, or .runtime/ in the project.
    runtime_root()      where this version is (or would be) built.
    built_version(root) the version a built folder says it is (/etc/clawgym-runtime), None where there is none.
    read_manifest()     the parsed definition: packages, and the commands and Python modules each one provides.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxUnavailable

MANIFEST_PATH = Path(__file__).resolve().with_name("packages.txt")
PROJECT_DIR = MANIFEST_PATH.parents[2]
# Inside a built runtime: its version (one line; written last by the build, so it marks a complete folder) and the
# exact Debian package versions it was built with.
VERSION_FILE = "etc/clawgym-runtime"
PACKAGES_FILE = "etc/clawgym-runtime.packages"


@dataclass(frozen=True)
class RuntimePackage:
    name: str  # the Debian package
    commands: tuple[str, ...] = ()  # what it puts on PATH
    modules: tuple[str, ...] = ()  # the Python modules it makes importable


@dataclass(frozen=True)
class Manifest:
    series: int
    sha256: str
    suite: str
    mirror: str
    variant: str
    packages: tuple[RuntimePackage, ...]

    @property
    def version(self) -> str:
        return f"clawgym-runtime-{self.series}-{self.sha256[:12]}"

    @property
    def commands(self) -> list[str]:
        return [command for package in self.packages for command in package.commands]

    @property
    def modules(self) -> list[str]:
        return [module for package in self.packages for module in package.modules]


def read_manifest(path: Path = MANIFEST_PATH) -> Manifest:
    """Parse the definition (the same rules scripts/build-runtime.sh reads it by). Malformed lines raise."""
    data = path.read_bytes()
    settings: dict[str, str] = {}
    packages: list[RuntimePackage] = []
    for number, raw in enumerate(data.decode().splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        key, rest = words[0], words[1:]
        if key in ("version", "suite", "mirror", "variant") and len(rest) == 1:
            settings[key] = rest[0]
        elif key == "package" and rest:
            lists = {"commands": (), "modules": ()}
            for option in rest[1:]:
                name, _, value = option.partition("=")
                if name not in lists or not value:
                    raise ValueError(f"{path}:{number}: unknown package option {option!r}")
                lists[name] = tuple(value.split(","))
            packages.append(RuntimePackage(rest[0], **lists))
        else:
            raise ValueError(f"{path}:{number}: cannot read {raw.strip()!r}")
    missing = {"version", "suite", "mirror", "variant"} - settings.keys()
    if missing:
        raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
    return Manifest(
        series=int(settings["version"]),
        sha256=hashlib.sha256(data).hexdigest(),
        suite=settings["suite"],
        mirror=settings["mirror"],
        variant=settings["variant"],
        packages=tuple(packages),
    )


@functools.cache
def runtime_version() -> str:
    """The version of the runtime this code defines (and the bubblewrap backend mounts)."""
    return read_manifest().version


def runtimes_dir() -> Path:
    return Path(os.environ.get("CLAWGYM_RUNTIME_DIR") or PROJECT_DIR / ".runtime")


def runtime_root(version: str | None = None) -> Path:
    return runtimes_dir() / (version or runtime_version())


def built_version(root: Path) -> str | None:
    try:
        with open(root / VERSION_FILE, encoding="utf-8") as handle:
            return handle.readline().strip() or None
    except OSError:
        return None


def require_built(root: Path, version: str) -> None:
    """Raise SandboxUnavailable, naming the fix, unless `root` holds a complete build of `version`."""
    found = built_version(root)
    if found != version:
        state = "is not built" if found is None else f"holds {found}"
        raise SandboxUnavailable(
            f"the sandbox runtime {version} {state} at {root}: run `make runtime` (scripts/build-runtime.sh, as root)"
        )


__all__ = [
    "MANIFEST_PATH",
    "Manifest",
    "RuntimePackage",
    "built_version",
    "read_manifest",
    "require_built",
    "runtime_root",
    "runtime_version",
    "runtimes_dir",
]
