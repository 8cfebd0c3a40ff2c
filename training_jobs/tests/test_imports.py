"""The web process and the job workers never import the training stack (torch, transformers, TRL, …).

Checked in a fresh interpreter (this test process imports them for other tests): django.setup() (which also
discovers every app's jobs module, as the workers do), the ASGI and WSGI applications, the Celery app, every view the
URL resolver reaches, every module of every project app and of the training library except tests, migrations,
management commands and the trainer subprocess's package. Training code imports the stack inside its functions
(training.tiny_model, training.masks, training_jobs.exports) or lives in training/trainers/, which only `accelerate
launch` loads.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm", "deepspeed")

# Run in a subprocess: prints {"forbidden": {module: the module whose import brought it in}, "imported": [...],
# "with_extra": the same after importing the modules named in argv[2] too (the check's own control)}.
CHECK = r"""
import importlib, json, os, pkgutil, sys
from pathlib import Path

FORBIDDEN = set(sys.argv[1].split(","))
EXTRA = [m for m in sys.argv[2].split(",") if m]
ROOT = Path.cwd().resolve()
SKIP_PARTS = {"tests", "migrations", "management", "testing", "browser_testing", "conftest"}
SKIP_PREFIXES = ("training.trainers",)  # the trainer subprocess's own code (accelerate launch -m ...)

culprits = {}
imported = []


def load(name):
    importlib.import_module(name)
    imported.append(name)
    for module in list(sys.modules):
        top = module.partition(".")[0]
        if top in FORBIDDEN and top not in culprits:
            culprits[top] = name


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
import django

django.setup()
load("django")  # records anything django.setup() brought in (apps, models, every app's jobs module)
for name in ("clawgym_site.asgi", "clawgym_site.wsgi", "clawgym_site.celery", "clawgym_site.urls",
             "clawgym_site.api_urls"):
    load(name)

from django.urls import URLPattern, URLResolver, get_resolver


def walk(patterns):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            walk(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "view_class", None) or pattern.callback
            load(view.__module__)


walk(get_resolver().url_patterns)

from django.apps import apps

packages = [(Path(config.path).resolve(), config.name) for config in apps.get_app_configs()]
packages.append((ROOT / "training", "training"))  # the library the apps call (no app of its own)
for path, name in packages:
    if path.parent != ROOT:
        continue  # Django's and third-party apps (the venv may live inside the checkout)
    for info in pkgutil.walk_packages([str(path)], prefix=name + "."):
        parts = set(info.name.split("."))
        if parts & SKIP_PARTS or info.name.startswith(SKIP_PREFIXES):
            continue
        load(info.name)
site = dict(culprits)
for name in EXTRA:
    load(name)
print(json.dumps({"forbidden": site, "imported": imported, "with_extra": culprits}))
"""


@pytest.fixture(scope="module")
def report():
    return run_check("safetensors.torch")


def run_check(*extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, ",".join(FORBIDDEN), ",".join(extra)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_web_process_and_workers_never_import_the_training_stack(report):
    # The check really walked the site: the entry points, the views the URLs reach, every app's jobs and API, and
    # the training modules the web process may call (they import the stack inside their functions).
    walked = {
        "clawgym_site.asgi",
        "clawgym_site.wsgi",
        "tasks.views",
        "evaluation.jobs",
        "training_jobs.urls",
        "training_jobs.jobs",
        "training_jobs.api",
        "training_jobs.services.datasets",
    }
    walked |= {"training.tiny_model", "training.masks", "training.serving_front", "training_jobs.exports"}
    assert walked <= set(report["imported"])
    assert report["forbidden"] == {}, f"imported by the web process (module -> whose import brought it): {report}"


def test_the_check_sees_an_import_of_the_stack(report):
    # The same walk, then an import of safetensors.torch (safetensors is a web dependency; its torch module imports
    # torch at its top): torch is named, with the import that brought it in.
    assert report["with_extra"].get("torch") == "safetensors.torch"
