"""The compose stack under test: docker-compose.yml + deploy/compose.test.yml, brought up as a project of its own.

`Stack` drives `docker-compose` (Debian's 1.29, or whatever `CLAWGYM_COMPOSE` names) with a project name unique to
the test session, its secrets made up on the spot, the front's port an ephemeral one on 127.0.0.1, and the sandbox
workers' scratch folder (bind-mounted at the same path, see docker-compose.yml) a fresh one under /tmp. Compose gets
no variable of the caller's shell but those that reach the engine: a shell that also runs the app (its
CLAWGYM_PROXY_PUBLIC_URL, CLAWGYM_SANDBOX_BACKEND, …) changes nothing. `down()` removes the containers, the networks
and the volumes, and the sandbox containers the workers left behind.

`Api` is the API seen from the host (token auth), `SolvingModel` the scripted model: an OpenAI-compatible server
(llm.testing.ScriptedUpstream) on the host's bridge address, which the web container's proxy reaches as
host.docker.internal; it answers each agent by the example task it was given, writing the task's reference solution.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import httpx

from llm.testing import Reply, ScriptedUpstream

BASE_DIR = Path(__file__).resolve().parents[2]
EXAMPLES = BASE_DIR / "examples" / "tasks"
COMPOSE = shlex.split(os.environ.get("CLAWGYM_COMPOSE", "docker-compose"))
FRONT_IMAGE = "clawgym/front:latest"
SANDBOX_REPLICAS = 2
# What docker-compose takes from the caller's environment: where the engine is, and what a process needs to run.
ENGINE_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY")


def run(argv: list[str], *, timeout: float = 120, check: bool = True, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{shlex.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


class Stack:
    def __init__(self, project: str | None = None):
        self.project = project or f"clawgym-test-{os.getpid()}"
        # Short: a rollout's Unix socket lives under it (108 bytes at most).
        self.scratch = Path(tempfile.mkdtemp(prefix="cgd-", dir="/tmp"))
        self.scratch.chmod(0o755)  # the sandbox's uid traverses it
        self.env = {name: os.environ[name] for name in ENGINE_ENV if name in os.environ} | {
            "SECRET_KEY": secrets.token_urlsafe(32),
            "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
            "POSTGRES_SANDBOX_PASSWORD": secrets.token_urlsafe(16),
            "REDIS_PASSWORD": secrets.token_urlsafe(16),
            "CLAWGYM_WEB_PORT": "127.0.0.1:",  # an ephemeral port, on loopback only
            "CLAWGYM_WEB_PROCESSES": "2",
            "CLAWGYM_DEFAULT_CONCURRENCY": "2",
            "CLAWGYM_SANDBOX_CONCURRENCY": "2",
            "CLAWGYM_ROLLOUT_SLOTS": "2",
            "CLAWGYM_SANDBOX_SCRATCH": str(self.scratch),
            # A worker host that disappears is noticed within seconds, not the deployment's ten minutes: its runs'
            # heartbeats are stale after 15 s, and the scheduler's reaper looks every 5 s.
            "CLAWGYM_JOB_STALE_SECONDS": "15",
            "CLAWGYM_PERIODIC_SECONDS": json.dumps({"jobs.recover_lost": 5}),
            "CLAWGYM_WORKER_BEAT_SECONDS": "5",
            "CLAWGYM_WORKER_SEEN_SECONDS": "30",
        }
        self.url = ""
        self.admin_password = secrets.token_urlsafe(16)

    # --- docker-compose ---
    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        files = ["-f", str(BASE_DIR / "docker-compose.yml"), "-f", str(BASE_DIR / "deploy" / "compose.test.yml")]
        return run(
            [*COMPOSE, "-p", self.project, "--project-directory", str(BASE_DIR), *files, *args],
            timeout=timeout,
            check=check,
            env=self.env,
        )

    def up(self) -> None:
        """Everything up (compose waits for the database, Redis and the migrations), then healthy, then the URL."""
        self.compose("up", "-d", "--no-build", "--scale", f"sandbox-worker={SANDBOX_REPLICAS}", timeout=600)
        self.wait_healthy()
        host, port = self.compose("port", "front", "8000").stdout.strip().rsplit(":", 1)
        self.url = f"http://{host}:{port}"

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).stdout.split()

    def wait_healthy(self, timeout: float = 600) -> None:
        """Until every container of the stack (the one-shot migrate aside) is running and healthy."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            services = Counter(name.split("/")[0] for name in states)
            expected = {
                "db": 1,
                "redis": 1,
                "front": 1,
                "web": 1,
                "worker": 1,
                "sandbox-worker": SANDBOX_REPLICAS,
                "scheduler": 1,
            }
            if all(services[s] == n for s, n in expected.items()) and set(states.values()) == {"healthy"}:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the stack is not healthy after {timeout} s: {states}\n{self.logs()}")
            time.sleep(2)

    def states(self) -> dict[str, str]:
        """{service/container: healthy, unhealthy, starting, or the state of a container not running}, in one call."""
        listed = run(
            [
                "docker",
                "ps",
                "-a",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
                "--format",
                '{{.Label "com.docker.compose.service"}}/{{.ID}} {{.State}} {{.Status}}',
            ]
        )
        states = {}
        for line in listed.stdout.splitlines():
            name, state, status = line.split(" ", 2)
            if name.startswith("migrate/"):
                continue
            marks = {"(unhealthy)": "unhealthy", "(healthy)": "healthy", "(health: starting)": "starting"}
            health = next((h for mark, h in marks.items() if mark in status), "no healthcheck")
            states[name] = health if state == "running" else state
        return states

    def logs(self, *services: str, tail: int = 60) -> str:
        return self.compose("logs", "--no-color", f"--tail={tail}", *services, check=False).stdout

    def manage(self, *args: str, timeout: float = 120) -> str:
        """manage.py in the web container; its stdout."""
        return self.compose("exec", "-T", "web", "python", "manage.py", *args, timeout=timeout).stdout

    def query(self, code: str, container: str = "") -> object:
        """Run Python (Django set up) that prints one JSON value last in the web container, or in `container` (an id);
        that value."""
        if container:
            out = run(["docker", "exec", container, "python", "manage.py", "shell", "-c", code]).stdout
        else:
            out = self.manage("shell", "-c", code)
        return json.loads(out.strip().splitlines()[-1])

    def network(self, name: str) -> str:
        """The engine's name of one of the compose file's networks (docker-compose 1.29's: project_name)."""
        return f"{re.sub(r'[^-_a-z0-9]', '', self.project.lower())}_{name}"

    @contextmanager
    def host_proxy(self):
        """A proxy on this host in front of the published port, as the README's TLS proxy is (the front's own image
        on the host's network, so that it sees this host's clients by their loopback addresses, 127.0.0.2 and so on,
        and trusts no one's X-Forwarded-For): yields its URL."""
        with socket.socket() as probe:  # a free port on loopback, for nginx to listen on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        published = self.url.rsplit(":", 1)[1]
        name = f"{self.project}-host-proxy"
        run(
            [
                "docker",
                "run",
                "-d",
                "--rm",
                "--name",
                name,
                "--network",
                "host",
                "--label",
                f"clawgym.test={self.project}",
                "-e",
                f"CLAWGYM_FRONT_LISTEN=127.0.0.1:{port}",
                "-e",
                f"CLAWGYM_FRONT_UPSTREAM=127.0.0.1:{published}",
                "-e",
                "CLAWGYM_FRONT_TRUSTED_PROXIES=",
                FRONT_IMAGE,
            ]
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{url}/healthz", timeout=5)
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        logs = run(["docker", "logs", name], check=False)
                        raise AssertionError(f"the host proxy never answered: {logs.stdout}{logs.stderr}") from None
                    time.sleep(0.5)
            yield url
        finally:
            run(["docker", "rm", "-f", name], check=False)

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "-t", "5", timeout=300, check=False)
        left = run(["docker", "ps", "-aq", "--filter", f"label=clawgym.test={self.project}"], check=False)
        for container in left.stdout.split():
            run(["docker", "rm", "-f", container], check=False)
        for container in self.sandbox_containers():
            run(["docker", "rm", "-f", container], check=False)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def sandbox_containers(self) -> list[str]:
        """Sandbox containers (the engine's, not the project's) with a workspace in this stack's scratch folder:
        those a killed worker could not remove. Other users of the engine have their own."""
        labelled = run(["docker", "ps", "-aq", "--filter", "label=clawgym.sandbox"], check=False).stdout.split()
        if not labelled:
            return []
        mounts = run(
            ["docker", "inspect", "-f", "{{.Id}} {{range .Mounts}}{{.Source}} {{end}}", *labelled], check=False
        )
        prefix = f"{self.scratch}/"
        return [
            line.split()[0]
            for line in mounts.stdout.splitlines()
            if any(source.startswith(prefix) for source in line.split()[1:])
        ]

    # --- the API ---
    def api(self) -> Api:
        self.manage("ensure_admin", "--username", "deploy-admin", "--password", self.admin_password)
        answer = httpx.post(
            f"{self.url}/api/auth/token/",
            data={"username": "deploy-admin", "password": self.admin_password},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return Api(self.url, answer.json()["token"])


class Api:
    def __init__(self, url: str, token: str):
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60)

    def get(self, path: str, **params) -> dict:
        answer = self.client.get(path, params=params)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text[:2000]}"
        return answer.json()

    def post(self, path: str, expect: int = 200, **kwargs) -> dict | list:
        answer = self.client.post(path, **kwargs)
        assert answer.status_code == expect, f"POST {path}: {answer.status_code} {answer.text[:2000]}"
        return answer.json()

    def wait_job(self, job_id: int, timeout: float = 180) -> dict:
        return self.wait(
            f"/api/jobs/{job_id}/", lambda job: job["status"] in ("succeeded", "failed", "cancelled"), timeout
        )

    def wait(self, path: str, done, timeout: float, **params) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            body = self.get(path, **params)
            if done(body):
                return body
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} after {timeout} s: {json.dumps(body)[:3000]}")
            time.sleep(1)


