#!/usr/bin/env python
"""CPU serving speed of the real small model on SmolLM2-135M-Instruct converted from its registry package, each server
started with the command training_jobs.serving starts: `transformers serve` plain ("plain") and with
`--continuous-batching` ("cb"), and ClawGym's own batched server ("batched", training.batched_server).

For each server mode, after a warm-up call:
- 1 stream: `--calls` streamed chat completions one after another;
- N streams: `--streams` clients at once, each making `--calls` calls;
each call a ~280-token agent-like prompt (system prompt, tools, a task) answered greedily up to `--max-tokens`.
Reported per mode: output tokens/s over the wall time (all streams together), time to first token (median, p90) and
the ratio of N streams' throughput to 1 stream's in the same mode; and the continuous-batching and batched modes'
throughput against the plain one's at N streams (`cb_over_plain`, `batched_over_plain`) and the batched one's
against continuous batching's (`batched_over_cb`), all measured in this process. The batched server streams an
answer in one burst once it is sampled, so its time to first token is its whole call's.

The model is converted into a temporary folder unless --model FOLDER names one (e.g. a `base_models add` folder,
CLAWGYM_TRAINING_DIR/base-models/smollm2-135m-instruct). The last line is one JSON object:
{"model", "threads", "modes": {MODE: {"single": {...}, "concurrent": {...}, "concurrent_over_single"}},
 "cb_over_plain", "batched_over_plain", "batched_over_cb", "prompt_tokens"}

    .venv/bin/python bench/serve_bench.py [--model FOLDER] [--streams 8] [--calls 3] [--max-tokens 64]
        [--modes plain,cb,batched]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))
from netutil import free_port  # noqa: E402  (bench/ helper)

NAME = "smollm2-135m-instruct"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Create or overwrite a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
]
SYSTEM = (
    "You are an agent working in the folder /workspace. Use the tools to read and write files there. When the "
    "task is done, answer with a short summary and no tool call."
)


def messages(i: int) -> list[dict]:
    task = (
        f"Task {i}: create the file notes/day-{i}.txt holding exactly the line 'meeting at {9 + i % 8}:30', then "
        "create summary.txt with one line per file you wrote. Keep every other file as it is. The folder holds "
        "a README.md and a data/ folder with three CSV files you do not need to read for this task."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def convert(out: Path) -> Path:
    folder = out / NAME
    done = subprocess.run(
        [sys.executable, "-m", "training.converters", NAME, str(folder)],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"the conversion failed: {done.stderr[-2000:]}")
    return folder


KEY = "serve-bench-key"  # the server's key: its front checks it (and passes it on to the batched server)
HEADERS = {"Authorization": f"Bearer {KEY}"}


def start_server(model: Path, folder: Path, mode: str):
    """The mode's server as training_jobs.serving starts it, behind its front (the backend on a Unix socket):
    transformers serve NAME in a folder where NAME links to the model (plain, or with continuous batching), or the
    batched server on the folder."""
    from training_jobs.serve_backends import model_link
    from training_jobs.server_processes import backend_socket, served_command

    port = free_port()
    env = {**os.environ, "CLAWGYM_FRONT_KEY": KEY}
    if mode == "batched":
        folder.mkdir(parents=True, exist_ok=True)
        command = served_command("batched", str(model), NAME, "127.0.0.1", port, backend_socket(), BASE_DIR)
        env["CLAWGYM_POLICY_KEY"] = KEY
    else:
        cwd = model_link(folder, NAME, str(model))
        command = [
            part
            for part in served_command("transformers", str(model), NAME, "127.0.0.1", port, backend_socket(), cwd)
            if part != "--continuous-batching"
        ]
        if mode == "cb":
            command.append("--continuous-batching")
    cwd = BASE_DIR  # the front (`-m training.serving_front`) runs here and starts its backend in the folder it is given
    log = open(folder / f"serve-{port}.log", "w")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"the {mode} server exited {process.returncode}: {(folder / log.name).read_text()[-2000:]}"
            )
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models", headers=HEADERS)
            with urllib.request.urlopen(request, timeout=5):
                return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(1)
    process.kill()
    raise SystemExit(f"the {mode} server did not answer within 600 s")


def stream_call(base_url: str, i: int, max_tokens: int) -> dict:
    body = {
        "model": NAME,
        "messages": messages(i),
        "tools": TOOLS,
        "stream": True,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json", **HEADERS}
    )
    started = time.monotonic()
    first = None
    pieces = 0
    usage = None
    with urllib.request.urlopen(request, timeout=600) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("tool_calls"):
                    pieces += 1
                    first = first or time.monotonic()
    ended = time.monotonic()
    tokens = (usage or {}).get("completion_tokens") or pieces
    return {
        "ttft": (first or ended) - started,
        "seconds": ended - started,
        "tokens": tokens,
        "prompt_tokens": (usage or {}).get("prompt_tokens"),
    }


def measure(base_url: str, streams: int, calls: int, max_tokens: int) -> dict:
    results: list[dict] = []
    lock = threading.Lock()

    def client(k: int):
        for c in range(calls):
            result = stream_call(base_url, k * calls + c, max_tokens)
            with lock:
                results.append(result)

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    ttfts = sorted(r["ttft"] for r in results)
    tokens = sum(r["tokens"] for r in results)
    return {
        "streams": streams,
        "calls": len(results),
        "tokens": tokens,
        "wall_s": round(wall, 2),
        "tokens_per_s": round(tokens / wall, 2),
        "ttft_p50_s": round(statistics.median(ttfts), 3),
        "ttft_p90_s": round(ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))], 3),
        "prompt_tokens": results[0]["prompt_tokens"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a converted model folder (default: convert into a temp dir)")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--calls", type=int, default=3, help="calls per stream")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--modes", default="plain,cb,batched", help="plain, cb (continuous batching) and/or batched (ClawGym's server)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        model = args.model or convert(Path(tmp))
        report = {"model": NAME, "threads": os.cpu_count(), "modes": {}}
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            process, base_url = start_server(model, Path(tmp) / f"served-{mode}", mode)
            try:
                stream_call(base_url, 999, 8)  # warm-up
                single = measure(base_url, 1, args.calls, args.max_tokens)
                concurrent = measure(base_url, args.streams, args.calls, args.max_tokens)
            finally:
                os.killpg(process.pid, 9)
                process.wait()
            report["modes"][mode] = {
                "single": single,
                "concurrent": concurrent,
                "concurrent_over_single": round(concurrent["tokens_per_s"] / single["tokens_per_s"], 2),
            }
            report["prompt_tokens"] = single["prompt_tokens"]
            print(f"{mode}: {json.dumps(report['modes'][mode])}", file=sys.stderr, flush=True)
        modes = report["modes"]
        for a, b in (("cb", "plain"), ("batched", "plain"), ("batched", "cb")):
            if a in modes and b in modes:
                report[f"{a}_over_{b}"] = round(
                    modes[a]["concurrent"]["tokens_per_s"] / modes[b]["concurrent"]["tokens_per_s"], 2
                )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
