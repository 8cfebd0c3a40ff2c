"""The persona route's seeds: personas (who asks) and atomic operations (what the task makes the agent do).

    read_personas(stream, "hub.jsonl")               # (line number, persona or None, error) per non-empty line
    load_operations()                                # synthesis/data/operations.yaml into the database, by slug

Importing a file of personas is synthesis.services.import_personas (a tasks.importing.ImportReport: {"imported",
"updated", "unchanged", "failed": [{source, error}]}); it reads the file with open_text and read_personas.

Personas come as Persona Hub JSONL (`{"persona": "…"}` per line) or as plain text (one persona per non-empty
line); a file is read as JSONL when its name ends in .jsonl or its first non-empty line starts with "{". A persona
is one row however often it is imported: rows are keyed by `persona_hash` (sha256 of the text with case and white
space folded), so the same text again is "unchanged" (`updated` stays 0: a persona has nothing else to change).
A JSONL line that is not JSON, or has no "persona" string, is a failure naming its line; the others go on. So is a
line longer than MAX_LINE_CHARS (the file is read a line at a time, and such a line never whole) and a persona
holding a control character or a lone surrogate, which no database column or page can hold. The report lists the
first failures and counts them all (tasks.importing.ImportReport).

ClawGym ships its own set (synthesis/data/personas.jsonl, written by us across professions, ages, countries and
life situations) and its operations (synthesis/data/operations.yaml); the migration synthesis/0003_shipped_seeds
loads both. Both are editable in the Django admin afterwards.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import yaml
from django.db import transaction

from tasks.formats.safe_parse import load_json, load_yaml

from . import models

DATA_DIR = Path(__file__).resolve().with_name("data")
SHIPPED_PERSONAS = DATA_DIR / "personas.jsonl"
SHIPPED_OPERATIONS = DATA_DIR / "operations.yaml"
SHIPPED_SOURCE = "clawgym"
MAX_PERSONA_CHARS = 4_000  # Persona Hub's longest are a few hundred; more is not a persona
MAX_LINE_CHARS = 32 * 1024  # room for the longest persona as JSON with every character escaped, and other fields
SKIP_CHARS = 64 * 1024  # read at a time while passing over the rest of a line that is too long
# Control characters but tab and line ends, and lone surrogates (JSON's "\ud800"): PostgreSQL refuses NUL and
# surrogates, and none of them is text a persona holds.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
BATCH = 1_000  # personas looked up and created per query


class SeedError(ValueError):
    """The seed input as a whole cannot be read (missing file, malformed operations file)."""


def fold(text: str) -> str:
    """The text with case and runs of white space folded: what makes two personas the same."""
    return " ".join(text.split()).casefold()


def persona_hash(text: str) -> str:
    return hashlib.sha256(fold(text).encode("utf-8")).hexdigest()


# --- personas ----------------------------------------------------------------------------------------------------


def open_text(path_or_file) -> tuple[io.TextIOBase, str, str]:
    """(text stream, name for messages, how to let go of it: "close" what we opened, "detach" the text layer we put
    over the caller's binary file so that the caller's file stays open, "" for the caller's own text stream)."""
    if hasattr(path_or_file, "read"):
        name = Path(str(getattr(path_or_file, "name", "") or "upload")).name
        if isinstance(path_or_file.read(0), bytes):
            return io.TextIOWrapper(path_or_file, encoding="utf-8", errors="replace"), name, "detach"
        return path_or_file, name, ""
    path = Path(path_or_file)
    if not path.is_file():
        raise SeedError(f"{path} does not exist or is not a file")
    return open(path, encoding="utf-8", errors="replace"), path.name, "close"


def _lines(stream):
    """Yield (line number, line, or None for a line longer than MAX_LINE_CHARS, and its length): a line is read at
    most MAX_LINE_CHARS at a time, so that no line of an upload, however long, is ever held whole."""
    number = 0
    while line := stream.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) <= MAX_LINE_CHARS or line.endswith("\n"):
            yield number, line, len(line)
            continue
        length = len(line)
        while line and not line.endswith("\n"):
            line = stream.readline(SKIP_CHARS)
            length += len(line)
        yield number, None, length - line.endswith("\n")


def _unprintable(text: str) -> str:
    """What in `text` no persona may hold ("" when nothing): the first control character or lone surrogate."""
    found = _UNPRINTABLE.search(text)
    if found is None:
        return ""
    char = found.group()
    if "\ud800" <= char <= "\udfff":
        what = f"a lone surrogate (U+{ord(char):04X}), which is not Unicode text,"
    else:
        what = f"the control character U+{ord(char):04X}"
    return f"the persona holds {what} at character {found.start() + 1:,}"


