import os
import subprocess
import sys
from pathlib import Path

import pytest

from lib.env import ImproperlyConfiguredEnv, env_bool, env_choice, env_int, secret_key

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "CLAWGYM_JOB_ENGINE"}}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60
    )


def test_env_readers_fail_loudly(monkeypatch):
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "ten")
    monkeypatch.setenv("X_CHOICE", "rq")
    with pytest.raises(ImproperlyConfiguredEnv, match="X_BOOL must be a boolean"):
        env_bool("X_BOOL", False)
    with pytest.raises(ImproperlyConfiguredEnv, match="X_INT must be an integer"):
        env_int("X_INT", 1)
    with pytest.raises(ImproperlyConfiguredEnv, match="X_CHOICE must be one of"):
        env_choice("X_CHOICE", "celery", {"celery", "django_q"})
    monkeypatch.setenv("X_BOOL", "off")
    assert env_bool("X_BOOL", True) is False


def test_secret_key_is_generated_once_and_private(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    path = tmp_path / ".secret_key"
    first = secret_key(path)
    assert len(first) > 40 and secret_key(path) == first
    assert path.stat().st_mode & 0o077 == 0
    monkeypatch.setenv("SECRET_KEY", "from-env")
    assert secret_key(path) == "from-env"


def test_defaults_are_embedded_sqlite_django_q_and_debug_off():
    out = run_python(
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='clawgym_site.settings'; django.setup();"
        "from django.conf import settings as s; db=s.DATABASES['default'];"
        "print(db['ENGINE'], db['NAME'].endswith('db.sqlite3'), s.CLAWGYM_JOB_ENGINE, s.DEBUG)"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["django.db.backends.sqlite3", "True", "django_q", "False"]


def test_postgres_and_celery_come_from_the_environment():
    out = run_python(
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='clawgym_site.settings'; django.setup();"
        "from django.conf import settings as s; db=s.DATABASES['default'];"
        "print(db['ENGINE'], db['NAME'], db['HOST'], s.CLAWGYM_JOB_ENGINE, s.CELERY_BROKER_URL)",
        DATABASE_URL="postgres://u@db.example:5433/clawgym",
        CLAWGYM_JOB_ENGINE="celery",
        CELERY_BROKER_URL="redis://cache:6379/3",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "django.db.backends.postgresql",
        "clawgym",
        "db.example",
        "celery",
        "redis://cache:6379/3",
    ]


def test_an_unknown_job_engine_stops_start_up():
    out = run_python(
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='clawgym_site.settings'; django.setup()",
        CLAWGYM_JOB_ENGINE="rq",
    )
    assert out.returncode != 0 and "CLAWGYM_JOB_ENGINE must be one of" in out.stderr


def test_web_process_never_imports_torch_or_transformers():
    out = run_python(
        "import os, sys; os.environ['DJANGO_SETTINGS_MODULE']='clawgym_site.settings';"
        "from clawgym_site.asgi import application; from django.urls import resolve; import clawgym_site.urls;"
        "from django.test import Client; Client().get('/login/');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers'}))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_json_settings_fail_loudly(monkeypatch):
    from lib.env import env_json

    monkeypatch.setenv("X_JSON", '{"supported_tools": ["read"]}')
    assert env_json("X_JSON", {}) == {"supported_tools": ["read"]}
    monkeypatch.setenv("X_JSON", "{not json")
    with pytest.raises(ImproperlyConfiguredEnv, match="X_JSON must be JSON"):
        env_json("X_JSON", {})
