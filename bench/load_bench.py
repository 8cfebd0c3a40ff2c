#!/usr/bin/env python
"""Load and fault bench: reviewers and agents at once on PostgreSQL + Redis + Celery, then the services fail under it.

Everything runs on loopback, on instances the bench starts itself and throws away (bench/load/services.py): a
PostgreSQL (initdb into a temp folder, pg_ctl on a free port) and a Redis (append-only, as docker-compose.yml runs it),
never the machine's shared services. On them: the web app under uvicorn (`--web-workers` processes, the deployment's
HTTP protocol), a Celery `default` worker and a `sandbox` worker (bubblewrap rollouts and sanity checks), and the
scripted model (bench/load/upstream.py). The database holds a review queue in use (bench/review_bench.py's: diagnoses,
issues, claims, decisions) and each reviewer's own candidates (fruit tasks with a real checker).

1. Unloaded: one reviewer alone (Locust, headless) reads the queue and candidate pages for `--unloaded-seconds`.
2. Loaded, `--loaded-seconds`: `--reviewers` Locust users work the queue and their candidates, now with edits (the
   editor, a claim, a save: a new revision and a sanity check each); `--agents` scripted agents (bench/load/agents.py)
   stream chat completions, every other one through the recording proxy (their own session each) and the others
   straight to the model, so the proxy's added latency is measured against the same moments; `--rollouts` builtin-
   harness rollouts run on the sandbox worker through the proxy. Errors here must be 0 (the phase lasts until the
   first fault; a request still in flight then counts with the faults).
3. Faults, with the load going on: PostgreSQL restarted (fast shutdown: connections cut), Redis restarted, the
   sandbox worker killed (-9, its whole process group) mid-rollout and a new one started, as a restart policy does.
   Each one: the seconds until the app answers again (the queue page; a job accepted and run; the killed worker's
   rollouts ended), aim <= 30 s of the service returning.
4. The end: the load stops, lost runs are swept as the periodic jobs do (reap_stale, redeliver_unclaimed,
   fail_lost_rollouts; the stale heartbeat limit is `--stale-seconds` here), every failed rollout is retried once, and
   then everything is counted: every job run finished, every rollout scored or failed (retryable), the retries scored,
   every edit the site acknowledged present in the catalog exactly once.

The last line is one JSON object: {"pages": {page: {"unloaded", "loaded"}}, "proxy_added_ms", "errors", "faults",
"accounting", "met", ...}. Bounded: `--max-seconds` over all (the run stops, reports and cleans up).

    .venv/bin/python bench/load_bench.py [--reviewers 20] [--agents 64] [--rollouts 12] [--loaded-seconds 60]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH = BASE_DIR / "bench"
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BENCH))
from benchstats import percentile  # noqa: E402  (bench/ helper)
from load.services import PostgresInstance, Process, RedisInstance, free_port, port_open  # noqa: E402

AIM_PROXY_P50_MS = 5.0
AIM_RECOVERY_S = 30.0
PAGES = ("queue", "queue (htmx)", "candidate")
RAMP_SECONDS = 3.0  # the first seconds of the loaded phase are left out: users and agents are still starting


def timing(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 1),
        "p95_ms": round(percentile(values, 0.95), 1),
        "max_ms": round(max(values), 1),
    }


def read_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by a kill
    return lines


def ended(sample: dict) -> float:
    """When a request ended: the agents write it; a reviewer's request is its start and duration."""
    return sample["end"] if "end" in sample else sample["t"] + sample["ms"] / 1000


def within(samples: list[dict], start: float, end: float) -> list[dict]:
    """The requests that began at `start` or later and were over before `end`."""
    return [s for s in samples if start <= s["t"] and ended(s) < end]


def overlapping(samples: list[dict], start: float, end: float) -> list[dict]:
    """The requests in flight at some moment between `start` and `end`."""
    return [s for s in samples if s["t"] < end and ended(s) >= start]


