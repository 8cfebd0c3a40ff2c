"""Base models: the folders runs train from, registered by name (BaseModel), added by path or from a shipped
converter (training.converters). Every change goes through here: the page, the API, the admin's form and
`manage.py base_models` call the same functions.

- add_by_path: a folder already on the machines (weights, config.json, a tokenizer); its architecture and context
  length are read from config.json. Nothing is copied.
- add_converted: convert once into CLAWGYM_TRAINING_DIR/base-models/NAME (the var folder's training/ unless set),
  in a subprocess (`python -m training.converters`: torch, the weights and the GGUF file never enter the process
  that asked), then register it. A folder converted already is registered without converting again; a name
  registered already is returned as it is.
- request_conversion: the same as the `training.convert_base_model` job on the gpu queue (a conversion takes minutes
  on a CPU; the folder has to be where training runs), answered at once with its JobRun; a conversion of the same
  name already queued or running is returned instead of a second one.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from jobs import enqueue
from jobs.models import JobRun
from training import converters

from .child_env import child_env
from .folders import training_root
from .job_kinds import CONVERT_JOB
from .models import BaseModel

CONVERT_TIMEOUT_SECONDS = 1800.0  # 2 busy cores: ~100 s for SmolLM2-135M, most of it importing and dequantising
TEMPLATE_NAME = "clawgym-chatml-tools"  # BaseModel.chat_template of a converted model (in its folder's tokenizer)


class BaseModelError(ValueError):
    pass


def base_models_dir() -> Path:
    return training_root() / "base-models"


def folder_facts(path) -> dict:
    """architecture and context_length from a model folder's config.json; BaseModelError saying what is missing."""
    folder = Path(path)
    if not folder.is_absolute():
        raise BaseModelError(f"{path!r} is not an absolute path")
    if not folder.is_dir():
        raise BaseModelError(f"{folder} is not a folder on this machine")
    try:
        config = json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        raise BaseModelError(f"{folder} holds no config.json: not a model folder") from None
    except ValueError as exc:
        raise BaseModelError(f"{folder}/config.json is not JSON: {exc}") from None
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise BaseModelError(f"{folder} holds no tokenizer (tokenizer.json or tokenizer_config.json)")
    architectures = config.get("architectures") if isinstance(config, dict) else None
    context = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return {
        "architecture": str(architectures[0])[:100] if isinstance(architectures, list) and architectures else "",
        "context_length": context if isinstance(context, int) and context > 0 else None,
    }


def named_or_folder(value: str) -> tuple[BaseModel | None, str]:
    """A command line's base model: a registered base model's name, else a model folder, a relative one taken from
    the folder the command runs in (the pages and the API ask for absolute paths: they run elsewhere). Returns
    (the row, "") or (None, the folder's absolute path); BaseModelError for a bare word that names neither."""
    row = BaseModel.objects.filter(name=value).first()
    if row is not None:
        return row, ""
    if os.sep not in value and not os.path.exists(value):
        raise BaseModelError(
            f"{value!r} is neither a registered base model (`manage.py base_models list`) nor a model folder"
        )
    return None, os.path.abspath(value)


def add_by_path(name: str, path: str, *, notes: str = "", chat_template: str = "") -> tuple[BaseModel, bool]:
    """Register the folder `path` as the base model `name`: (the row, whether it was created). The same name and path
    again returns the row; the name taken by another path is refused."""
    existing = BaseModel.objects.filter(name=name).first()
    if existing is not None:
        if Path(existing.path) == Path(path):
            return existing, False
        raise BaseModelError(f"the base model {name!r} is registered already, with the folder {existing.path}")
    facts = folder_facts(path)
    try:
        with transaction.atomic():
            row = BaseModel.objects.create(name=name, path=str(path), notes=notes, chat_template=chat_template, **facts)
    except IntegrityError:  # registered meanwhile by another request
        return add_by_path(name, path, notes=notes, chat_template=chat_template)
    return row, True


def add_converted(name: str, *, log=print) -> tuple[BaseModel, bool]:
    """Convert the shipped model `name` (once) and register it: (the row, whether it was created)."""
    converter = converters.get(name)
    existing = BaseModel.objects.filter(name=name).first()
    if existing is not None and converters.is_converted(existing.path):
        return existing, False
    out = base_models_dir() / name
    if converters.is_converted(out):
        log(f"{out} is converted already")
    else:
        log(f"converting {converter.title} from the package {converter.package} into {out}")
        marker = convert_in_subprocess(name, out)
        log(f"converted in {marker['seconds']} s: {marker['parameters']:,} parameters")
    marker = converters.read_marker(out)
    notes = (
        f"{converter.title} ({converter.license}) from the PyPI package {converter.package}, converted by "
        f"ClawGym in {marker['seconds']} s. {converter.notes}"
    )
    if existing is not None:  # registered, its folder gone: point it at the new conversion
        BaseModel.objects.filter(pk=existing.pk).update(
            path=str(out), notes=notes, chat_template=TEMPLATE_NAME, **folder_facts(out)
        )
        existing.refresh_from_db()
        return existing, False
    return add_by_path(name, str(out), notes=notes, chat_template=TEMPLATE_NAME)


def convert_in_subprocess(name: str, out: Path, *, timeout: float = CONVERT_TIMEOUT_SECONDS) -> dict:
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "training.converters", name, str(out)]
    try:
        done = subprocess.run(
            command,
            cwd=settings.BASE_DIR,
            env=child_env(HF_HUB_OFFLINE="1"),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise BaseModelError(f"the conversion of {name} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise BaseModelError(f"the conversion of {name} failed (exit {done.returncode}): " + " / ".join(tail))
    return json.loads(done.stdout.strip().splitlines()[-1])


def active_conversion(name: str):
    return (
        JobRun.objects.filter(kind=CONVERT_JOB, status__in=JobRun.ACTIVE, params__name=name)
        .order_by("-created_at")
        .first()
    )


def request_conversion(name: str, *, user):
    """Queue the conversion of the shipped model `name`; its JobRun (a running one of the same name if there is
    one). BaseModelError when the name is unknown or the model is registered already."""
    converters.get(name)
    if BaseModel.objects.filter(name=name).exists():
        raise BaseModelError(f"the base model {name!r} is registered already")
    running = active_conversion(name)
    if running is not None:
        return running
    return enqueue(CONVERT_JOB, created_by=user, name=name)


def listing() -> list[dict]:
    """Each base model as the command's --json and the API show it, with whether its folder is on this machine."""
    return [describe(m) for m in BaseModel.objects.all()]


def describe(m: BaseModel) -> dict:
    return {
        "name": m.name,
        "path": m.path,
        "architecture": m.architecture,
        "chat_template": m.chat_template,
        "context_length": m.context_length,
        "notes": m.notes,
        "created_at": m.created_at.isoformat(),
        "on_this_machine": Path(m.path).is_dir(),
    }


def converter_choices() -> list[dict]:
    """The shipped converters, each with whether its package is installed and its model registered."""
    registered = set(BaseModel.objects.filter(name__in=list(converters.CONVERTERS)).values_list("name", flat=True))
    out = []
    for c in converters.CONVERTERS.values():
        try:
            converters.source_file(c)
            installed = True
        except converters.ConversionError:
            installed = False
        out.append(
            {
                "name": c.name,
                "title": c.title,
                "package": c.package,
                "license": c.license,
                "installed": installed,
                "registered": c.name in registered,
                "converting": active_conversion(c.name),
            }
        )
    return out
