"""The recording proxy's Prometheus metrics, counted in the process that serves it (scraped at /metrics).

With several web processes (uvicorn --workers) and PROMETHEUS_MULTIPROC_DIR set, each process writes its values there
and /metrics adds them up (ops.views): the streams in flight of live processes, the counters of all.
"""

from prometheus_client import Counter, Gauge

STREAMS_IN_FLIGHT = Gauge(
    "clawgym_proxy_streams_in_flight", "Streamed proxy answers being relayed now.", multiprocess_mode="livesum"
)
TOKENS = Counter("clawgym_proxy_tokens", "Tokens of the calls the proxy recorded.", ["direction"])
CALLS = Counter("clawgym_proxy_calls", "Calls the proxy recorded, by outcome.", ["outcome"])


def count_call(row: dict) -> None:
    """Count a recorded call (a ModelCall row's fields): its tokens in and out, and whether it failed."""
    TOKENS.labels(direction="input").inc(row.get("input_tokens") or 0)
    TOKENS.labels(direction="output").inc(row.get("output_tokens") or 0)
    CALLS.labels(outcome="error" if row.get("error") else "ok").inc()
