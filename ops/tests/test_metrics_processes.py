"""/metrics of a web server with several processes (uvicorn --workers 2, PROMETHEUS_MULTIPROC_DIR): proxy calls
served by both processes, and every scrape, whichever process answers it, gives their sum."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from jobs.testing import BASE_DIR, database_url
from llm.models import ModelEndpoint
from llm.services import open_proxy_session
from llm.testing import Reply
from ops.tests.helpers import samples

# Not about the database engine (the sum is prometheus_client's), and a server start of 10-60 s.
pytestmark = [pytest.mark.once, pytest.mark.django_db(transaction=True)]

TOKENS_IN = ("clawgym_proxy_tokens_total", (("direction", "input"),))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def two_process_server():
    folder = Path(tempfile.mkdtemp(prefix="clawgym-prom-"))
    port = free_port()
    env = os.environ | {
        "DATABASE_URL": database_url(),
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
    }
    log = tempfile.TemporaryFile()
    args = [
        sys.executable,
        "-m",
        "uvicorn",
        "clawgym_site.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(args, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # two processes importing Django on a busy CI machine
        while True:
            try:
                if httpx.get(f"{url}/metrics", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"uvicorn --workers 2 did not start:\n{log.read().decode()[-3000:]}")
            time.sleep(0.2)
        yield url, folder
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def input_tokens_by_process(folder: Path) -> dict[str, float]:
    """What each process's file says it counted (prometheus_client's own file format)."""
    counted = {}
    for path in folder.glob("counter_*.db"):
        for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            _, name, labels, _ = json.loads(key)
            if name == TOKENS_IN[0] and labels == {"direction": "input"}:
                counted[path.stem.split("_")[1]] = value
    return counted


def test_every_scrape_sums_the_proxy_counters_of_all_web_processes(two_process_server, scripted_upstream):
    url, folder = two_process_server
    endpoint = ModelEndpoint.objects.create(
        name="upstream", base_url=scripted_upstream.base_url, model="real-7b", roles=["agent"], timeout_seconds=20
    )
    session = open_proxy_session(endpoint, subject="rollout:5")
    scripted_upstream.default = Reply.text("ok", usage=(10, 3))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    calls = 0
    while len([v for v in input_tokens_by_process(folder).values() if v]) < 2:  # until both processes served some
        assert calls < 60, f"60 calls, all served by one process: {input_tokens_by_process(folder)}"
        # A new connection each time: the kernel hands connections to either process.
        response = httpx.post(
            f"{url}/proxy/{session.token}/v1/chat/completions", json=body, timeout=20, headers={"Connection": "close"}
        )
        assert response.status_code == 200, response.text
        calls += 1

    assert sum(input_tokens_by_process(folder).values()) == 10 * calls
    for _ in range(4):  # whichever process answers the scrape
        response = httpx.get(f"{url}/metrics", headers={"Connection": "close"}, timeout=10)
        found = samples(response.text)
        assert found[TOKENS_IN] == 10 * calls
        assert found[("clawgym_proxy_streams_in_flight", ())] == 0
        assert ("clawgym_job_runs", (("queue", "default"), ("status", "queued"))) in found  # read once, from the db
