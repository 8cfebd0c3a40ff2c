"""The compose deployment brought up for real (docker-compose.yml with the Debian stand-ins of deploy/compose.test.yml):
health, the example tasks imported through the API, sanity checks and a rollout scored by the sandbox workers (Docker
backend) against a scripted model on the host, a worker container restarted mid-rollout, two sandbox worker hosts
sharing one batch while one of them is killed, and the trust boundaries: sign-in lockouts per client behind the
published port, and sandbox workers without SECRET_KEY, on a database role of their own.

One stack for the module (bringing it up is most of the cost); the tests run in order and the second uses the tasks
the first imported. `make deploy-test` runs this module alone (scripts/deploy-test.sh).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import time
from collections import Counter
from datetime import UTC, datetime

import httpx
import pytest

from sandbox.testing import run_script, unavailable

from .stack import COMPOSE, EXAMPLES, SANDBOX_REPLICAS, SolvingModel, Stack, example_tasks, run

# The module's stack is built (up to 1,800 s: 1 to 7 minutes when the app image must be rebuilt, about 10 for a first
# build) and brought up (600 s) in the first test's set-up, and each test waits on jobs for up to 300 s a wait.
pytestmark = [pytest.mark.docker, pytest.mark.once, pytest.mark.timeout(3600)]

# Tasks graded by their checker alone: a rollout's score needs no judge model.
CODE_ONLY = [name for name, spec in example_tasks().items() if not spec["rubric"]]
TIMINGS: dict[str, float] = {}


def ensure_compose() -> None:
    if shutil.which(COMPOSE[0]):
        return
    done = subprocess.run(["apt-get", "install", "-y", "-qq", "docker-compose"], capture_output=True, text=True)
    if done.returncode != 0 or not shutil.which(COMPOSE[0]):
        unavailable(f"{COMPOSE[0]} is missing and apt-get could not install it: {done.stderr[-400:]}")


@pytest.fixture(scope="module")
def stack(docker_sandbox_image):
    ensure_compose()
    started = time.monotonic()
    failed = run_script("build-images.sh", timeout=1800)
    if failed:
        unavailable(f"the project's images could not be built: {failed}")
    TIMINGS["images_s"] = round(time.monotonic() - started, 1)
    stack = Stack()
    try:
        started = time.monotonic()
        stack.up()
        TIMINGS["stack_up_s"] = round(time.monotonic() - started, 1)
        yield stack
    finally:
        stack.down()
        print(f"\ncompose test timings: {json.dumps(TIMINGS)}")


@pytest.fixture(scope="module")
def model(stack):
    # The web container's host.docker.internal is the host's bridge address: the scripted model listens there.
    gateway = stack.compose(
        "exec", "-T", "web", "python", "-c", "import socket; print(socket.gethostbyname('host.docker.internal'))"
    ).stdout.strip()
    model = SolvingModel(example_tasks()).start(gateway)
    yield model
    model.stop()


@pytest.fixture(scope="module")
def api(stack, model):
    api = stack.api()
    api.post(
        "/api/model-endpoints/",
        201,
        json={
            "name": "scripted",
            "base_url": f"http://host.docker.internal:{model.upstream.port}/v1",
            "model": "scripted-model",
            "api_style": "chat",
            "roles": ["agent"],
        },
    )
    return api


def start_rollout(api, task: str) -> dict:
    [rollout] = api.post("/api/rollouts/", 201, json={"task": task, "endpoint": "scripted", "harness": "builtin"})
    return rollout


def wait_rollout(api, rollout_id: int, statuses=("scored", "failed", "cancelled"), timeout: float = 180) -> dict:
    return api.wait(f"/api/rollouts/{rollout_id}/", lambda r: r["status"] in statuses, timeout)


def test_stack_serves_imports_checks_and_scores_and_survives_a_worker_restart(stack, api, model):
    started = time.monotonic()
    health = api.client.get("/healthz").json()
    assert health["status"] == "ok", health
    assert {"default", "sandbox"} <= set(health["checks"]["workers"]["seen"]), health

    # The example tasks, uploaded as an archive of task folders: the import runs on the default worker.
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for folder in sorted(EXAMPLES.iterdir()):
            tar.add(folder, arcname=folder.name)
    job = api.post("/api/imports/", 202, files={"file": ("examples.tar.gz", archive.getvalue(), "application/gzip")})
    job = api.wait_job(job["id"])
    assert job["status"] == "succeeded", job
    listed = {t["external_id"]: t["current_revision"] for t in api.get("/api/tasks/")["results"]}
    assert set(listed) == set(example_tasks()), listed
    tasks = sorted(listed)

    # Sanity checks of every checker, in Docker sandboxes started by the sandbox workers.
    jobs = {task: api.post(f"/api/tasks/{task}/sanity/", 202)["id"] for task in tasks}
    for task, job_id in jobs.items():
        assert api.wait_job(job_id, timeout=300)["status"] == "succeeded", task
        revision = api.get(f"/api/tasks/{task}/revisions/{listed[task]}/")
        sanity = revision["sanity"]
        assert sanity["verdict"] == "passed", (task, sanity)
        assert (sanity["backend"], sanity["isolated"], sanity["solvable"]) == ("docker", True, True), sanity
    TIMINGS["import_and_sanity_s"] = round(time.monotonic() - started, 1)

    # One rollout: the builtin agent in a Docker sandbox, its model reached only through the proxy (web), which
    # forwards to the scripted model on the host. It writes the reference solution and is scored 1.
    task = "interview-loop-schedule"
    rollout = wait_rollout(api, start_rollout(api, task)["id"])
    assert (rollout["status"], rollout["score"], rollout["attempt"]) == ("scored", 1.0, 1), rollout
    assert rollout["runtime"].startswith("clawgym-runtime-"), rollout["runtime"]
    calls = api.get("/api/model-calls/", session=rollout["proxy_session"])["results"]
    assert len(calls) == 2 and all(call["ok"] for call in calls), calls  # the writes, then "Done"
    assert model.requests_for(task) == 2

    # The worker container restarted while its agent waits for the model: the attempt ends failed (worker lost,
    # retryable) once the restarted worker finds it, and a retry is scored.
    model.hold[task] = 120  # longer than the restart takes to be noticed
    rollout = start_rollout(api, task)
    api.wait(f"/api/rollouts/{rollout['id']}/", lambda r: r["status"] == "running", 120)
    deadline = time.monotonic() + 120
    while model.requests_for(task) < 3:  # the agent's first request reached the model: it is mid-rollout
        assert time.monotonic() < deadline, "the held rollout never reached the model"
        time.sleep(0.5)
    host = stack.query(
        f"from evaluation.models import Rollout; import json; "
        f"print(json.dumps(Rollout.objects.get(pk={rollout['id']}).worker.split(':')[0]))"
    )
    [container] = [c for c in stack.containers("sandbox-worker") if c.startswith(host)]
    restarted = time.monotonic()
    run(["docker", "restart", "-t", "2", container])
    failed = wait_rollout(api, rollout["id"], timeout=120)
    TIMINGS["restart_to_failed_s"] = round(time.monotonic() - restarted, 1)
    assert (failed["status"], failed["exit_reason"], failed["score"]) == ("failed", "worker_lost", None), failed
    model.hold.pop(task)
    api.post(f"/api/rollouts/{rollout['id']}/retry/")
    retried = wait_rollout(api, rollout["id"])
    assert (retried["status"], retried["score"], retried["attempt"]) == ("scored", 1.0, 2), retried
    assert [a.get("exit_reason") for a in retried["previous_attempts"]] == ["worker_lost"], retried["previous_attempts"]
    stack.wait_healthy(timeout=120)  # the restarted worker is back in the healthchecks too
    TIMINGS["single_host_test_s"] = round(time.monotonic() - started, 1)


def test_two_sandbox_hosts_share_a_batch_and_one_killed_loses_nothing(stack, api, model):
    started = time.monotonic()
    hosts = {c[:12]: c for c in stack.containers("sandbox-worker")}  # a container's hostname is its short id
    assert len(hosts) == SANDBOX_REPLICAS
    log_start = len(web_log(stack))
    # Each agent's first answer takes 10 s: rollouts are mid-flight on both hosts when one is killed.
    for task in CODE_ONLY:
        model.hold[task] = 10
    rollouts = [start_rollout(api, task)["id"] for task in CODE_ONLY for _ in range(2)]
    sanity = {task: api.post(f"/api/tasks/{task}/sanity/", 202)["id"] for task in CODE_ONLY}

    def placement() -> dict:
        return stack.query(
            "import json; from evaluation.models import Rollout; from jobs.models import JobRun; "
            f"r = Rollout.objects.filter(pk__in={rollouts}); "
            f"j = JobRun.objects.filter(pk__in={list(sanity.values())}); "
            "print(json.dumps({'rollouts': {x.pk: [x.status, x.worker.split(':')[0]] for x in r}, "
            "'sanity': {x.pk: [x.status, x.worker.split(':')[0]] for x in j}}))"
        )

    # Kill a host once both have finished work and the victim is running a rollout.
    deadline = time.monotonic() + 240
    while True:
        now = placement()
        finished = Counter(
            host
            for status, host in [*now["rollouts"].values(), *now["sanity"].values()]
            if status in ("scored", "succeeded")
        )
        running = Counter(host for status, host in now["rollouts"].values() if status == "running")
        victims = [h for h in hosts if running[h] and finished[h] and all(finished[o] for o in hosts)]
        if victims:
            break
        assert time.monotonic() < deadline, f"no moment with work done on both hosts and a rollout running: {now}"
        time.sleep(1)
    victim = victims[0]
    survivor = next(h for h in hosts if h != victim)
    running_there = sorted(
        int(pk) for pk, (status, host) in now["rollouts"].items() if status == "running" and host == victim
    )
    addresses = worker_addresses(hosts)  # before the kill: a stopped container has no address
    run(["docker", "kill", hosts[victim]])
    killed, killed_at = time.monotonic(), datetime.now(UTC)

    # The rest of the batch finishes on the survivor; the victim's running rollouts end failed (worker lost) once
    # its runs' heartbeats are stale, and their retries are scored there too.
    for job_id in sanity.values():
        assert api.wait_job(job_id, timeout=300)["status"] == "succeeded"
    ended = {pk: wait_rollout(api, pk, timeout=300) for pk in rollouts}
    lost = sorted(pk for pk, r in ended.items() if r["status"] == "failed")
    TIMINGS["kill_to_batch_ended_s"] = round(time.monotonic() - killed, 1)
    # Lost: rollouts the victim was running when it died (those seen running just before either ended there
    # before the kill or are among them), each failed for that reason and naming the victim.
    assert lost, f"no rollout was lost with host {victim}: {ended}"
    for pk in running_there:
        finished = datetime.fromisoformat(ended[pk]["finished_at"].replace("Z", "+00:00"))
        assert pk in lost or finished <= killed_at, (pk, ended[pk])
    for pk in lost:
        assert ended[pk]["exit_reason"] == "worker_lost" and victim in ended[pk]["error"], (
            victim,
            ended[pk]["exit_reason"],
            ended[pk]["error"],
            stack.logs("sandbox-worker", tail=200),
        )
    assert all(r["status"] == "scored" and r["score"] == 1.0 for pk, r in ended.items() if pk not in lost), ended
    for task in CODE_ONLY:
        model.hold.pop(task)
    for pk in lost:
        api.post(f"/api/rollouts/{pk}/retry/")
    final = {pk: wait_rollout(api, pk, timeout=300) for pk in rollouts}
    assert all((r["status"], r["score"]) == ("scored", 1.0) for r in final.values()), final

    # Nothing lost or counted twice: every rollout is scored once, on its last attempt, with that attempt's calls;
    # every sanity check left one report; the work was spread over both hosts, each rollout's model calls came
    # into the web app from the host that ran it.
    for pk, rollout in final.items():
        assert rollout["attempt"] == (2 if pk in lost else 1), rollout
        assert len(rollout["previous_attempts"]) == rollout["attempt"] - 1
        calls = api.get("/api/model-calls/", session=rollout["proxy_session"])["results"]
        assert len(calls) == 2 and all(call["ok"] for call in calls), (pk, calls)
    where = stack.query(
        "import json; from evaluation.models import Rollout; from tasks.models import SanityReport; "
        f"r = Rollout.objects.filter(pk__in={rollouts}); "
        f"s = SanityReport.objects.filter(job_run_id__in={list(sanity.values())}); "
        "print(json.dumps({'rollouts': {x.pk: x.worker.split(':')[0] for x in r}, "
        "'reports': sorted(x.job_run_id for x in s)}))"
    )
    assert where["reports"] == sorted(sanity.values()), where["reports"]
    scored_on = Counter(where["rollouts"].values())  # the host of each rollout's last (scored) attempt
    assert all(where["rollouts"][str(pk)] == survivor for pk in lost), where
    assert all(scored_on[host] for host in hosts), scored_on
    # The proxy's access log names no token, but it gives each request's client: the worker host whose relay
    # carried it (a sandbox has no network; its socket leads to the relay of the worker that started it). Every
    # scored attempt made 2 calls; a lost attempt at most its first, answered after the kill.
    calls_from = Counter(
        addresses.get(ip, ip)
        for ip in re.findall(
            r"(\d+\.\d+\.\d+\.\d+):\d+ - \"POST /proxy/\S+/chat/completions", web_log(stack)[log_start:]
        )
    )
    assert set(calls_from) == set(hosts), calls_from
    assert calls_from[survivor] == 2 * scored_on[survivor], (calls_from, scored_on)
    assert 2 * scored_on[victim] <= calls_from[victim] <= 2 * scored_on[victim] + len(lost), (calls_from, scored_on)
    TIMINGS["multi_host_test_s"] = round(time.monotonic() - started, 1)


def worker_addresses(hosts: dict[str, str]) -> dict[str, str]:
    """{IP address on the compose network: worker host}."""
    address = {}
    for host, container in hosts.items():
        ips = run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container])
        for ip in ips.stdout.split():
            address[ip] = host
    return address


def web_log(stack) -> str:
    [web] = stack.containers("web")
    return run(["docker", "logs", web], check=False).stdout  # uvicorn's access log; Django's goes to stderr


LOGIN_FAILURE_LIMIT = 10  # the deployment's (CLAWGYM_LOGIN_FAILURE_LIMIT is not set by the test)


def test_a_clients_sign_in_lockout_leaves_other_clients_signing_in(stack, api):
    """Behind compose's published port every client arrived from the bridge gateway, so ten failed sign-ins by anyone
    locked everyone out. Two clients of this host, 127.0.0.2 and 127.0.0.3, through a proxy on this host (as the
    README's TLS proxy: the front's image on the host's network) in front of the published port: the one that fails
    ten times is locked out, with the right password too and whatever X-Forwarded-For it sends; the other signs in.
    A worker container, which reaches the front from inside the deployment's network, cannot name another client in
    X-Forwarded-For either (its own address is the one locked out), nor reach the web app but through the front."""
    # uvicorn runs with every option the compose file gives it (a folded command line once ran it with the first
    # line's only: no --proxy-headers trust, no header timeouts, one process).
    [web] = stack.containers("web")
    argv = run(["docker", "exec", web, "cat", "/proc/1/cmdline"]).stdout.split("\0")
    for option in ("--uds", "--workers", "--http", "--timeout-keep-alive", "--proxy-headers", "--forwarded-allow-ips"):
        assert option in argv, argv
    assert argv[argv.index("--http") + 1] == "lib.http_timeouts:HttpToolsProtocol", argv

    def token(url: str, address: str, password: str, **headers) -> int:
        transport = httpx.HTTPTransport(local_address=address)
        with httpx.Client(base_url=url, transport=transport, timeout=60) as client:
            form = {"username": "deploy-admin", "password": password}
            return client.post("/api/auth/token/", data=form, headers=headers).status_code

    with stack.host_proxy() as url:
        failures = [token(url, "127.0.0.2", "a guess") for _ in range(LOGIN_FAILURE_LIMIT)]
        assert failures == [400] * (LOGIN_FAILURE_LIMIT - 1) + [429], failures
        assert token(url, "127.0.0.2", stack.admin_password) == 429
        assert token(url, "127.0.0.2", stack.admin_password, **{"X-Forwarded-For": "127.0.0.3"}) == 429
        assert token(url, "127.0.0.3", stack.admin_password) == 200

        inside = json.loads(
            stack.compose(
                "exec",
                "-T",
                "worker",
                "python",
                "-c",
                f"""
import json, socket, httpx
form = {{"username": "deploy-admin", "password": "a guess"}}
codes = [httpx.post("http://front:8000/api/auth/token/", data=form, headers={{"X-Forwarded-For": "127.0.0.3"}},
                    timeout=60).status_code for _ in range({LOGIN_FAILURE_LIMIT})]
with socket.create_connection(("front", 8000), timeout=10) as front:
    address = front.getsockname()[0]  # what the front sees this container as
try:
    socket.create_connection(("web", 8000), timeout=10).close()
    web = "answered"
except OSError as exc:
    web = type(exc).__name__
print(json.dumps({{"codes": codes, "address": address, "web": web}}))
""",
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        assert inside["codes"] == [400] * (LOGIN_FAILURE_LIMIT - 1) + [429], inside
        assert inside["web"] == "ConnectionRefusedError", inside
        assert token(url, "127.0.0.3", stack.admin_password) == 200

    # Who axes saw: each client by its own address, none by the gateway or the front's.
    seen = stack.query(
        "import json; from axes.models import AccessAttempt; "
        "print(json.dumps(sorted(set(AccessAttempt.objects.values_list('ip_address', flat=True)))))"
    )
    assert seen == sorted(["127.0.0.2", inside["address"]]), seen


def test_the_sandbox_workers_hold_no_secret_key_and_a_limited_database_role(stack):
    """The sandbox workers run as root with the engine's socket, beside untrusted code: they get no SECRET_KEY (their
    settings make one of their own) and the database as clawgym_sandbox (deploy/db_roles.py), which cannot read API
    tokens or sessions, change accounts or model endpoints, or change the schema, yet ran every rollout and sanity
    check above. PostgreSQL and Redis are on the internal network only, which the front is not on."""
    key_hash = "hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest()"
    web_key = stack.query(f"import hashlib, json; from django.conf import settings; print(json.dumps({key_hash}))")
    attempts = {
        "tokens": "SELECT key FROM authtoken_token",
        "sessions": "SELECT session_key FROM django_session",
        "endpoints": "UPDATE llm_modelendpoint SET base_url = 'http://elsewhere.invalid/v1'",
        "roles": "DELETE FROM auth_user_groups",
        "schema": "CREATE TABLE taken (x int)",
        "rollouts": "SELECT count(*) FROM evaluation_rollout",
    }
    probe = f"""
