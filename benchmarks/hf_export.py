"""A frozen benchmark version as a Hugging Face dataset, and a benchmark imported back from one.

One row per pinned revision, in task id order (the `test` split: a benchmark is what models are tested on):
`task_id`, `revision`, `content_hash`, `category`, `instruction`, `files` (role, path, content: the input files the
agent starts from, the checker under `reward`, the reference solution), `checker_entry`, `code_weight` (λ), and
`rubric`, `metadata`, `entry_extra` as JSON text (their shapes vary by task, and Parquet needs one schema a
column). The row holds everything a revision's content hash covers, so importing it back gives the same revisions.

Importing reads those rows into task packages and saves each through tasks.services.save_package (the import
service `import_tasks` uses: identical content is left unchanged, changed content becomes a new revision), checks
that each revision's content hash is the one the export recorded, then freezes a version of the benchmark pinning
exactly those revisions (benchmarks.services.create_version).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from django.conf import settings
from django.db import transaction

from lib import hf_dataset
from tasks.formats.safe_parse import load_yaml
from tasks.package import PackageError, PackageFile, TaskPackage
from tasks.paths import TaskFileError
from tasks.services import SaveOutcome, package_from_revision, save_package

from .exporting import manifest, pinned_revisions, top_folder
from .models import BenchmarkVersion
from .services import BenchmarkError, create_version, get_or_create_benchmark

SPLIT = "test"
OUTCOME_KEYS = {SaveOutcome.CREATED: "imported", SaveOutcome.UPDATED: "updated", SaveOutcome.UNCHANGED: "unchanged"}
FORMAT = "clawgym-benchmark-hf/1"
FILE = pa.struct([("role", pa.string()), ("path", pa.string()), ("content", pa.binary())])
SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("revision", pa.int32()),
        ("content_hash", pa.string()),
        ("category", pa.string()),
        ("instruction", pa.string()),
        ("files", pa.list_(FILE)),
        ("checker_entry", pa.string()),
        ("code_weight", pa.float64()),
        ("rubric", pa.string()),
        ("metadata", pa.string()),
        ("entry_extra", pa.string()),
    ]
)
BODY = """## Columns

One row per task, as the version pinned it: `files` holds every file of the task with its `role` (`input`: the
workspace the agent starts from; `reward`: the checker, run as `checker_entry`; `solution`: the reference solution).
`rubric`, `metadata` and `entry_extra` are JSON text. A task's score is the checker's mean over its checks, or
`code_weight · code + (1 − code_weight) · rubric` when it has a rubric.

```python
from datasets import load_dataset
tasks = load_dataset("parquet", data_files={"test": "data/test-*.parquet"})["test"]
```