class Bench:
    def __init__(self, args):
        self.args = args
        self.began = time.time()
        self.work = Path(tempfile.mkdtemp(prefix="clawgym-load-bench-"))
        self.work.chmod(0o711)  # the sandbox runs as nobody: it must reach the workspaces in here
        self.logs = self.work / "logs"
        self.logs.mkdir()
        self.postgres = PostgresInstance(Path(tempfile.mkdtemp(prefix="clawgym-load-pg-")))
        self.redis = RedisInstance(self.work)
        self.web_port, self.upstream_port = free_port(), free_port()
        # The proxy's own uvicorn when --proxy-workers asks for one; else the web processes serve it (as compose does).
        self.proxy_port = free_port() if args.proxy_workers else self.web_port
        self.children: list[Process] = []
        self.sandbox_workers = 0

    # --- processes -----------------------------------------------------------------------------------------------

    def own_env(self) -> dict:
        """What the bench sets for itself and every child: its own services, folders and job engine."""
        return {
            "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
            "DATABASE_URL": self.postgres.url,
            "CLAWGYM_JOB_ENGINE": "celery",
            "CELERY_BROKER_URL": self.redis.url,
            "CLAWGYM_VAR_DIR": str(self.work / "var"),
            "CLAWGYM_SCRATCH_DIR": str(self.work / "scratch"),
            "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{self.proxy_port}",
            "CLAWGYM_JOB_STALE_SECONDS": str(self.args.stale_seconds),
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }

    def env(self) -> dict:
        return {**os.environ, **self.own_env()}

    def spawn(self, name: str, args: list[str], **extra) -> Process:
        child = Process(name, args, env={**self.env(), **extra}, cwd=BASE_DIR, log_dir=self.logs).start()
        self.children.append(child)
        return child

    def wait_port(self, port: int, child: Process, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not port_open(port):
            if not child.alive():
                raise RuntimeError(f"{child.name} exited:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{child.name} did not listen on {port} within {timeout} s:\n{child.log_tail()}")
            time.sleep(0.1)

    def uvicorn(self, name: str, port: int, workers: int) -> Process:
        """The ASGI app as the deployment serves it (docker-compose.yml's web command)."""
        return self.spawn(
            name,
            [
                sys.executable,
                "-m",
                "uvicorn",
                "clawgym_site.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--http",
                "lib.http_timeouts:HttpToolsProtocol",
                "--no-access-log",
                "--log-level",
                "warning",
            ],
        )

    def start_worker(self, queue: str, concurrency: int) -> Process:
        if queue == "sandbox":
            self.sandbox_workers += 1
        name = f"worker-{queue}-{self.sandbox_workers if queue == 'sandbox' else 1}"
        return self.spawn(
            name,
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "clawgym_site",
                "worker",
                "-Q",
                queue,
                "-c",
                str(concurrency),
                "--pool",
                "prefork",
                "-n",
                f"{name}@{socket.gethostname()}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
        )

    def wait_worker(self, queue: str, child: Process, timeout: float = 90) -> None:
        import jobs
        from jobs.models import JobRun

        run = jobs.enqueue("jobs.ping", queue=queue, steps=1)
        deadline = time.monotonic() + timeout
        while run.status != JobRun.Status.SUCCEEDED:
            if not child.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {queue} worker ran no ping ({run.status}):\n{child.log_tail()}")
            time.sleep(0.2)
            run.refresh_from_db()

    def locust(self, name: str, config: dict, users: int, run_seconds: float) -> Process:
        path = self.work / f"{name}.json"
        path.write_text(json.dumps(config))
        return self.spawn(
            name,
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(BENCH / "load" / "locustfile.py"),
                "--headless",
                "-u",
                str(users),
                "-r",
                str(users),
                "--run-time",
                f"{int(run_seconds)}s",
                "--stop-timeout",
                "10",
                "--host",
                f"http://127.0.0.1:{self.web_port}",
                "--only-summary",
                "--loglevel",
                "WARNING",
            ],
            LOAD_BENCH_CONFIG=str(path),
        )

    def check_alive(self, *children: Process) -> None:
        for child in children:
            if not child.alive():
                raise RuntimeError(f"{child.name} exited during the run:\n{child.log_tail()}")

    def sleep(self, seconds: float, *watch: Process) -> None:
        end = time.time() + seconds
        while time.time() < end:
            self.check_alive(*watch)
            if time.time() - self.began > self.args.max_seconds:
                raise TimeoutError(f"the bench ran past --max-seconds {self.args.max_seconds}")
            time.sleep(min(0.5, max(end - time.time(), 0)))

    # --- the run -----------------------------------------------------------------------------------------------------

    def setup(self) -> dict:
        began = time.perf_counter()
        self.postgres.init().start()
        self.postgres.create_database()
        self.redis.start()
        (self.work / "var").mkdir()
        os.environ.update(self.own_env())
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        migrated = time.perf_counter() - began
        from load import world

        self.world = world.seed(
            reviewers=self.args.reviewers,
            agents=self.args.agents,
            queue_candidates=self.args.queue,
            upstream_url=f"http://127.0.0.1:{self.upstream_port}/v1",
            cookie_name=settings.SESSION_COOKIE_NAME,
        )
        self.cookie = settings.SESSION_COOKIE_NAME
        upstream = self.spawn(
            "upstream",
            [
                sys.executable,
                str(BENCH / "load" / "upstream.py"),
                str(self.upstream_port),
                "--chunks",
                str(self.args.chunks),
                "--chunk-delay",
                str(self.args.chunk_delay),
            ],
        )
        self.web = self.uvicorn("web", self.web_port, self.args.web_workers)
        servers = [(self.web_port, self.web)]
        if self.args.proxy_workers:
            servers.append((self.proxy_port, self.uvicorn("proxy", self.proxy_port, self.args.proxy_workers)))
        self.default_worker = self.start_worker("default", 1)
        self.sandbox_worker = self.start_worker("sandbox", self.args.worker_concurrency)
        self.wait_port(self.upstream_port, upstream)
        for port, server in servers:
            self.wait_port(port, server)
        self.wait_worker("default", self.default_worker)
        self.wait_worker("sandbox", self.sandbox_worker)
        return {
            "migrate_seconds": round(migrated, 1),
            "setup_seconds": round(time.perf_counter() - began, 1),
            "queue": self.world["queue"],
        }

    def warm_up(self) -> None:
        """Each page a few times per web process first: template loading and first queries are not what is timed."""
        import httpx

        me = self.world["reviewers"][0]
        urls = self.world["queue_urls"] + [f"/review/candidates/{pk}/" for pk in me["candidates"]]
        with httpx.Client(
            base_url=f"http://127.0.0.1:{self.web_port}", cookies={self.cookie: me["session"]}, timeout=60
        ) as client:
            for _ in range(2 * self.args.web_workers):
                for url in urls:
                    response = client.get(url)
                    if response.status_code != 200:
                        raise RuntimeError(f"warm-up: GET {url} answered {response.status_code}")

    def reviewer_config(self, samples: Path, *, edits: bool, wait: list[float]) -> dict:
        return {
            "reviewers": self.world["reviewers"],
            "cookie": self.cookie,
            "queue_urls": self.world["queue_urls"],
            "edit_every": self.args.edit_every if edits else 0,
            "wait": wait,
            "samples": str(samples),
        }

    def run(self) -> dict:
        from load import world

        report = {"setup": self.setup()}
        args = self.args

        self.warm_up()

        # 1. Unloaded: one reviewer, nothing else running.
        unloaded_samples = self.work / "unloaded.jsonl"
        alone = self.locust(
            "reviewers-unloaded",
            self.reviewer_config(unloaded_samples, edits=False, wait=[0.1, 0.3]),
            1,
            args.unloaded_seconds,
        )
        alone.proc.wait(timeout=args.unloaded_seconds + 60)

        # 2. Loaded.
        samples, agent_samples = self.work / "reviewers.jsonl", self.work / "agents.jsonl"
        bound = args.max_seconds  # both stop by SIGTERM when the faults are over; this only bounds them
        agents_config = self.work / "agents.json"
        agents_config.write_text(
            json.dumps(
                {
                    "sessions": self.world["sessions"],
                    "direct_url": f"http://127.0.0.1:{self.upstream_port}/v1/chat/completions",
                    "until": time.time() + bound,
                    "think": args.think,
                    "model": world.AGENT_MODEL,
                    "out": str(agent_samples),
                }
            )
        )
        loaded_start = time.time()
        agents = self.spawn("agents", [sys.executable, str(BENCH / "load" / "agents.py"), str(agents_config)])
        reviewers = self.locust(
            "reviewers", self.reviewer_config(samples, edits=True, wait=list(args.wait)), args.reviewers, bound
        )
        revisions, endpoint = self.world["rollout_revisions"], self.world["rollout_endpoint"]
        world.start_rollouts(revisions, endpoint, args.rollouts)
        load = (agents, reviewers, self.web, self.default_worker)
        self.sleep(args.loaded_seconds, *load, self.sandbox_worker)
        from evaluation.models import Rollout

        failed_while_loaded = world.rollouts_in(Rollout.Status.FAILED)

        # 3. Faults, the load going on.
        faults = {}
        probe = (self.cookie, self.world["probe_session"])
        base = f"http://127.0.0.1:{self.web_port}"
        timeout = args.recovery_timeout

        pages = ThreadPoolExecutor(1)  # the page probe runs beside the job probes: each from the service's return

        def page_back(since: float):
            return pages.submit(world.wait_page, base, probe, since, timeout)

        running = world.wait_running_rollout(revisions, endpoint)
        pings = world.queue_pings(args.pings)  # claims in flight on the default worker when the database goes
        down, up = self.postgres.restart()
        faults_start = down
        page = page_back(up)
        faults["postgres"] = {
            "down_seconds": round(up - down, 2),
            "rollouts_running": len(running),
            "pings_queued": len(pings),
            "job_s": world.wait_enqueue(up, timeout)[1],
            "page_s": page.result(),
        }
        self.sleep(args.settle_seconds, *load)

        world.wait_running_rollout(revisions, endpoint)
        down, up = self.redis.restart()
        page = page_back(up)
        accepted, ran = world.wait_enqueue(up, timeout)
        faults["redis"] = {
            "down_seconds": round(up - down, 2),
            "enqueue_s": accepted,
            "job_s": ran,
            "page_s": page.result(),
        }
        self.sleep(args.settle_seconds, *load)

        running = world.wait_running_rollout(revisions, endpoint)
        down = time.time()
        self.sandbox_worker.kill()
        self.sandbox_worker = self.start_worker("sandbox", args.worker_concurrency)
        up = time.time()
        page = page_back(up)
        faults["worker"] = {
            "rollouts_running": len(running),
            "rollouts_ended_s": world.wait_rollouts_left_running(running, up, timeout * 2),
            "page_s": page.result(),
        }
        if faults["worker"]["rollouts_ended_s"] is None:
            faults["worker"]["left_running"] = world.db_call(world.describe_rollouts, running)
        pages.shutdown()
        self.sleep(args.settle_seconds, *load)
        faults_end = time.time()

        # 4. The end.
        reviewers.stop(timeout=20)
        agents.stop(timeout=20)
        swept = world.settle(args.drain_seconds, args.stale_seconds)
        before_retry = world.db_call(world.accounting, [])["rollouts"]
        retried = world.db_call(world.retry_failed)
        swept_after = world.settle(args.drain_seconds, args.stale_seconds)
        retried_scored = Rollout.objects.filter(pk__in=retried, status=Rollout.Status.SCORED).count()

        reviewer_lines = read_lines(samples)
        acknowledged = [line for line in reviewer_lines if "edit" in line]
        requests = [line for line in reviewer_lines if "name" in line]
        agent_lines = read_lines(agent_samples)
        report.update(
            self.figures(
                read_lines(unloaded_samples),
                requests,
                agent_lines,
                (loaded_start + RAMP_SECONDS, faults_start),
                (faults_start, faults_end),
            )
        )
        report["errors"]["rollouts_failed_while_loaded"] = len(failed_while_loaded)
        report["errors"]["loaded"] += len(failed_while_loaded)
        report["faults"] = faults
        accounting = world.accounting(acknowledged)
        accounting.update(
            rollouts_before_retry=before_retry,
            retried=len(retried),
            retried_scored=retried_scored,
            swept={k: swept[k] + swept_after[k] for k in swept},
        )
        report["accounting"] = accounting
        return report

    def figures(self, unloaded: list, requests: list, agents: list, loaded: tuple, faulted: tuple) -> dict:
        in_load = within(requests, *loaded)
        pages = {}
        for page in PAGES:
            pages[page] = {
                "unloaded": timing([s["ms"] for s in unloaded if s["name"] == page and s["ok"]]),
                "loaded": timing([s["ms"] for s in in_load if s["name"] == page and s["ok"]]),
            }
        edits = timing([s["ms"] for s in in_load if s["name"] == "edit" and s["ok"]])
        agents_loaded = [s for s in within(agents, *loaded) if s["ok"]]
        direct = [s["ttft_ms"] for s in agents_loaded if s["via"] == "direct"]
        proxied = [s["ttft_ms"] for s in agents_loaded if s["via"] == "proxy"]
        direct_total = [s["total_ms"] for s in agents_loaded if s["via"] == "direct"]
        proxied_total = [s["total_ms"] for s in agents_loaded if s["via"] == "proxy"]
        added = None
        if direct and proxied:
            added = {
                "ttft_p50": round(statistics.median(proxied) - statistics.median(direct), 2),
                "ttft_p95": round(percentile(proxied, 0.95) - percentile(direct, 0.95), 2),
                "total_p50": round(statistics.median(proxied_total) - statistics.median(direct_total), 2),
                "total_p95": round(percentile(proxied_total, 0.95) - percentile(direct_total, 0.95), 2),
            }
        failed_requests = [s for s in in_load if not s["ok"]]
        failed_streams = [s for s in within(agents, *loaded) if not s["ok"]]
        in_faults = overlapping(requests, *faulted)
        streams_in_faults = overlapping(agents, *faulted)
        return {
            "pages": pages,
            "edit_ms": edits,
            "requests": {"unloaded": len(unloaded), "loaded": len(in_load), "during_faults": len(in_faults)},
            "streams": {
                "loaded": len(within(agents, *loaded)),
                "direct": len(direct),
                "proxied": len(proxied),
                "during_faults": len(streams_in_faults),
            },
            "loaded_seconds": round(loaded[1] - loaded[0], 1),
            "proxy_added_ms": added,
            "proxy_ttft_ms": timing(proxied),
            "direct_ttft_ms": timing(direct),
            "errors": {
                "loaded": len(failed_requests) + len(failed_streams),
                "page_requests": len(failed_requests),
                "streams": len(failed_streams),
                "streams_by_way": {
                    way: sum(1 for s in failed_streams if s["via"] == way) for way in ("proxy", "direct")
                },
                "examples": [f"{s['name']}: {s['error']}" for s in failed_requests[:3]]
                + [
                    f"{s['via']}, HTTP {s.get('status')} after {s.get('chunks')} chunks: {s['error']}"
                    for s in failed_streams[:5]
                ],
                "unloaded": sum(1 for s in unloaded if not s["ok"]),
                "during_faults": {
                    "page_requests": sum(1 for s in in_faults if not s["ok"]),
                    "streams": sum(1 for s in streams_in_faults if not s["ok"]),
                },
            },
        }

    def close(self) -> None:
        for child in reversed(self.children):
            child.stop(timeout=10)
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass
        self.redis.stop()
        try:
            self.postgres.stop("immediate")
        except Exception as exc:
            print(f"stopping the bench's PostgreSQL: {exc}", file=sys.stderr)
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
            shutil.rmtree(self.postgres.root, ignore_errors=True)


