"""Rollouts for the dataset tests, their model calls recorded as the proxy records them (no agent runs: fast) and their
trajectories rebuilt by evaluation.services.results.store_trajectories: a corpus with one trajectory for each way of
being left out."""

from dataclasses import dataclass, field

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun, Rollout, Trajectory
from evaluation.services.results import store_trajectories
from llm.models import ModelCall, ModelEndpoint, ProxySession
from tasks.models import BenchmarkCategory, Task
from tasks.testing import make_task

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "exec",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    },
]


# (tool, arguments, result) of the rounds a conversation goes through, in turn.
ROUNDS = [
    ("read", '{"path": "sales.csv"}', "region,amount\nnorth,4\nsouth,2\nnorth,1\n"),
    ("exec", '{"command": "python3 -c \\"print(5, 2)\\""}', "5 2\n"),
    ("write", '{"path": "totals.md", "content": "north: 5\\nsouth: 2\\n"}', "wrote 20 bytes"),
]
# A tool no harness offers (evaluation.trajectories.DEFAULT_SUPPORTED_TOOLS): a trajectory calling it is excluded.
CANVAS = ("canvas", '{"chart": "totals"}', "drawn")


def conversation(
    task: str, answer: str = "Done: totals.md written.", *, calls: int = 2, ends: bool = True, rounds=ROUNDS
) -> list:
    """A realistic agent conversation: system prompt, the task, `calls` tool rounds, the final answer."""
    messages = [
        {"role": "system", "content": "You are a careful agent working in a local workspace. Use the tools."},
        {"role": "user", "content": f"[{task}] Sum the amounts in sales.csv per region into totals.md."},
    ]
    for i in range(calls):
        name, arguments, result = rounds[i % len(rounds)]
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i + 1}.",
                "tool_calls": [
                    {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
    if ends:
        messages.append({"role": "assistant", "content": answer})
    return messages


def reserialised(messages: list) -> list:
    """The same conversation as another rollout would record it: other tool call ids, arguments re-dumped with
    other spacing, whitespace at the ends of the text, and reasoning."""
    import json

    out = []
    for m in messages:
        m = {**m, "content": f"  {m['content']}\n"}
        if m.get("tool_calls"):
            m["reasoning_content"] = "Thinking about the next step."
            m["tool_calls"] = [
                {
                    **c,
                    "id": f"toolu_{c['id']}",
                    "function": {
                        **c["function"],
                        "arguments": json.dumps(json.loads(c["function"]["arguments"]), indent=1),
                    },
                }
                for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            m["tool_call_id"] = f"toolu_{m['tool_call_id']}"
        out.append(m)
    return out


def usage(tokens: int, turn: int, turns: int) -> dict:
    """The usage of call `turn` of `turns`: together they make `tokens`, 100 of them completion tokens."""
    prompt, completion = share(tokens - 100, turn, turns), share(100, turn, turns)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def share(total: int, turn: int, turns: int) -> int:
    each, rest = divmod(total, turns)
    return each + (rest if turn == turns - 1 else 0)


@dataclass
class Corpus:
    endpoint: ModelEndpoint
    run: EvalRun
    group: str
    revisions: dict = field(default_factory=dict)  # task external id -> revision
    trajectories: dict = field(default_factory=dict)  # label -> Trajectory
    version: BenchmarkVersion | None = None


def add(
    corpus: Corpus,
    label: str,
    task: str,
    *,
    reward,
    messages=None,
    status=Rollout.Status.SCORED,
    exit_reason="completed",
    tokens=1500,
    in_run=True,
    forged=(),
) -> Trajectory:
    """A rollout whose agent had the conversation `messages`: one model call recorded for each assistant turn (sent
    the conversation before it), but for the turns at the indices `forged`, which the agent sent as history of its
    own. Its trajectory is what store_trajectories rebuilds from those calls."""
    messages = messages if messages is not None else conversation(task)
    session = ProxySession.objects.create(endpoint=corpus.endpoint, subject=f"rollout:{label}")
    rollout = Rollout.objects.create(
        revision=corpus.revisions[task],
        endpoint=corpus.endpoint,
        harness="builtin",
        status=status,
        exit_reason=exit_reason,
        score=reward,
        eval_run=corpus.run if in_run else None,
        group="" if in_run else corpus.group,
        attempt=1,
        proxy_session=session,
    )
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i not in forged]
    for n, i in enumerate(turns):
        ModelCall.objects.record(
            endpoint=corpus.endpoint,
            endpoint_name=corpus.endpoint.name,
            purpose="proxy",
            session=session,
            api="chat",
            request={"model": corpus.endpoint.model, "messages": messages[:i], "tools": TOOLS},
            response={
                "object": "chat.completion",
                "choices": [{"index": 0, "message": messages[i], "finish_reason": "stop"}],
                "usage": usage(tokens, n, len(turns)),
            },
            status_code=200,
        )
    (trajectory,) = store_trajectories(rollout, reward=reward)
    corpus.trajectories[label] = trajectory
    return trajectory


def make_corpus() -> Corpus:
    """Nine tasks; kept: good (1.0), half (0.5), and one trajectory on each of five more tasks (from a rollout group,
    not the run); left out: low (0.4), zero (0.0), no reward, excluded by the rules, incomplete (failed rollout),
    unfinished (ends on a tool call), too long (90k tokens), `good` again as another rollout recorded it (other ids and
    spacing; rewarded 0.75, so `good` is the one kept), and a benchmark task."""
    endpoint = ModelEndpoint.objects.create(
        name="agent-m", base_url="http://127.0.0.1:9/v1", model="m", roles=["agent"]
    )
    run = EvalRun.objects.create(name="m on tasks", endpoint=endpoint, harness="builtin", config_hash="x" * 64)
    corpus = Corpus(endpoint=endpoint, run=run, group="g" * 12)
    category = BenchmarkCategory.objects.order_by("order").first() or BenchmarkCategory.objects.create(
        slug="office", name="Office"
    )
    tasks = ["sales-a", "sales-b", "sales-c", "bench-task", "g-1", "g-2", "g-3", "g-4", "g-5"]
    for name in tasks:
        corpus.revisions[name] = make_task(
            name,
            f"Do {name}.",
            files=[],
            metadata={"category": category.slug} if name != "sales-c" else {},
            source=Task.Source.SKILL if name.startswith("g-") else Task.Source.PERSONA,
        ).current_revision
    add(corpus, "good", "sales-a", reward=1.0)
    add(corpus, "duplicate", "sales-a", reward=0.75, messages=reserialised(conversation("sales-a")))  # good is kept
    add(corpus, "half", "sales-b", reward=0.5, messages=conversation("sales-b", calls=3))
    add(corpus, "low", "sales-b", reward=0.4, messages=conversation("sales-b", "Totals are maybe right."))
    add(corpus, "zero", "sales-c", reward=0.0, messages=conversation("sales-c", "I could not do it."))
    add(
        corpus,
        "no_reward",
        "sales-c",
        reward=None,
        status=Rollout.Status.SCORED,
        messages=conversation("sales-c", "Judged later."),
    )
    add(
        corpus,
        "rules",
        "sales-a",
        reward=1.0,
        messages=conversation("sales-a", "Drew it on the canvas.", calls=3, rounds=[*ROUNDS[:2], CANVAS]),
    )
    add(
        corpus,
        "failed",
        "sales-b",
        reward=None,
        status=Rollout.Status.FAILED,
        exit_reason="upstream_error",
        messages=conversation("sales-b", "x"),
    )
    add(corpus, "unfinished", "sales-c", reward=1.0, messages=conversation("sales-c", ends=False))
    add(
        corpus,
        "long",
        "sales-c",
        reward=1.0,
        tokens=90_000,
        messages=conversation("sales-c", "Long way round.", calls=3),
    )
    add(corpus, "benchmark", "bench-task", reward=1.0, messages=conversation("bench-task"))
    for i in range(1, 6):
        add(corpus, f"g-{i}", f"g-{i}", reward=0.75, in_run=False, messages=conversation(f"g-{i}", calls=i))
    benchmark = Benchmark.objects.create(name="office-bench")
    corpus.version = BenchmarkVersion.objects.create(benchmark=benchmark, number=1)
    PinnedRevision.objects.create(version=corpus.version, revision=corpus.revisions["bench-task"])
    return corpus


KEPT = {"good", "half", "g-1", "g-2", "g-3", "g-4", "g-5"}
EXCLUDED = {  # with max_tokens 65536
    "below_min_reward": 2,  # low, zero
    "no_reward": 1,
    "excluded_by_rules:calls unsupported tools: canvas": 1,
    "incomplete": 2,  # failed, unfinished
    "too_long": 1,
    "benchmark_task": 1,
    "near_duplicate": 1,
}
