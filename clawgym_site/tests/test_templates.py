"""Template hygiene every page relies on, checked over all the project's templates."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.template import engines

ROOT = Path(settings.BASE_DIR)
TEMPLATES = sorted(
    path
    for path in ROOT.glob("*/templates/**/*.html")
    if not path.is_relative_to(ROOT / ".venv") and ".harness" not in path.parts
) + sorted((ROOT / "templates").glob("**/*.html"))


def test_the_templates_were_found():
    assert len(TEMPLATES) > 40 and any(p.name == "base.html" for p in TEMPLATES)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_comment_spans_lines(path):
    """`{# … #}` ends at the end of its line: a longer one is printed on the page. Use {% comment %} instead."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        assert not re.search(r"\{#(?!.*#\})", line), f"{path.name}:{number}: a {{# comment #}} spans lines"


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_compiles(path):
    engines["django"].from_string(path.read_text())