def met(report: dict) -> dict:
    added = report.get("proxy_added_ms") or {}
    accounting = report["accounting"]
    faults = report["faults"]
    recoveries = [v for fault in faults.values() for k, v in fault.items() if k.endswith("_s")]
    return {
        "no_errors_loaded": report["errors"]["loaded"] == 0 and report["errors"]["unloaded"] == 0,
        "proxy_p50": added.get("ttft_p50") is not None and added["ttft_p50"] <= AIM_PROXY_P50_MS,
        "recovered_within_30s": all(v is not None and v <= AIM_RECOVERY_S for v in recoveries),
        "every_job_ended": accounting["job_runs_unfinished"] == 0 and accounting["rollouts_unfinished"] == 0,
        "scored_or_retryable": set(accounting["rollouts_before_retry"]) <= {"scored", "failed"},
        "retries_scored": accounting["retried_scored"] == accounting["retried"],
        "no_edit_lost": accounting["edits_lost"] == 0 and accounting["edits_saved_twice"] == 0,
    }


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--queue", type=int, default=2000, help="candidates in the review queue besides the reviewers'")
    parser.add_argument("--rollouts", type=int, default=12, help="rollouts queued when the load starts")
    parser.add_argument("--unloaded-seconds", type=float, default=20)
    parser.add_argument("--loaded-seconds", type=float, default=60)
    parser.add_argument(
        "--settle-seconds", type=float, default=5, help="load between one fault's recovery and the next"
    )
    parser.add_argument("--recovery-timeout", type=float, default=60, help="longest wait for the app to come back")
    parser.add_argument("--drain-seconds", type=float, default=120, help="longest wait for the jobs to end")
    parser.add_argument("--stale-seconds", type=int, default=20, help="CLAWGYM_JOB_STALE_SECONDS for the run")
    parser.add_argument("--max-seconds", type=float, default=900, help="the whole run's bound")
    parser.add_argument("--pings", type=int, default=20, help="short jobs queued just before PostgreSQL restarts")
    parser.add_argument("--think", type=float, default=0.5, help="an agent's longest pause between model calls (s)")
    parser.add_argument("--chunks", type=int, default=40, help="SSE chunks per model answer")
    parser.add_argument("--chunk-delay", type=float, default=0.02)
    parser.add_argument("--wait", type=float, nargs=2, default=[0.5, 2.0], help="a reviewer's pause between rounds")
    parser.add_argument("--edit-every", type=int, default=4, help="a reviewer edits every Nth round")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument(
        "--proxy-workers",
        type=int,
        default=0,
        help="a uvicorn of its own for the proxy with this many processes (0: the web processes)",
    )
    parser.add_argument("--worker-concurrency", type=int, default=2, help="the sandbox worker's processes")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs) for a look afterwards")
    args = parser.parse_args()

    bench = Bench(args)
    began = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated run still cleans up
    try:
        report = bench.run()
    finally:
        bench.close()
        signal.signal(signal.SIGTERM, previous)
    report.update(
        {
            "reviewers": args.reviewers,
            "agents": args.agents,
            "rollouts": args.rollouts,
            "web_workers": args.web_workers,
            "proxy_workers": args.proxy_workers,
            "database": "postgresql",
            "broker": "redis",
            "engine": "celery",
            "cpus": os.cpu_count(),
            "seconds": round(time.perf_counter() - began, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "aim": {"proxy_added_p50_ms": AIM_PROXY_P50_MS, "recovery_s": AIM_RECOVERY_S, "errors": 0},
            "work_folder": str(bench.work) if args.keep else None,
        }
    )
    report["met"] = met(report)
    pages = report["pages"]
    for page in PAGES:
        u, loaded = pages[page]["unloaded"], pages[page]["loaded"]
        print(
            f"{page}: unloaded p50 {u and u['p50_ms']} / p95 {u and u['p95_ms']} ms, "
            f"loaded p50 {loaded and loaded['p50_ms']} / p95 {loaded and loaded['p95_ms']} ms"
        )
    print(f"proxy added latency at {args.agents} streams: {report['proxy_added_ms']}")
    print(f"errors: {report['errors']}")
    print(f"faults: {report['faults']}")
    print(f"accounting: {report['accounting']}")
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
