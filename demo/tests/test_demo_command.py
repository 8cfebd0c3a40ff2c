"""`manage.py demo_models` as `make demo` runs it: a long-running process that registers the demo endpoints at the
address it listens on, answers only callers with its key, and disables them when it is stopped (SIGTERM)."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from demo.services import DEMO_ENDPOINTS, disable_demo_endpoints, register_demo_endpoints
from jobs.testing import database_url
from llm.client import check_connection
from llm.models import ModelEndpoint

BASE_DIR = Path(__file__).resolve().parents[2]


def first_line(proc: subprocess.Popen, timeout: float = 60) -> str:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        proc.kill()
        raise AssertionError(f"demo_models printed nothing in {timeout} s: {proc.stderr.read()}") from None


@pytest.mark.django_db(transaction=True)
def test_the_command_serves_the_registered_endpoints_until_stopped():
    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo_models", "--json"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(first_line(proc))
        base_url = started["base_url"]
        assert [e["name"] for e in started["endpoints"]] == list(DEMO_ENDPOINTS)
        endpoints = ModelEndpoint.objects.filter(name__in=DEMO_ENDPOINTS)
        assert {(e.base_url, e.enabled, e.is_demo) for e in endpoints} == {(base_url, True, True)}

        check = check_connection(ModelEndpoint.objects.get(name="demo-judge"))  # with the served key
        assert check.ok and "ClawGym demo model" in check.message, check.message
        assert httpx.get(f"{base_url}/models").status_code == 401  # no key, no answer
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert not ModelEndpoint.objects.filter(name__in=DEMO_ENDPOINTS, enabled=True).exists()
    assert "disabled demo-agent-good" in stderr


@pytest.mark.django_db
def test_a_stopping_server_disables_only_the_endpoints_at_its_address_and_disable_turns_them_all_off():
    register_demo_endpoints("http://127.0.0.1:9/v1")  # another demo server registered them since
    assert disable_demo_endpoints(base_url="http://127.0.0.1:8/v1") == []
    out = StringIO()
    call_command("demo_models", "--disable", "--json", stdout=out)
    assert sorted(json.loads(out.getvalue())["disabled"]) == sorted(DEMO_ENDPOINTS)
    assert not ModelEndpoint.objects.filter(enabled=True).exists()
