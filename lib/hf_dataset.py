"""Writing a Hugging Face dataset: Parquet files and a dataset card, as the Hub lays out a dataset repository.

The folder holds one Parquet file per split of each configuration (`data/<split>-00000-of-00001.parquet` for the
configuration named `default`, `<config>/<split>-00000-of-00001.parquet` for others) and a README.md whose YAML front
matter says what the Hub's dataset viewer and `datasets` read: `configs` (which files make which split),
`dataset_info` (features, splits with their sizes, as the Hub writes it), the licence and the provenance. Pushed to
the Hub as it is, or read in place with `datasets.load_dataset("parquet", data_files=...)` or
`load_dataset("path/to/folder")`.

Only pyarrow is needed (no `datasets`, no torch): the web process and the commands write these exports. Rows come as
an iterator of dicts and are written a row group at a time, so memory holds one group. The folder is made under a
temporary name beside the target and renamed into place once complete, so a reader never sees half an export.

The features are derived from each configuration's Arrow schema the way `datasets` derives them
(`Features.from_arrow_schema`), and spelled as the Hub writes them in the card (`list: int32`, `struct:`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROW_GROUP = 500
CARD = "README.md"
# The licence the card names when the data has none recorded (the Hub's identifier for "see the card").
UNKNOWN_LICENSE = "other"


class HfExportError(ValueError):
    """The export cannot be written as asked (an unusable target); the message says why."""


@dataclass
class Config:
    """One configuration of the dataset: its columns (an Arrow schema) and its rows, split by split."""

    name: str
    schema: pa.Schema
    splits: dict[str, Callable[[], Iterable[dict]]]  # split name -> a function giving its rows, in order
    description: str = ""


@dataclass
class Card:
    """What the README.md says besides the features: a title, prose, the licence and where the data came from."""

    title: str
    summary: str
    license: str = ""  # an SPDX id or Hub licence name; empty: `other`, with `license_note` saying why
    license_note: str = ""
    provenance: dict = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    body: str = ""  # Markdown after the summary: how the columns are meant, how to load it


@dataclass(frozen=True)
class SplitResult:
    config: str
    split: str
    path: str  # relative to the export folder
    rows: int
    num_bytes: int  # the rows' size in Arrow, what the Hub calls num_bytes
    file_bytes: int


@dataclass(frozen=True)
class HfResult:
    path: Path
    splits: list[SplitResult]

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.splits)

    @property
    def files(self) -> list[str]:
        return [CARD, *(s.path for s in self.splits)]

    def as_dict(self) -> dict:
        return {
            "path": str(self.path),
            "format": "hf",
            "rows": self.rows,
            "files": len(self.files),
            "paths": self.files,
            "splits": {f"{s.config}/{s.split}": s.rows for s in self.splits},
            "bytes": sum(s.file_bytes for s in self.splits) + (self.path / CARD).stat().st_size,
        }


# --- features as the Hub spells them ------------------------------------------------------------------------------


_DTYPES = {
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.binary(): "binary",
    pa.large_binary(): "large_binary",
}


def _feature(arrow_type: pa.DataType) -> dict:
    """One column's type as the card's `features` entry spells it (without its name)."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        key = "list" if pa.types.is_list(arrow_type) else "large_list"
        inner = _feature(arrow_type.value_type)
        if list(inner) == ["dtype"]:
            return {key: inner["dtype"]}
        if list(inner) == ["struct"]:
            return {key: inner["struct"]}
        return {key: inner}
    if pa.types.is_struct(arrow_type):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in arrow_type]}
    if arrow_type in _DTYPES:
        return {"dtype": _DTYPES[arrow_type]}
    raise HfExportError(f"no Hugging Face feature for the Arrow type {arrow_type}")


def features(schema: pa.Schema) -> list[dict]:
    """The card's `dataset_info.features` for a schema: what `datasets.Features.from_arrow_schema(schema)` writes."""
    return [{"name": f.name, **_feature(f.type)} for f in schema]


# --- writing ------------------------------------------------------------------------------------------------------


def _data_folder(config: Config) -> str:
    return "data" if config.name == "default" else config.name


def _write_split(path: Path, schema: pa.Schema, rows: Iterable[dict]) -> tuple[int, int]:
    """Write the rows as one Parquet file, a row group at a time; (how many, their size in Arrow)."""
    count = num_bytes = 0
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        batch: list[dict] = []
        for row in rows:
            batch.append(row)
            if len(batch) == ROW_GROUP:
                num_bytes += _flush(writer, schema, batch)
                count += len(batch)
                batch = []
        if batch or not count:
            # An empty split is still a file with the schema, so every split named in the card can be loaded.
            num_bytes += _flush(writer, schema, batch)
            count += len(batch)
    return count, num_bytes


def _flush(writer: pq.ParquetWriter, schema: pa.Schema, batch: list[dict]) -> int:
    table = pa.Table.from_pylist(batch, schema=schema)
    writer.write_table(table)
    return table.nbytes