`manage.py import_benchmark FOLDER` reads this folder back into a ClawGym catalog as tasks and a frozen version."""


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _rows(version: BenchmarkVersion) -> Iterator[dict]:
    categories = {task["task_id"]: task["category"] for task in manifest(version)["tasks"]}
    for revision in pinned_revisions(version):
        package = package_from_revision(revision)
        yield {
            "task_id": package.external_id,
            "revision": revision.number,
            "content_hash": revision.content_hash,
            "category": categories.get(package.external_id),
            "instruction": package.instruction,
            "files": [{"role": f.role, "path": f.path, "content": f.data} for f in package.files],
            "checker_entry": package.checker_entry,
            "code_weight": float(package.code_weight),
            "rubric": _json(package.rubric),
            "metadata": _json(package.metadata),
            "entry_extra": _json(package.entry_extra),
        }


def _licence(version: BenchmarkVersion) -> tuple[str, str]:
    """The licence the pinned tasks record in their metadata (`license`), when they all record the same one."""
    found = set()
    for revision in pinned_revisions(version, defer=("instruction", "rubric", "entry_extra")):
        value = revision.metadata.get("license") if isinstance(revision.metadata, dict) else None
        found.add(value if isinstance(value, str) and value.strip() else None)
    if len(found) == 1 and None not in found:
        return found.pop(), ""
    if len(found) > 1 and None not in found:
        return "", f"The tasks record different licences ({', '.join(sorted(found))}); see each task's metadata."
    return "", "The benchmark's tasks record no licence (a task's metadata `license`)."


def card(version: BenchmarkVersion) -> hf_dataset.Card:
    info = manifest(version)
    licence, note = _licence(version)
    return hf_dataset.Card(
        title=f"{version.benchmark.name} v{version.number}",
        summary=(
            f"The frozen version {version.number} of the ClawGym benchmark `{version.benchmark.name}`: "
            f"{info['task_count']} workspace tasks for agents, each judged by the final state of its workspace."
            + (f"\n\n{version.benchmark.description}" if version.benchmark.description else "")
        ),
        license=licence,
        license_note=note,
        provenance={
            "format": FORMAT,
            "kind": "benchmark_version",
            "benchmark": version.benchmark.name,
            "version": version.number,
            "frozen_at": info["frozen_at"],
            "frozen_by": info["frozen_by"],
            "note": info["note"],
            "revisions": [f"{t['task_id']}@{t['content_hash']}" for t in info["tasks"]],
            "clawgym_version": hf_dataset.clawgym_version(settings.BASE_DIR),
        },
        tags=["agents", "benchmark"],
        body=BODY,
    )


def export_version_hf(version: BenchmarkVersion, out, *, force: bool = False) -> hf_dataset.HfResult:
    """Write the version as a Hugging Face dataset folder (Parquet + README.md) to `out`."""
    config = hf_dataset.Config("default", SCHEMA, {SPLIT: lambda: _rows(version)})
    return hf_dataset.write(out, [config], card(version), force=force)


def download_response(version: BenchmarkVersion):
    """The export zipped under one top folder `<name>-v<N>-hf/`."""
    top = f"{top_folder(version)}-hf"
    return hf_dataset.download_response(lambda folder: export_version_hf(version, folder), top)


# --- importing back -----------------------------------------------------------------------------------------------


@dataclass
class ImportResult:
    version: BenchmarkVersion
    imported: int
    updated: int
    unchanged: int

    def as_dict(self) -> dict:
        return {
            "benchmark": self.version.benchmark.name,
            "version": self.version.number,
            "tasks": self.imported + self.updated + self.unchanged,
            "imported": self.imported,
            "updated": self.updated,
            "unchanged": self.unchanged,
        }


def _loads(row: dict, key: str, kind: type):
    try:
        value = json.loads(row.get(key) or "null")
    except ValueError:
        raise BenchmarkError(f"task {row.get('task_id')!r}: {key} is not JSON") from None
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise BenchmarkError(f"task {row.get('task_id')!r}: {key} must be a JSON {kind.__name__}")
    return value


def _package(row: dict) -> TaskPackage:
    return TaskPackage(
        external_id=row["task_id"],
        instruction=row["instruction"],
        metadata=_loads(row, "metadata", dict),
        files=[PackageFile(path=f["path"], data=f["content"], role=f["role"]) for f in row.get("files") or []],
        rubric=_loads(row, "rubric", list),
        code_weight=row["code_weight"],
        checker_entry=row["checker_entry"],
        entry_extra=_loads(row, "entry_extra", dict),
        origin=f"row {row['task_id']}",
    )


def _split_file(front: dict) -> str:
    configs = front.get("configs")
    if not isinstance(configs, list) or not configs or not isinstance(configs[0], dict):
        raise BenchmarkError("the card's front matter names no configs")
    for entry in configs[0].get("data_files") or []:
        if isinstance(entry, dict) and entry.get("split") == SPLIT and isinstance(entry.get("path"), str):
            return entry["path"].replace("*", "00000-of-00001.parquet")
    raise BenchmarkError(f"the card names no {SPLIT!r} split")


def import_version_hf(folder, *, user, benchmark_name: str | None = None, note: str = "") -> ImportResult:
    """Import the tasks of a Hugging Face benchmark export and freeze a version pinning them (an admin's act)."""
    try:
        front = hf_dataset.read_card(folder, load_yaml)
    except hf_dataset.HfExportError as exc:
        raise BenchmarkError(str(exc)) from None
    provenance = front.get("clawgym") if isinstance(front.get("clawgym"), dict) else {}
    if provenance.get("format") != FORMAT:
        raise BenchmarkError(f"{folder} is not a ClawGym benchmark export (its card says no format {FORMAT!r})")
    name = benchmark_name or provenance.get("benchmark")
    if not isinstance(name, str) or not name:
        raise BenchmarkError("the export names no benchmark: give one")
    counts = {"imported": 0, "updated": 0, "unchanged": 0}
    revision_ids = []
    with transaction.atomic():
        benchmark, _ = get_or_create_benchmark(name, user=user, description=_description(front))
        try:
            for row in hf_dataset.read_rows(folder, _split_file(front)):
                package = _package(row)
                result = save_package(package, user=user, stage="import", message=f"Imported from {Path(folder).name}")
                if result.revision.content_hash != row["content_hash"]:
                    raise BenchmarkError(
                        f"task {row['task_id']!r} does not hash to the recorded {row['content_hash'][:12]}: "
                        "the export was changed after it was written"
                    )
                counts[OUTCOME_KEYS[result.outcome]] += 1
                revision_ids.append(result.revision.pk)
        except hf_dataset.HfExportError as exc:
            raise BenchmarkError(str(exc)) from None
        except (PackageError, TaskFileError, KeyError, TypeError) as exc:
            raise BenchmarkError(f"a task of the export cannot be imported: {exc}") from None
        note = note or f"Imported from {provenance.get('benchmark')} v{provenance.get('version')}"
        version = create_version(benchmark, revision_ids, user=user, note=note[:500])
    return ImportResult(version, **counts)


def _description(front: dict) -> str:
    return f"Imported from the Hugging Face export of {front.get('pretty_name', 'a benchmark')}."
