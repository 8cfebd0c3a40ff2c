#!/usr/bin/env python
"""Docker sandbox benchmark: the trivial run (`true`, default limits) in a fresh Workspace through DockerBackend.

Three ways, in this process, each BENCH_DOCKER_RUNS times (default 20, or --runs) after one warm-up run:
- throwaway: DockerBackend(ready_containers=False), a container created, started and removed for each run (the path
  before ready containers);
- pooled: the default, a ready container (sandbox.backends.docker_pool) taken by each run, with the next one made in
  the background; the bench waits for it before the next run, as a worker's slot has an agent turn or more between
  two runs;
- pooled_back_to_back: the same with no pause, so each run takes one of the containers (docker_pool.AHEAD) being made
  behind the runs before, and waits for it where the engine has not finished starting it: the engine's starts are
  then on the runs' time again, bounded by how many it finishes a second.
Then where the throwaway run's time goes, per step (median ms): the size-limited workspace made, the container
created, attached, started, waited for, inspected, removed, the workspace copied back and its filesystem removed.

Needs root, a Docker engine and the sandbox image (`make docker`, scripts/images/sandbox.sh). One JSON object on the
last line: {"runs", "command", "throwaway": {"p50_s", "mean_s"}, "pooled": {...}, "pooled_back_to_back": {...},
"ratio" (pooled p50 / throwaway p50), "ratio_back_to_back", "throwaway_steps_ms", "loadavg"}.
"""

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COMMAND = ["true"]


def summary(timings: list[float]) -> dict:
    return {"p50_s": round(statistics.median(timings), 4), "mean_s": round(statistics.mean(timings), 4)}


def time_runs(backend, runs: int, between=None) -> list[float]:
    from sandbox import Workspace

    timings = []
    for n in range(runs + 1):  # the first is the warm-up
        workspace = Workspace.create({"input.txt": b"hello\n"})
        try:
            began = time.perf_counter()
            result = backend.run(COMMAND, workspace)
            elapsed = time.perf_counter() - began
            assert result.ok, result
        finally:
            workspace.cleanup()
        if n:
            timings.append(elapsed)
        if between:
            between()
    return timings


def steps(backend, runs: int) -> dict:
    """The throwaway path again, each SDK call and volume step timed where it is made."""
    import docker.api.container
    import docker.models.containers

    from sandbox.backends import docker_pool, volume

    spent = collections.defaultdict(list)
    patched = []

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label].append(time.perf_counter() - began)

        setattr(owner, name, timed)
        patched.append((owner, name, original))

    container = docker.models.containers.Container
    wrap(volume.Volume, "__init__", "volume_make")
    wrap(docker.models.containers.ContainerCollection, "create", "create")
    wrap(docker.api.container.ContainerApiMixin, "attach_socket", "attach")
    for name in ("start", "wait", "reload", "remove"):
        wrap(container, name, name)
    wrap(volume.Volume, "copy_back", "copy_back")
    wrap(volume.Volume, "remove", "volume_remove")
    try:
        time_runs(backend, runs, between=docker_pool.settle)  # removal is in the background: settled to time it
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
    return {label: round(statistics.median(values[1:]) * 1000, 1) for label, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_DOCKER_RUNS", 20)))
    runs = parser.parse_args().runs

    from sandbox.backends import docker_pool
    from sandbox.backends.docker import DockerBackend

    throwaway = DockerBackend(ready_containers=False)
    throwaway.check_available()
    pooled = DockerBackend()
    load_before = os.getloadavg()
    timings = {
        "throwaway": time_runs(throwaway, runs),
        "pooled": time_runs(pooled, runs, between=docker_pool.pool.wait_filled),
        "pooled_back_to_back": time_runs(pooled, runs),
    }
    docker_pool.settle()
    breakdown = steps(throwaway, runs)
    figures = {name: summary(values) for name, values in timings.items()}
    report = {
        "runs": runs,
        "command": " ".join(COMMAND),
        **figures,
        "ratio": round(figures["pooled"]["p50_s"] / figures["throwaway"]["p50_s"], 3),
        "ratio_back_to_back": round(figures["pooled_back_to_back"]["p50_s"] / figures["throwaway"]["p50_s"], 3),
        "throwaway_steps_ms": breakdown,
        "loadavg": [round(x, 2) for x in load_before] + [round(x, 2) for x in os.getloadavg()],
    }
    for name, figure in figures.items():
        print(f"{name:>20}: p50 {figure['p50_s'] * 1000:.0f} ms, mean {figure['mean_s'] * 1000:.0f} ms")
    print("throwaway steps (ms):", ", ".join(f"{k} {v}" for k, v in breakdown.items()))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