def _card_text(card: Card, configs: list[Config], results: list[SplitResult]) -> str:
    infos, config_files = [], []
    for config in configs:
        mine = [r for r in results if r.config == config.name]
        folder = _data_folder(config)
        info = {
            "features": features(config.schema),
            "splits": [{"name": r.split, "num_bytes": r.num_bytes, "num_examples": r.rows} for r in mine],
            "download_size": sum(r.file_bytes for r in mine),
            "dataset_size": sum(r.num_bytes for r in mine),
        }
        files = [{"split": r.split, "path": f"{folder}/{r.split}-*"} for r in mine]
        if len(configs) > 1 or config.name != "default":
            info = {"config_name": config.name, **info}
        infos.append(info)
        entry = {"config_name": config.name, "data_files": files}
        if config is configs[0]:
            entry["default"] = True
        config_files.append(entry)
    front = {
        "license": card.license or UNKNOWN_LICENSE,
        "pretty_name": card.title,
        "tags": ["clawgym", *card.tags],
        "configs": config_files,
        "dataset_info": infos[0] if len(infos) == 1 else infos,
        # Plain JSON values only (a str enum, a Decimal or a datetime as its text), which YAML writes as it reads.
        "clawgym": json.loads(json.dumps(card.provenance, default=str)),
    }
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", "", f"# {card.title}"]
    lines += ["", card.summary.strip()]
    lines += ["", "## Licence", "", _licence_text(card)]
    lines += ["", "## Configurations and splits", ""]
    for config in configs:
        mine = [r for r in results if r.config == config.name]
        counts = ", ".join(f"`{r.split}` {r.rows} rows" for r in mine)
        lines.append(f"- `{config.name}`: {counts}.{' ' + config.description if config.description else ''}")
    lines += ["", "## Provenance", ""]
    lines += [f"- {key}: {_provenance_value(value)}" for key, value in card.provenance.items()]
    if card.body:
        lines += ["", card.body.strip()]
    return "\n".join(lines) + "\n"


def _licence_text(card: Card) -> str:
    if card.license:
        return f"`{card.license}`{'. ' + card.license_note if card.license_note else ''}"
    note = card.license_note or "No licence was recorded for this data in ClawGym."
    return f"`{UNKNOWN_LICENSE}`: {note} Ask its owners before redistributing it."


def _provenance_value(value) -> str:
    if isinstance(value, list | tuple):
        shown = ", ".join(f"`{v}`" for v in value[:20])
        return shown + (f" and {len(value) - 20} more" if len(value) > 20 else "") if value else "none"
    return f"`{value}`" if value not in (None, "") else "none"


def write(out, configs: list[Config], card: Card, *, force: bool = False) -> HfResult:
    """Write the configurations and the card to the folder `out` (replaced only with `force` when not empty)."""
    out = Path(out)
    if out.is_symlink():
        raise HfExportError(f"{out} is a symbolic link; name a new folder")
    if out.exists() and not out.is_dir():
        raise HfExportError(f"{out} is a file; name a folder to write the dataset into")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise HfExportError(f"{out} already exists and is not empty; use --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        results = []
        for config in configs:
            folder = tmp / _data_folder(config)
            folder.mkdir(exist_ok=True)
            for split, rows in config.splits.items():
                name = f"{split}-00000-of-00001.parquet"
                count, num_bytes = _write_split(folder / name, config.schema, rows())
                size = (folder / name).stat().st_size
                relative = f"{folder.name}/{name}"
                results.append(SplitResult(config.name, split, relative, count, num_bytes, size))
        (tmp / CARD).write_text(_card_text(card, configs, results), encoding="utf-8")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return HfResult(path=out, splits=results)


def _move_into_place(tmp: Path, out: Path) -> None:
    if not out.exists() or not any(out.iterdir()):
        with contextlib.suppress(FileNotFoundError):
            out.rmdir()
        os.replace(tmp, out)
        return
    aside = out.with_name(f".{out.name}.replaced-{uuid.uuid4().hex[:12]}")
    os.replace(out, aside)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(aside, out)
        raise
    shutil.rmtree(aside)


def download_response(write_to: Callable[[Path], object], top: str):
    """An export as one .zip download under the top folder `top` (a folder cannot be downloaded): `write_to(path)`
    writes the export to a fresh folder, which is zipped and removed before the response is made."""
    from django.http import FileResponse
    from django.utils.http import content_disposition_header

    with tempfile.TemporaryDirectory(prefix="clawgym-hf-") as tmp:
        folder = Path(tmp) / "export"
        write_to(folder)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                archive.write(path, f"{top}/{path.relative_to(folder).as_posix()}")
    buffer.seek(0)
    response = FileResponse(buffer, content_type="application/zip")
    response["Content-Disposition"] = content_disposition_header(True, f"{top}.zip")
    return response


# --- reading back -------------------------------------------------------------------------------------------------


def read_card(folder, load_yaml: Callable[[str], object]) -> dict:
    """The YAML front matter of the folder's README.md; HfExportError when there is none.

    An export read back may come from anyone: `load_yaml` is the bounded loader the caller reads such text with
    (tasks.formats.safe_parse.load_yaml, which refuses YAML bombs; lib imports no app, so it is handed in)."""
    path = Path(folder) / CARD
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise HfExportError(f"{folder} has no {CARD}: not a Hugging Face dataset export") from None
    except UnicodeDecodeError:
        raise HfExportError(f"{path} is not UTF-8 text") from None
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        raise HfExportError(f"{path} has no YAML front matter")
    try:
        front = load_yaml(text[4 : text.index("\n---\n", 4)])
    except yaml.YAMLError as exc:
        raise HfExportError(f"{path}: its front matter is not valid YAML ({exc})") from None
    if not isinstance(front, dict):
        raise HfExportError(f"{path}: its front matter is not a mapping")
    return front


def read_rows(folder, relative_path: str, columns: list[str] | None = None) -> Iterable[dict]:
    """The rows of one Parquet file of the export, a row group at a time."""
    root = Path(folder).resolve()
    path = (root / relative_path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise HfExportError(f"{relative_path} is not a file inside {folder}")
    try:
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            yield from parquet.read_row_group(group, columns=columns).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise HfExportError(f"{relative_path} cannot be read as Parquet: {exc}") from None


def clawgym_version(base_dir) -> str:
    """The code that made an export: the git commit of the checkout (with `-dirty` when edited), else `unknown`."""
    try:
        done = subprocess.run(
            ["git", "-C", str(base_dir), "describe", "--always", "--dirty", "--abbrev=40"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"
