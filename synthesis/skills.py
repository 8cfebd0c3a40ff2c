"""Agent skills: folders in the AgentSkills / OpenClaw `SKILL.md` format, imported into the catalog of seeds.

    parsed = parse_skill_folder(folder)           # a ParsedSkill, or SkillError saying why not
    find_skill_folders(root); bundled_skills_dir() # where the folders are; the installed OpenClaw harness's skills
    skill_text(skill, limit=30_000)               # SKILL.md, then README, then the other files: the model's view
    runtime_bins()                                # the commands the sandbox runtime puts on PATH
    missing_bins(skill)                           # what the skill requires that the runtime lacks

A skill folder holds SKILL.md: YAML front matter (`name`, `description`, optionally `metadata`, `homepage`, …)
then Markdown. OpenClaw keeps what a skill needs under `metadata.openclaw` (a JSON5 object in the YAML; the legacy
`metadata.clawdbot` when that is absent): `requires.bins` (each must be on PATH), `requires.anyBins` (one of them),
`requires.env`, and `primaryEnv`. The folder's other files are stored with it as blobs (tasks.Blob); a file too
large, binary, a link, or in a build folder (.git, node_modules, __pycache__) is not stored, and the skill records
why (Skill.skipped_files). Skills are keyed by name: the same files again are "unchanged" (Skill.content_hash),
other files "updated" (its files replaced). Importing is synthesis.services.import_skills (a folder of skill
folders, one skill folder, a .zip/.tar.gz, or bundled=True; a tasks.importing.ImportReport) and save_skill.

Archives are opened by the task import's reader (tasks.formats.archive): members are distrusted, links and paths
outside the folder refused, sizes bounded. An archive it refuses fails the whole import (SkillImportError), as
an unsafe task archive does; a skill folder that cannot be read fails alone, named in the report.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evaluation.harnesses.openclaw import harness_paths
from sandbox.runtime import read_manifest
from tasks.formats.safe_parse import YAMLRefused, load_json, load_yaml
from tasks.paths import printable

SKILL_FILE = "SKILL.md"
BUNDLED_SOURCE = "openclaw-bundled"
MAX_FILE_BYTES = 256 * 1024  # one stored file; skills are instructions and small scripts
MAX_SKILL_BYTES = 2 * 1024 * 1024  # all of a skill's stored files together
MAX_FILES = 300  # files stored per skill
MAX_SEARCH_DEPTH = 4  # folders below the import root searched for skill folders
MAX_FRONT_MATTER_CHARS = 64 * 1024  # a name, a description and OpenClaw's metadata; SKILL.md's body is the skill
IGNORED_FOLDERS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}
IGNORED_FILES = {".DS_Store", "Thumbs.db"}
README_NAMES = ("readme.md", "readme.txt", "readme")


class SkillImportError(Exception):
    """The input as a whole cannot be read: no such path, an unsafe archive, no bundled skills installed."""


class SkillError(ValueError):
    """One skill folder cannot be imported; the message says why."""


@dataclass
class ParsedSkill:
    name: str
    description: str
    front_matter: dict
    required_bins: list[str]
    any_bins: list[str]
    required_env: list[str]
    primary_env: str
    files: dict[str, bytes]  # path (POSIX, relative to the skill folder) -> content, SKILL.md among them
    skipped: list[dict] = field(default_factory=list)  # [{"path", "reason"}]

    @property
    def content_hash(self) -> str:
        digest = hashlib.sha256()
        for path in sorted(self.files):
            digest.update(
                f"{path}\0{hashlib.sha256(self.files[path]).hexdigest()}\n".encode("utf-8", "surrogateescape")
            )
        for skipped in sorted(self.skipped, key=lambda s: s["path"]):
            digest.update(f"skipped {skipped['path']}\0{skipped['reason']}\n".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()


# --- SKILL.md ------------------------------------------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict, str]:
    """(front matter, body) of a SKILL.md. Raises SkillError when there is no YAML mapping between --- lines."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{SKILL_FILE} does not start with front matter (a line '---')")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{SKILL_FILE}'s front matter has no closing '---' line")
    try:
        data = load_yaml("".join(lines[1:end]), max_chars=MAX_FRONT_MATTER_CHARS)
    except YAMLRefused as exc:
        raise SkillError(f"{SKILL_FILE}'s front matter is refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise SkillError(f"{SKILL_FILE}'s front matter is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{SKILL_FILE}'s front matter is not a mapping of keys to values")
    return data, "".join(lines[end + 1 :])


def _metadata(front: dict) -> dict:
    """The OpenClaw block of `metadata` (a mapping, or a JSON string as some skills write it); {} when none."""
    metadata = front.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = load_json(metadata)
        except json.JSONDecodeError:
            try:
                metadata = load_yaml(metadata)  # JSON5's trailing commas read as YAML flow style
            except YAMLRefused as exc:
                raise SkillError(f"metadata is refused: {exc}") from None
            except yaml.YAMLError:
                raise SkillError("metadata is a string that is neither JSON nor YAML") from None
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise SkillError("metadata is not a mapping")
    block = metadata.get("openclaw", metadata.get("clawdbot"))
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise SkillError("metadata.openclaw is not a mapping")
    return block


def _names(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SkillError(f"{what} is not a list of names")
    return list(dict.fromkeys(v.strip() for v in value))


def parse_front_matter(front: dict) -> dict:
    """The fields a Skill stores, from SKILL.md's front matter. Raises SkillError naming what is wrong."""
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillError(f"{SKILL_FILE} has no name in its front matter")
    if len(name.strip()) > 200 or "/" in name:
        raise SkillError(f"the skill name {name[:80]!r} is longer than 200 characters or has a '/'")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{SKILL_FILE} has no description in its front matter")
    block = _metadata(front)
    requires = block.get("requires") or {}
    if not isinstance(requires, dict):
        raise SkillError("metadata.openclaw.requires is not a mapping")
    primary = block.get("primaryEnv") or ""
    if not isinstance(primary, str):
        raise SkillError("metadata.openclaw.primaryEnv is not a string")
    return {
        "name": name.strip(),
        "description": description.strip(),
        "required_bins": _names(requires.get("bins"), "requires.bins"),
        "any_bins": _names(requires.get("anyBins"), "requires.anyBins"),
        "required_env": _names(requires.get("env"), "requires.env"),
        "primary_env": primary.strip(),
    }


def _read_files(folder: Path) -> tuple[dict[str, bytes], list[dict]]:
    """The folder's files to store, and those left out with why. Links are never followed."""
    files: dict[str, bytes] = {}
    skipped: list[dict] = []
    total = 0
    for here, dirs, names in os.walk(folder, followlinks=False):
        base = Path(here)
        for d in sorted(dirs):
            rel = (base / d).relative_to(folder).as_posix()
            if (base / d).is_symlink():
                skipped.append({"path": printable(rel), "reason": "a symbolic link (not followed)"})
            elif d in IGNORED_FOLDERS:
                skipped.append({"path": printable(rel), "reason": "a build or tool folder"})
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_FOLDERS and not (base / d).is_symlink())
        for name in sorted(names):
            path = base / name
            rel = printable(path.relative_to(folder).as_posix())
            reason = _skip_reason(path, name, len(files), total)
            if reason:
                skipped.append({"path": rel, "reason": reason})
                continue
            data = path.read_bytes()
            if _is_binary(data):
                skipped.append({"path": rel, "reason": f"binary ({len(data):,} bytes)"})
                continue
            files[rel] = data
            total += len(data)
    return files, skipped


def _skip_reason(path: Path, name: str, count: int, total: int) -> str:
    if path.is_symlink():
        return "a symbolic link (not followed)"
    if not path.is_file():
        return "not a regular file"
    if name in IGNORED_FILES:
        return "an operating system's metadata file"
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return f"too large ({size:,} bytes; at most {MAX_FILE_BYTES:,} per file)"
    if count >= MAX_FILES:
        return f"past the {MAX_FILES} files a skill may keep"
    if total + size > MAX_SKILL_BYTES:
        return f"past the {MAX_SKILL_BYTES:,} bytes a skill may keep in all"
    return ""


def _is_binary(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def parse_skill_folder(folder: Path) -> ParsedSkill:
    """Read one skill folder. Raises SkillError when SKILL.md is missing, unreadable or lacks name/description."""
    folder = Path(folder)
    skill_md = folder / SKILL_FILE
    if skill_md.is_symlink() or not skill_md.is_file():
        raise SkillError(f"no {SKILL_FILE} in the folder")
    if skill_md.stat().st_size > MAX_FILE_BYTES:
        raise SkillError(f"{SKILL_FILE} is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        text = skill_md.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{SKILL_FILE} is not UTF-8 text") from None
    front, _body = split_front_matter(text)
    fields = parse_front_matter(front)
    files, skipped = _read_files(folder)
    if SKILL_FILE not in files:  # only when the skill's other files took all the room: never leave it out
        raise SkillError(
            f"{SKILL_FILE} could not be kept: " + next(s["reason"] for s in skipped if s["path"] == SKILL_FILE)
        )
    return ParsedSkill(front_matter=_jsonable(front), files=files, skipped=skipped, **fields)


def _jsonable(value):
    """YAML may hold dates and other non-JSON values: keep the front matter as JSON can store it."""
    return json.loads(json.dumps(value, default=str))


# --- finding skill folders and importing them ----------------------------------------------------------------


def find_skill_folders(root: Path) -> list[Path]:
    """Folders holding a SKILL.md: `root` itself, or those below it (a skill's own subfolders are its files)."""
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        if (folder / SKILL_FILE).is_file():
            found.append(folder)
            return
        if depth >= MAX_SEARCH_DEPTH:
            return
        for child in sorted(folder.iterdir(), key=lambda p: p.name):
            if child.is_dir() and not child.is_symlink() and child.name not in IGNORED_FOLDERS:
                walk(child, depth + 1)

    walk(root, 0)
    return found


def bundled_skills_dir() -> Path:
    """The skills folder of the installed OpenClaw harness. Raises SkillImportError naming `make harness`."""
    _node, openclaw = harness_paths()
    folder = openclaw / "node_modules" / "openclaw" / "skills"
    if not folder.is_dir():
        raise SkillImportError(
            f"the OpenClaw harness's skills are not installed at {folder}: run `make harness` "
            "(scripts/install-harness.sh installs the pinned openclaw package with its bundled skills)"
        )
    return folder


# --- what the model reads and what the sandbox has ---------------------------------------------------------------


def _file_order(path: str) -> tuple:
    lower = path.lower()
    return (0 if path == SKILL_FILE else 1 if lower in README_NAMES else 2, path.count("/"), path)


def skill_text(skill, limit: int = 30_000) -> str:
    """The skill's files as one text of at most `limit` characters: SKILL.md first, then a README, then the rest
    by depth and path, each under a `### path` heading. A file cut short says so; files left out are named."""
    files = sorted(skill.files.select_related("blob"), key=lambda f: _file_order(f.path))
    parts: list[str] = []
    used = 0
    left_out: list[str] = []
    for f in files:
        text = f.blob.content.decode("utf-8", errors="replace")
        head = f"### {f.path}\n"
        room = limit - used - len(head) - 200  # keep room for the note on what is left out
        if room <= 0:
            left_out.append(f.path)
            continue
        if len(text) > room:
            text = text[:room] + f"\n[… cut: {f.path} has {len(text):,} characters]"
        parts.append(head + text)
        used += len(parts[-1]) + 2
    if left_out:
        shown = ", ".join(left_out[:20]) + (f" and {len(left_out) - 20} more" if len(left_out) > 20 else "")
        parts.append(f"[not shown, for room: {shown}]")
    return "\n\n".join(parts)[:limit]


@functools.cache
def runtime_bins() -> frozenset[str]:
    """The commands the sandbox runtime provides (sandbox/runtime/packages.txt, `commands=` of each package)."""
    return frozenset(read_manifest().commands)


def any_bins(skill) -> list[str]:
    """The skill's `requires.anyBins` (one of them must be on PATH), from its stored front matter."""
    try:
        return parse_front_matter(skill.front_matter or {})["any_bins"]
    except SkillError:
        return []


def missing_bins(skill) -> list[str]:
    """The skill's required commands the sandbox runtime lacks; an anyBins list none of which it has is one entry,
    its names joined by "|" (e.g. "claude|codex|opencode")."""
    have = runtime_bins()
    missing = [b for b in skill.required_bins if b not in have]
    alternatives = any_bins(skill)
    if alternatives and not any(b in have for b in alternatives):
        missing.append("|".join(alternatives))
    return missing