def example_tasks() -> dict[str, dict]:
    """{task id: {"instruction", "solution": {path: text}, "rubric"}} of examples/tasks."""
    tasks = {}
    for folder in sorted(EXAMPLES.iterdir()):
        entry = json.loads((folder / "data_entry.json").read_text())
        solution = folder / "solution"
        files = {str(p.relative_to(solution)): p.read_text() for p in sorted(solution.rglob("*")) if p.is_file()}
        tasks[folder.name] = {
            "instruction": entry["user_query"],
            "solution": files,
            "rubric": bool(entry.get("rubric")),
        }
    return tasks


class SolvingModel:
    """The scripted model: to an agent's first request it answers with writes of its task's reference solution, to
    the next one "Done.". `hold[task] = seconds` delays the first answer for that task (an agent mid-rollout)."""

    def __init__(self, tasks: dict[str, dict]):
        self.tasks = tasks
        self.hold: dict[str, float] = {}
        self.upstream = ScriptedUpstream()
        self.upstream.responder = self.answer

    def task_of(self, request: dict) -> str:
        text = json.dumps([m.get("content") for m in request.get("messages", []) if m.get("role") == "user"])
        for task, spec in self.tasks.items():
            if json.dumps(spec["instruction"])[1:-1][:200] in text:
                return task
        raise AssertionError(f"no example task's instruction in the request: {text[:500]}")

    def answer(self, request: dict) -> Reply:
        task = self.task_of(request)
        if any(m.get("role") == "tool" for m in request.get("messages", [])):
            return Reply.text("Done: the files are written.")
        calls = [
            {"name": "write", "arguments": json.dumps({"path": path, "content": content})}
            for path, content in self.tasks[task]["solution"].items()
        ]
        return Reply(tool_calls=calls, delay=self.hold.get(task, 0.0))

    def requests_for(self, task: str) -> int:
        return sum(1 for r in list(self.upstream.requests) if isinstance(r.json, dict) and self.task_of(r.json) == task)

    def start(self, host: str) -> SolvingModel:
        self.upstream.start(host=host, timeout_graceful_shutdown=1)
        return self

    def stop(self) -> None:
        self.upstream.stop()
