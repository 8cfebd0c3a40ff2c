"""The load bench's scripted agents: N concurrent streaming clients, each with a recording session of its own.

Each agent loops until the deadline (or SIGTERM): a pause of 0..`think` s (an agent running a tool), then one
streamed chat completion with its conversation so far (reset every few turns, as a new task would). Every other
request of an agent goes straight to the upstream instead of through the proxy (which one first is drawn per agent,
seeded), so the direct and proxied samples see the same machine at the same moments: the proxy's added latency is
their difference. One JSON line per request in `out`: {"t", "via", "ttft_ms", "total_ms", "chunks", "ok", "error"}.

    python bench/load/agents.py CONFIG.json   # {"sessions": [proxy base URLs], "direct_url", "until", "think", "out"}
"""

import asyncio
import json
import random
import signal
import sys
import time

TURNS_PER_CONVERSATION = 6


async def one_request(client, url: str, messages: list, model: str, seen: dict) -> dict:
    """One streamed call; `seen` tells, should it fail, how far it got (status, chunks)."""
    body = {"model": model, "messages": messages, "stream": True}
    began = time.perf_counter()
    first = None
    done = False
    async with client.stream("POST", url, json=body, headers={"authorization": "Bearer load-bench"}) as response:
        seen["status"] = response.status_code
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        async for raw in response.aiter_raw():
            if first is None:
                first = time.perf_counter()
            seen["chunks"] += raw.count(b"data: ")
            done = done or b"data: [DONE]" in raw
    if not done:
        raise RuntimeError(f"the stream ended without [DONE] after {seen['chunks']} chunks")
    return {
        "ttft_ms": round((first - began) * 1000, 3),
        "total_ms": round((time.perf_counter() - began) * 1000, 3),
        "chunks": seen["chunks"],
    }


async def agent(n: int, config: dict, client, out, stop: asyncio.Event) -> None:
    rng = random.Random(config.get("seed", 7) * 1000 + n)
    proxied_next = rng.random() < 0.5
    messages: list = []
    while not stop.is_set() and time.time() < config["until"]:
        try:
            await asyncio.wait_for(stop.wait(), timeout=rng.uniform(0, config["think"]))
            return
        except TimeoutError:
            pass
        if time.time() >= config["until"]:
            return
        if len(messages) >= 2 * TURNS_PER_CONVERSATION:
            messages = []
        messages.append({"role": "user", "content": f"agent {n}: step {len(messages) // 2 + 1}"})
        via = "proxy" if proxied_next else "direct"
        proxied_next = not proxied_next
        url = f"{config['sessions'][n]}/chat/completions" if via == "proxy" else config["direct_url"]
        sample = {"t": round(time.time(), 3), "via": via, "agent": n}
        seen = {"status": None, "chunks": 0}
        try:
            sample.update(await one_request(client, url, messages, config["model"], seen), ok=True)
            messages.append({"role": "assistant", "content": "tok " * 4})
        except asyncio.CancelledError:
            return
        except Exception as exc:  # counted, never retried silently: an agent sees a failed model call
            sample.update(
                ok=False, error=f"{type(exc).__name__}: {exc}"[:300], status=seen["status"], chunks=seen["chunks"]
            )
            messages.pop()
        sample["end"] = round(time.time(), 3)
        out.write(json.dumps(sample) + "\n")


async def main(config: dict) -> None:
    import httpx

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    count = len(config["sessions"])
    # Idle connections are dropped after 2 s, before the servers' own 5 s keep-alive (uvicorn's default) closes them:
    # a request sent on a connection the server is closing at that moment would fail for the client's pool alone.
    limits = httpx.Limits(max_connections=count * 2, max_keepalive_connections=count * 2, keepalive_expiry=2.0)
    with open(config["out"], "a", buffering=1) as out:
        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60, connect=10)) as client:
            tasks = [asyncio.create_task(agent(n, config, client, out, stop)) for n in range(count)]
            stopper = asyncio.create_task(stop.wait())
            waiting = asyncio.gather(*tasks)
            await asyncio.wait([stopper, waiting], return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():  # SIGTERM: requests in flight are left out, not counted as errors
                for task in tasks:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            stopper.cancel()


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        asyncio.run(main(json.load(fh)))
