"""File viewers: turn a task file's bytes into something safe to show in a page.

Task content comes from imports, LLMs and users: nothing in it may reach the page as HTML. Text is escaped
by the templates; Markdown goes through `render_markdown`, which never passes raw HTML or script URLs on.
"""

import csv
import html
import io
import json
import posixpath
import re
from dataclasses import dataclass, field

import markdown
from django.utils.safestring import SafeString, mark_safe
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from markdown.util import AMP_SUBSTITUTE

from .formats.safe_parse import load_json

# Limits keep one huge file from making a page slow; the download link always gives the whole file.
MAX_TEXT_BYTES = 512 * 1024
MAX_TEXT_LINES = 5000
MAX_CSV_ROWS = 500
BINARY_SNIFF_BYTES = 8192

MARKDOWN_EXTENSIONS = {".md", ".markdown"}
CSV_EXTENSIONS = {".csv": ",", ".tsv": "\t"}
JSON_EXTENSIONS = {".json"}

_SAFE_SCHEMES = {"http", "https", "mailto"}
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")


def _safe_url(url: str) -> bool:
    """Relative URLs and http(s)/mailto pass; javascript:, data:, vbscript: and the like do not."""
    plain = html.unescape(url.replace(AMP_SUBSTITUTE, "&"))
    # Browsers ignore control characters and whitespace inside a scheme ("java\tscript:"), so must we.
    plain = re.sub(r"[\x00-\x20\x7f]", "", plain).lower()
    match = _SCHEME.match(plain)
    return match is None or match.group(1) in _SAFE_SCHEMES


class _SanitizeTree(Treeprocessor):
    def run(self, root):
        for el in root.iter():
            if el.tag == "a":
                href = el.get("href", "")
                if not _safe_url(href):
                    el.attrib.pop("href", None)
                else:
                    el.set("rel", "nofollow noopener noreferrer")
            elif el.tag == "img":
                # Remote images would load from anywhere (tracking, no-CDN rule): show the alt text instead.
                alt = el.get("alt", "")
                el.attrib.clear()
                el.tag = "span"
                el.set("class", "md-image")
                el.text = f"[image: {alt}]" if alt else "[image]"


class SafeMarkdown(Extension):
    """Raw HTML in the source is shown as text, and only safe link URLs are kept."""

    def extendMarkdown(self, md):
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(_SanitizeTree(md), "clawgym_sanitize", 0)


def render_markdown(text: str) -> SafeString:
    rendered = markdown.markdown(
        text, extensions=[SafeMarkdown(), "fenced_code", "tables", "sane_lists"], output_format="html"
    )
    return mark_safe(rendered)  # noqa: S308 -- raw HTML is disabled and URLs are checked above


def is_binary(data: bytes) -> bool:
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True  # not UTF-8: offered for download rather than shown garbled
    return False


def decode_text(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


@dataclass
class FileView:
    """What the file viewer template shows. `kind` is one of text, markdown, csv, json, binary."""

    kind: str
    size: int
    lines: list[str] = field(default_factory=list)
    html: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    total_rows: int = 0
    truncated: bool = False
    note: str = ""

    @property
    def rows_cut(self) -> int:
        return max(0, self.total_rows - len(self.rows))


def _text_lines(text: str, size: int) -> tuple[list[str], bool]:
    lines = text.splitlines()
    truncated = size > MAX_TEXT_BYTES or len(lines) > MAX_TEXT_LINES
    return lines[:MAX_TEXT_LINES], truncated


def _csv_view(text: str, delimiter: str, size: int) -> FileView:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = []
    total = 0
    try:
        for row in reader:
            total += 1
            if len(rows) <= MAX_CSV_ROWS:
                rows.append(row)
    except csv.Error as exc:
        lines, truncated = _text_lines(text, size)
        note = f"Not readable as CSV ({exc}); shown as text."
        return FileView("text", size, lines=lines, truncated=truncated, note=note)
    if not rows:
        return FileView("text", size, note="Empty CSV file.")
    header, body = rows[0], rows[1 : MAX_CSV_ROWS + 1]
    return FileView("csv", size, header=header, rows=body, total_rows=total - 1)


def view_file(path: str, data: bytes) -> FileView:
    """Choose how to show a file from its extension and content."""
    size = len(data)
    if is_binary(data):
        return FileView("binary", size)
    ext = posixpath.splitext(path.lower())[1]
    shown = data[:MAX_TEXT_BYTES]
    text = decode_text(shown)
    if ext in MARKDOWN_EXTENSIONS:
        note = "Only the first part of the file is shown." if size > MAX_TEXT_BYTES else ""
        return FileView("markdown", size, html=render_markdown(text), truncated=size > MAX_TEXT_BYTES, note=note)
    if ext in CSV_EXTENSIONS:
        # The row count covers the whole file, so read it all (file sizes are capped at import).
        return _csv_view(decode_text(data), CSV_EXTENSIONS[ext], size)
    if ext in JSON_EXTENSIONS and size <= MAX_TEXT_BYTES:
        try:
            # An agent's or an import's JSON may nest thousands deep: load_json says so (a ValueError), and
            # indenting, done in Python, has less room than parsing (a RecursionError).
            pretty = json.dumps(load_json(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError) as exc:
            lines, truncated = _text_lines(text, size)
            why = "Nested too deeply to indent" if isinstance(exc, RecursionError) else f"Not valid JSON ({exc})"
            note = f"{why}; shown as text."
            return FileView("text", size, lines=lines, truncated=truncated, note=note)
        lines, truncated = _text_lines(pretty, size)
        return FileView("json", size, lines=lines, truncated=truncated)
    lines, truncated = _text_lines(text, size)
    return FileView("text", size, lines=lines, truncated=truncated)
