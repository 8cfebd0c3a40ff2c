#!/usr/bin/env python
"""Recording proxy benchmark: N concurrent streaming clients, straight to the upstream and through the proxy.

- The upstream is llm.testing.ScriptedUpstream in a process of its own, streaming every answer as `--chunks` SSE
  chunks `--chunk-delay` seconds apart (a model producing tokens).
- The proxy is the real ASGI app (clawgym_site.asgi:application) under uvicorn in a process of its own, on a
  throwaway SQLite database in a temp folder, with one open recording session; every call is really recorded.
- The clients are httpx streams in this process: `--streams` at once, `--rounds` requests each, direct first,
  then through the proxy. Like agents that run a tool between model calls, each client pauses a random
  0..`--think` seconds before each request (the same seeded pauses for both runs); `--think 0` makes every round
  a burst of simultaneous requests instead.

With `--mixed` both are measured under the same load in one run instead: every client alternates, its even
requests straight to the upstream and its odd ones through the proxy (client n starts on the side n % 2), so
the proxy's own CPU weighs on both sides alike; the report then gives proxy/direct ratios of TTFT (p50, p99) and
of each side's streaming rate (chunks over the seconds its requests took). `--proxy-workers N` runs the proxy under
uvicorn with N worker processes (SQLite in WAL mode takes their writes).

`--first-token-delay S` makes the upstream wait S seconds before each answer, as a model's prefill does; the
proxy's hop then weighs less in the ratio, so the aims are judged only against an upstream that answers at once
(`aim_met` is null otherwise). The aims (`aim`): at most +4.6 ms to the first token at p50 and at least 0.92x
direct throughput, the proxy's figures before every call was recorded before its last chunk; a burst (`--think 0`
without --mixed) is judged on throughput alone, since its first tokens queue on the proxy's one process.

Per request it times the first content byte (TTFT) and the last byte. Added latency is the proxy's percentile
minus the direct one (p50, p99), for TTFT and for the whole response; throughput is chunks received per second,
proxy over direct. The last line is one JSON object.

    .venv/bin/python bench/proxy_bench.py [--streams 64] [--rounds 3] [--chunks 40] [--chunk-delay 0.02]
    .venv/bin/python bench/proxy_bench.py --mixed [--proxy-workers 2] [--first-token-delay 0.05]
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
from netutil import free_port, wait_for_port  # noqa: E402  (bench/ helper)

# The proxy's figures before the integrity work (every call recorded before its last chunk goes out) made it
# heavier: it must cost no more than that. A burst (--think 0) queues every first token on the proxy's process by
# design, so there only the throughput is judged.
AIM_P50_ADDED_MS = 4.6
AIM_THROUGHPUT_RATIO = 0.92


def serve_upstream(port: int, chunks: int, delay: float, first_delay: float) -> None:
    """The upstream process: a scripted server whose every answer starts after `first_delay` s (a model's prefill)
    and is `chunks` chunks, `delay` s apart."""
    import uvicorn

    from llm.testing import Reply, ScriptedUpstream

    reply = Reply.text("tok " * chunks, chunk_size=4, chunk_delay=delay)
    reply.delay = first_delay
    upstream = ScriptedUpstream(default=reply)
    uvicorn.run(upstream, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), or None where that is not readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def proxy_cpu_seconds(pid: int) -> float | None:
    """CPU time of the proxy: its process and, under --workers, its worker processes (its children)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    times = [cpu_seconds(p) for p in [pid, *map(int, children)]]
    return None if times[0] is None else sum(t or 0 for t in times)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def one_stream(client, url: str, n: int) -> tuple[float, float, int]:
    body = {"model": "m", "messages": [{"role": "user", "content": f"client {n}"}], "stream": True}
    started = time.perf_counter()
    first = None
    chunks = 0
    async with client.stream("POST", url, json=body, headers={"authorization": "Bearer bench"}) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            if first is None:
                first = time.perf_counter()
            chunks += chunk.count(b"data: ")
    return (first - started) * 1000, (time.perf_counter() - started) * 1000, chunks


async def load(url: str | list[str], streams: int, rounds: int, think: float) -> dict | list[dict]:
    """The figures of one load on `url`; given [direct, proxied], one load alternating between them (client n's
    request k goes to urls[(n + k) % 2]) and the figures of each side."""
    import random

    import httpx

    urls = url if isinstance(url, list) else [url]
    pauses = random.Random(42)
    schedule = [[pauses.uniform(0, think) for _ in range(rounds)] for _ in range(streams)]

    limits = httpx.Limits(max_connections=streams * 2, max_keepalive_connections=streams * 2)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        for each in urls:
            await one_stream(client, each, -1)  # warm the connection path

        async def worker(n):
            results = []
            for k, pause in enumerate(schedule[n]):
                await asyncio.sleep(pause)
                side = (n + k) % len(urls)
                results.append((side, await one_stream(client, urls[side], n)))
            return results

        started = time.perf_counter()
        results = [r for batch in await asyncio.gather(*(worker(n) for n in range(streams))) for r in batch]
        wall = time.perf_counter() - started
    sides = [figures([r for side, r in results if side == n], wall) for n in range(len(urls))]
    return sides if isinstance(url, list) else sides[0]


def figures(results: list[tuple[float, float, int]], wall: float) -> dict:
    ttft = [r[0] for r in results]
    total = [r[1] for r in results]
    chunks = sum(r[2] for r in results)
    return {
        "requests": len(results),
        "ttft_ms": {"p50": percentile(ttft, 50), "p99": percentile(ttft, 99), "mean": statistics.fmean(ttft)},
        "total_ms": {"p50": percentile(total, 50), "p99": percentile(total, 99), "mean": statistics.fmean(total)},
        "chunks_per_s": chunks / wall,
        "chunks_per_stream_s": chunks / (sum(total) / 1000),  # the streaming rate while its requests ran
        "wall_s": wall,
    }


def prepare_database(env: dict, upstream_url: str) -> str:
    """Migrate the throwaway database, add the endpoint and open a session; the session's base URL."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from llm.models import ModelCall
    from llm.services import create_endpoint, open_proxy_session, proxy_base_url

    call_command("migrate", verbosity=0)
    endpoint = create_endpoint("bench-upstream", base_url=upstream_url, model="bench-model", max_concurrent=1000)
    session = open_proxy_session(endpoint, subject="bench")
    prepare_database.count_calls = lambda: ModelCall.objects.filter(session=session).count()
    return proxy_base_url(session)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=40, help="SSE chunks per answer")
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between upstream chunks")
    parser.add_argument("--think", type=float, default=0.5, help="a client's longest pause before a request (s)")
    parser.add_argument(
        "--first-token-delay",
        type=float,
        default=0.0,
        help="seconds the upstream waits before it answers (a model's prefill); the aim is judged at 0 only",
    )
    parser.add_argument(
        "--proxy-loop",
        default="auto",
        choices=["auto", "asyncio", "uvloop"],
        help="uvicorn --loop for the proxy (auto: uvloop when installed)",
    )
    parser.add_argument(
        "--proxy-http",
        default="auto",
        choices=["auto", "h11", "httptools"],
        help="uvicorn --http for the proxy (auto: httptools when installed)",
    )
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="direct and proxied requests alternating within one load (the same load on both)",
    )
    parser.add_argument("--proxy-workers", type=int, default=1, help="uvicorn worker processes for the proxy")
    parser.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.chunks, args.chunk_delay, args.first_token_delay)
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="clawgym-proxy-bench-"))
    upstream_port, proxy_port = free_port(), free_port()
    env = {
        "CLAWGYM_VAR_DIR": str(workdir),
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "CLAWGYM_PROXY_PUBLIC_URL": f"http://127.0.0.1:{proxy_port}",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    child_env = {**os.environ, **env, "DJANGO_SETTINGS_MODULE": "clawgym_site.settings"}
    procs = []
    try:
        upstream = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-upstream",
                str(upstream_port),
                "--chunks",
                str(args.chunks),
                "--chunk-delay",
                str(args.chunk_delay),
                "--first-token-delay",
                str(args.first_token_delay),
            ],
            cwd=BASE_DIR,
            env=child_env,
        )
        procs.append(upstream)
        base_url = prepare_database(env, f"http://127.0.0.1:{upstream_port}/v1")
        proxy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "clawgym_site.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(proxy_port),
                "--log-level",
                "warning",
                "--no-access-log",
                "--loop",
                args.proxy_loop,
                "--http",
                args.proxy_http,
                *(["--workers", str(args.proxy_workers)] if args.proxy_workers > 1 else []),
            ],
            cwd=BASE_DIR,
            env=child_env,
        )
        procs.append(proxy)
        wait_for_port(upstream_port, upstream)
        wait_for_port(proxy_port, proxy)

        direct_url = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
        proxy_url = f"{base_url}/chat/completions"
        if args.mixed:
            cpu_before = proxy_cpu_seconds(proxy.pid)
            direct, proxied = asyncio.run(load([direct_url, proxy_url], args.streams, args.rounds, args.think))
        else:
            direct = asyncio.run(load(direct_url, args.streams, args.rounds, args.think))
            cpu_before = proxy_cpu_seconds(proxy.pid)
            proxied = asyncio.run(load(proxy_url, args.streams, args.rounds, args.think))
        cpu_used = proxy_cpu_seconds(proxy.pid) - cpu_before if cpu_before is not None else None
        recorded = prepare_database.count_calls()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)

    added = {
        "ttft_p50": proxied["ttft_ms"]["p50"] - direct["ttft_ms"]["p50"],
        "ttft_p99": proxied["ttft_ms"]["p99"] - direct["ttft_ms"]["p99"],
        "total_p50": proxied["total_ms"]["p50"] - direct["total_ms"]["p50"],
        "total_p99": proxied["total_ms"]["p99"] - direct["total_ms"]["p99"],
    }
    if args.mixed:  # the same wall for both sides: compare each side's streaming rate instead
        ratio = proxied["chunks_per_stream_s"] / direct["chunks_per_stream_s"]
    else:
        ratio = proxied["chunks_per_s"] / direct["chunks_per_s"]
    report = {
        "mixed": args.mixed,
        "proxy_workers": args.proxy_workers,
        "streams": args.streams,
        "rounds": args.rounds,
        "chunks_per_answer": args.chunks,
        "chunk_delay_s": args.chunk_delay,
        "first_token_delay_s": args.first_token_delay,
        "think_s": args.think,
        "cpus": os.cpu_count(),
        "proxy_server": {"loop": args.proxy_loop, "http": args.proxy_http},
        "direct": direct,
        "proxy": proxied,
        "recorded_calls": recorded,
        "proxy_cpu_ms_per_request": round(cpu_used * 1000 / proxied["requests"], 2) if cpu_used is not None else None,
        "added_latency_ms": {k: round(v, 2) for k, v in added.items()},
        "throughput_ratio": round(ratio, 3),
        "ttft_ratio": {q: round(proxied["ttft_ms"][q] / direct["ttft_ms"][q], 3) for q in ("p50", "p99")},
        "aim": {"p50_added_ms_max": AIM_P50_ADDED_MS, "throughput_ratio_min": AIM_THROUGHPUT_RATIO},
        "aim_met": ratio >= AIM_THROUGHPUT_RATIO and added["ttft_p50"] <= AIM_P50_ADDED_MS,
    }
    if not args.mixed and not args.think:
        report["aim"] = {"p50_added_ms_max": None, "throughput_ratio_min": AIM_THROUGHPUT_RATIO}
        report["aim_met"] = ratio >= AIM_THROUGHPUT_RATIO
    if args.first_token_delay:
        # A slow first token hides the proxy's hop in the ratio: the aims are judged against an upstream that
        # answers at once, where the ratio is the proxy's own cost.
        report["aim_met"] = None
    # A proxy that answered without recording is not the proxy being measured (the record is most of its work):
    # such a run has no figure. Each load also sends one warm-up call through the proxy, which is recorded too.
    if recorded < proxied["requests"]:
        report["aim_met"] = False
        report["error"] = f"the proxy answered {proxied['requests']} requests but recorded {recorded} calls"
    print(f"direct: TTFT p50 {direct['ttft_ms']['p50']:.1f} ms, {direct['chunks_per_s']:.0f} chunks/s")
    print(
        f"proxy:  TTFT p50 {proxied['ttft_ms']['p50']:.1f} ms, {proxied['chunks_per_s']:.0f} chunks/s, "
        f"{recorded} calls recorded"
    )
    print(json.dumps(report))
    if "error" in report:
        print(f"proxy_bench: {report['error']}: no figure", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
