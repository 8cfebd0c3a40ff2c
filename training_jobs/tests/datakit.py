"""Rollouts and trajectories made directly (fast), shaped as evaluation.services.rollouts.store_trajectories writes
them, for the dataset tests: a corpus with one trajectory for each way of being left out."""

from dataclasses import dataclass, field

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.models import EvalRun, Rollout, Trajectory
from llm.models import ModelEndpoint
from tasks.models import BenchmarkCategory, Task, TaskRevision

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


def conversation(task: str, answer: str = "Done: totals.md written.", *, calls: int = 2, ends: bool = True) -> list:
    """A realistic agent conversation: system prompt, the task, `calls` tool rounds, the final answer."""
    messages = [
        {"role": "system", "content": "You are a careful agent working in a local workspace. Use the tools."},
        {"role": "user", "content": f"[{task}] Sum the amounts in sales.csv per region into totals.md."},
    ]
    rounds = [
        ("read", '{"path": "sales.csv"}', "region,amount\nnorth,4\nsouth,2\nnorth,1\n"),
        ("exec", '{"command": "python3 -c \\"print(5, 2)\\""}', "5 2\n"),
        ("write", '{"path": "totals.md", "content": "north: 5\\nsouth: 2\\n"}', "wrote 20 bytes"),
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


def stats_of(messages: list, total_tokens: int = 1500) -> dict:
    names = [c["function"]["name"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    return {
        "turns": sum(1 for m in messages if m["role"] == "assistant"),
        "prompt_tokens": total_tokens - 100,
        "completion_tokens": 100,
        "total_tokens": total_tokens,
        "tool_calls": len(names),
        "tool_types": sorted(set(names)),
    }


@dataclass
class Corpus:
    endpoint: ModelEndpoint
    run: EvalRun
    group: str
    revisions: dict = field(default_factory=dict)  # task external id -> revision
    trajectories: dict = field(default_factory=dict)  # label -> Trajectory
    version: BenchmarkVersion | None = None


def make_task(external_id: str, *, source=Task.Source.PERSONA, category=None) -> TaskRevision:
    task = Task.objects.create(
        external_id=external_id, source=source, benchmark_category=category, status=Task.Status.READY, title=external_id
    )
    revision = TaskRevision.objects.create(
        task=task, number=1, instruction=f"Do {external_id}.", content_hash=f"hash-{external_id}"
    )
    Task.objects.filter(pk=task.pk).update(current_revision=revision)
    return revision


def add(
    corpus: Corpus,
    label: str,
    task: str,
    *,
    reward,
    messages=None,
    status=Rollout.Status.SCORED,
    exit_reason="completed",
    excluded=False,
    reason="",
    tokens=1500,
    in_run=True,
    index=0,
) -> Trajectory:
    messages = messages if messages is not None else conversation(task)
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
    )
    trajectory = Trajectory.objects.create(
        rollout=rollout,
        index=index,
        messages=messages,
        tools=TOOLS,
        reward=reward,
        stats=stats_of(messages, tokens),
        excluded=excluded,
        exclusion_reason=reason,
    )
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
            category=category if name != "sales-c" else None,
            source=Task.Source.SKILL if name.startswith("g-") else Task.Source.PERSONA,
        )
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
        excluded=True,
        reason="calls unsupported tools: canvas",
        messages=conversation("sales-a", "Drew it on the canvas."),
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
