"""The import graph's rules (issue 22), checked by scripts/import_graph.py on a planted tree and on this one."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plant(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


PLANTED = {
    "clawgym_site/__init__.py": "",
    "clawgym_site/settings.py": "CLAWGYM_CELERY_APP = 'clawgym_site.celery.app'\n",
    "clawgym_site/htmx.py": "",
    "lib/__init__.py": "",
    "lib/pages.py": "from alpha import models\n",
    "lib/pure.py": "import json\n",
    "lib/uses_pages.py": "from lib import pages\n",
    # A plain library may import a lib module that reaches no Django and no app, and nothing else of the project.
    "training/__init__.py": "",
    "training/ok.py": "from lib import pure\nfrom training import __name__\n",
    "training/bad.py": "def run():\n    import django\n    from lib import uses_pages\n    from beta.views import page\n",
    "sandbox/__init__.py": "",
    "alpha/__init__.py": "",
    # A string naming the settings package and django.conf's settings are no arrows.
    "alpha/models.py": "from django.conf import settings\nAPP = settings.CLAWGYM_CELERY_APP\nfrom beta.views import page\n",
    "alpha/views.py": "from clawgym_site import htmx\n",
    "alpha/migrations/__init__.py": "",
    "alpha/migrations/0001_initial.py": "import clawgym_site.settings\n",
    "beta/__init__.py": "",
    "beta/views.py": "from alpha import models\n\ndef page():\n    pass\n",
    "beta/a.py": "from . import b\nthing = 1\n",
    "beta/b.py": "from .a import thing\n",
    "beta/c.py": "def run():\n    import torch\n    from beta import views\n    from .d import later\n",
    "beta/d.py": "from beta.c import run\nlater = 1\n",
    "beta/tests/__init__.py": "",
    "beta/tests/test_views.py": "def test_page():\n    from beta.views import page\n",
    # Past 600 lines: a module that holds more than one thing; a test or the settings may be as long.
    "beta/long.py": "x = 1\n" * 601,
    "beta/short.py": "x = 1\n" * 600,
    "beta/tests/test_long.py": "x = 1\n" * 900,
    "clawgym_site/long_settings.py": "X = 1\n" * 900,
}


def test_the_tool_finds_a_planted_circle_and_an_upward_arrow(import_graph, tmp_path, capsys):
    plant(tmp_path, PLANTED)
    result = import_graph.figures(import_graph.build(tmp_path))

    settings = result["into_settings"]
    assert settings["app_arrows"] == ["alpha -> clawgym_site"]
    assert [Path(p).relative_to(tmp_path).as_posix() for p in settings["files"]] == ["alpha/views.py"]
    assert settings["imports"] == 1  # the migration is not parsed
    assert result["lib_to_apps"] == ["lib.pages -> alpha.models"]
    assert result["plain_libraries"] == {
        "sandbox": [],
        "training": ["training.bad -> beta.views", "training.bad -> django", "training.bad -> lib.uses_pages"],
    }
    between = result["circles_between_apps"]["module_level"]
    assert between["circles"] == [["alpha", "beta"]]
    assert len(between["arrows_back_up"]) == 1
    assert result["circles_inside_apps"]["module_level"] == {"beta": [["beta.a", "beta.b"]]}
    # beta.c -> beta.d only inside a function: a circle only once those count.
    assert result["circles_inside_apps"]["with_functions"] == {"beta": [["beta.a", "beta.b"], ["beta.c", "beta.d"]]}
    functions = result["imports_in_functions"]["per_app"]["beta"]
    assert functions == {"code": 3, "code_project": 2, "heavy_optional": 1, "tests": 1}

    assert [Path(m).relative_to(tmp_path).as_posix() for m in result["long_modules"]] == ["beta/long.py (601)"]

    assert import_graph.main(["--root", str(tmp_path), "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["into_settings"]["files"] == ["alpha/views.py"] and last["long_modules"] == ["beta/long.py (601)"]


def test_arrows_back_up_are_the_fewest_that_break_every_circle(import_graph):
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "b"), ("d", "a")}
    assert import_graph.arrows_back_up(["a", "b", "c", "d"], edges) == ["b -> c"]


@pytest.fixture(scope="module")
def this_tree(import_graph):
    return import_graph.figures(import_graph.build(ROOT))


def test_no_arrow_points_into_the_settings_package(this_tree):
    # Tests included: the settings package holds settings, URLs and the Celery app only (STYLE rule 12).
    assert this_tree["into_settings"]["files"] == []


def test_the_library_package_imports_no_app(this_tree):
    assert this_tree["lib_to_apps"] == []


def test_the_plain_libraries_import_no_django_and_no_app(this_tree):
    # sandbox and training run where Django is not set up: the trainer subprocess, a model server's front, a sandbox.
    assert this_tree["plain_libraries"] == {"sandbox": [], "training": []}


def test_no_circle_between_apps_at_module_level(this_tree):
    assert this_tree["circles_between_apps"]["module_level"]["circles"] == []


def test_no_circle_between_apps_even_through_imports_in_functions(this_tree):
    # Tests included: a test that exercises another app's work lives in that app (or in clawgym_site/tests, above all).
    assert this_tree["circles_between_apps"]["with_functions"]["circles"] == []


def test_no_circle_inside_an_app(this_tree):
    assert this_tree["circles_inside_apps"] == {"module_level": {}, "with_functions": {}}


def test_no_module_of_the_apps_is_over_600_lines(this_tree):
    assert this_tree["long_modules"] == []