def read_personas(stream, name: str):
    """Yield (line number, persona text or None, error or "") for each non-empty line of `stream`."""
    as_jsonl = name.lower().endswith(".jsonl")
    decided = as_jsonl
    for number, raw, length in _lines(stream):
        if raw is None:
            yield number, None, f"the line has {length:,} characters (at most {MAX_LINE_CHARS:,})"
            continue
        line = raw.strip().lstrip("\ufeff")
        if not line:
            continue
        if not decided:
            as_jsonl, decided = line.startswith("{"), True
        if as_jsonl:
            try:
                record = load_json(line)
            except json.JSONDecodeError as exc:
                yield number, None, f"not JSON: {exc.msg} (column {exc.colno})"
                continue
            text = record.get("persona") if isinstance(record, dict) else None
            if not isinstance(text, str):
                yield number, None, 'no "persona" string in the object'
                continue
            text = text.strip()
        else:
            text = line
        if not text:
            yield number, None, "the persona is empty"
        elif problem := _unprintable(text):
            yield number, None, problem
        else:
            yield number, text, ""


def shipped_personas() -> list[str]:
    """The personas ClawGym ships, in file order."""
    with open(SHIPPED_PERSONAS, encoding="utf-8") as stream:
        found = list(read_personas(stream, SHIPPED_PERSONAS.name))
    bad = [f"line {number}: {error}" for number, _, error in found if error]
    if bad:
        raise SeedError(f"{SHIPPED_PERSONAS} is malformed: {'; '.join(bad)}")
    return [text for _, text, _ in found]


# --- atomic operations ---------------------------------------------------------------------------------------


def read_operations(path: Path = SHIPPED_OPERATIONS) -> list[dict]:
    """The categories of an operations file, each {slug, name, description, operations: [{slug, name,
    description, needs_network}]}, checked: slugs unique, every field present."""
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SeedError(f"{path} cannot be read: {exc}") from None
    categories = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(categories, list) or not categories:
        raise SeedError(f"{path}: expected a list under 'categories'")
    seen: set[str] = set()
    out = []
    for c in categories:
        operations = []
        for o in c.get("operations") or []:
            if not all(isinstance(o.get(k), str) and o[k].strip() for k in ("slug", "name", "description")):
                raise SeedError(f"{path}: an operation of {c.get('slug')!r} lacks a slug, name or description")
            if o["slug"] in seen:
                raise SeedError(f"{path}: operation {o['slug']!r} is listed twice")
            seen.add(o["slug"])
            operations.append(
                {
                    "slug": o["slug"],
                    "name": o["name"],
                    "description": o["description"],
                    "needs_network": bool(o.get("needs_network", False)),
                }
            )
        if not (isinstance(c.get("slug"), str) and isinstance(c.get("name"), str) and operations):
            raise SeedError(f"{path}: a category lacks a slug, a name or operations")
        out.append(
            {"slug": c["slug"], "name": c["name"], "description": c.get("description", ""), "operations": operations}
        )
    return out


def load_operations(path: Path = SHIPPED_OPERATIONS, *, OperationCategory=None, AtomicOperation=None) -> int:
    """Create or update the file's categories and operations by slug (the model classes may be a migration's
    historical ones). Operations only in the database are left as they are. Returns the operations loaded."""
    if OperationCategory is None or AtomicOperation is None:
        OperationCategory, AtomicOperation = models.OperationCategory, models.AtomicOperation
    count = 0
    with transaction.atomic():
        for order, c in enumerate(read_operations(path)):
            category, _ = OperationCategory.objects.update_or_create(
                slug=c["slug"], defaults={"name": c["name"], "description": c["description"], "order": order}
            )
            for o in c["operations"]:
                AtomicOperation.objects.update_or_create(
                    slug=o["slug"],
                    defaults={
                        "category": category,
                        "name": o["name"],
                        "description": o["description"],
                        "needs_network": o["needs_network"],
                    },
                )
                count += 1
    return count


def load_shipped_personas(*, Persona=None) -> int:
    """Add the shipped personas that are not there yet (as source "clawgym"); returns how many were added."""
    if Persona is None:
        Persona = models.Persona
    texts = {persona_hash(t): " ".join(t.split()) for t in shipped_personas()}
    known = set(Persona.objects.filter(text_hash__in=texts).values_list("text_hash", flat=True))
    new = [Persona(text=t, text_hash=k, source=SHIPPED_SOURCE) for k, t in texts.items() if k not in known]
    Persona.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)