import hashlib, json, os
from django.conf import settings
from django.db import DatabaseError, connection, transaction
found = {{"secret_key_in_env": "SECRET_KEY" in os.environ, "key": {key_hash}, "refused": {{}}}}
with connection.cursor() as cursor:
    cursor.execute("SELECT current_user")
    found["user"] = cursor.fetchone()[0]
for name, statement in {attempts!r}.items():
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
        found["refused"][name] = ""
    except DatabaseError as exc:
        found["refused"][name] = str(exc).splitlines()[0]
print(json.dumps(found))
"""
    # The running ones (the test before kills one).
    containers = [
        c
        for c in stack.containers("sandbox-worker")
        if run(["docker", "inspect", "-f", "{{.State.Running}}", c]).stdout.strip() == "true"
    ]
    assert containers
    for container in containers:
        found = stack.query(probe, container=container)
        assert (found["secret_key_in_env"], found["user"]) == (False, "clawgym_sandbox"), found
        assert found["key"] != web_key
        refused = found["refused"]
        assert all("permission denied" in refused[name] for name in attempts if name != "rollouts"), refused
        assert refused["rollouts"] == "", refused

    for service, networks in {"db": {"data"}, "redis": {"data"}, "front": {"default"}}.items():
        [container] = stack.containers(service)
        attached = run(
            ["docker", "inspect", "-f", "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}", container]
        ).stdout.split()
        assert set(attached) == {stack.network(n) for n in networks}, (service, attached)
    internal = run(["docker", "network", "inspect", "-f", "{{.Internal}}", stack.network("data")]).stdout.strip()
    assert internal == "true"
    unresolved = stack.compose("exec", "-T", "front", "getent", "hosts", "db", "redis", check=False)
    assert unresolved.returncode != 0 and not unresolved.stdout.strip(), unresolved.stdout
