"""The load bench's scripted model: one OpenAI-compatible server on loopback for both kinds of client.

- model AGENT_MODEL (the scripted agents): every answer streamed as `--chunks` SSE chunks `--chunk-delay` s apart,
  as a model producing tokens;
- model ROLLOUT_MODEL (the rollouts' builtin harness): a `write` of the fruit task's right summary, then "Done."
  once a tool result is in the conversation, so every rollout that runs to its end scores 1.0.

    python bench/load/upstream.py PORT [--chunks 40] [--chunk-delay 0.02]
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

AGENT_MODEL = "load-agent"
ROLLOUT_MODEL = "load-rollout"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--chunk-delay", type=float, default=0.02)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    import django

    django.setup()  # for the fruit task's constants (no database is used here)
    import uvicorn

    from evaluation.testing import RIGHT_SUMMARY
    from llm.testing import Reply, ScriptedUpstream

    streamed = Reply.text("tok " * args.chunks, chunk_size=4, chunk_delay=args.chunk_delay)

    def respond(body: dict) -> Reply:
        body = body if isinstance(body, dict) else {}
        if body.get("model") != ROLLOUT_MODEL:
            return streamed
        messages = body.get("messages") or []
        if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
            return Reply.text("Done: summary.txt is written.")
        return Reply.tool_call("write", {"path": "summary.txt", "content": RIGHT_SUMMARY})

    upstream = ScriptedUpstream(model=AGENT_MODEL)
    upstream.responder = respond
    upstream.requests = _Forgetful()  # a bounded run, but no need to keep every request in memory
    uvicorn.run(upstream, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, lifespan="off")


class _Forgetful(list):
    def append(self, item) -> None:
        pass


if __name__ == "__main__":
    main()
