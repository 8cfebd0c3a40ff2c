"""training_jobs' test helpers, in one place (its tests' fixtures are in tests/conftest.py). Here: varied agent
conversations in the shapes evaluation.trajectories stores (OpenAI chat messages, tool calls with JSON-string
arguments, tool results), for the mask and export tests and bench/mask_bench.py; a scripted model for the batched
sampler, and its sampler run beside a test. Beside it: `corpus` (rollouts and their trajectories for the dataset
tests), `runs` (training runs and checkpoints), `policy_calls` (a policy's recorded model calls) and `rl_tasks`
(tasks an RL run trains on)."""

import json
import random
import threading
from contextlib import contextmanager
from types import SimpleNamespace

from training.tiny_model import TOOLS

SYSTEM = "You are a careful agent working in a local workspace. Use the tools to read, edit and run files."


def call(name: str, arguments: dict | str, call_id: str) -> dict:
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def varied_conversations() -> list[dict]:
    """Samples {"messages", "tools"} covering what masks must get right."""
    plain = [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "5."},
    ]
    tools_and_reasoning = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Sum the amounts in sales.csv per region into totals.md."},
        {
            "role": "assistant",
            "content": "I will read the file and list the folder.",
            "reasoning_content": "The file is small; read it first.",
            "tool_calls": [call("read", {"path": "sales.csv"}, "c1"), call("ls", {"path": "."}, "c2")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "region,amount\nnorth,4\nsouth,2\nnorth,1\n"},
        {"role": "tool", "tool_call_id": "c2", "content": "sales.csv\nnotes.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("write", {"path": "totals.md", "content": "north: 5\nsouth: 2\n"}, "c3"),
                call("exec", {"command": "cat totals.md"}, "c4"),
                call("exec", {"command": "wc -l totals.md"}, "c5"),
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "wrote 20 bytes"},
        {"role": "tool", "tool_call_id": "c4", "content": [{"type": "text", "text": "north: 5\nsouth: 2\n"}]},
        {"role": "tool", "tool_call_id": "c5", "content": "2 totals.md"},
        {
            "role": "assistant",
            "content": "<think>\nChecked: both regions are there.\n</think>\n\nDone: totals.md "
            "holds north 5 and south 2.",
        },
    ]
    several_users = [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": "List the folder."}]},
        {"role": "assistant", "content": "", "tool_calls": [call("ls", '{"path": "src"}', "a")]},
        {"role": "tool", "tool_call_id": "a", "content": "app.py\n"},
        {"role": "assistant", "content": [{"type": "text", "text": "One file: app.py."}]},
        {"role": "user", "content": "Now run it. Ünïcödé and emoji 🚀 are fine."},
        {
            "role": "assistant",
            "content": "Running.",
            "reasoning": "The user wants it run.",
            "tool_calls": [call("exec", "python3 src/app.py --flag", "b")],
        },  # not JSON: kept as sent
        {"role": "tool", "tool_call_id": "b", "content": "Traceback (most recent call last):\n  FileNotFoundError"},
        {"role": "assistant", "content": "It failed: data.json is missing."},
    ]
    return [
        {"messages": plain, "tools": []},
        {"messages": tools_and_reasoning, "tools": TOOLS},
        {"messages": several_users, "tools": TOOLS[:4]},
        {"messages": long_trajectory(random.Random(7), turns=6), "tools": TOOLS},
    ]


def long_trajectory(rng: random.Random, turns: int = 13, file_lines: int = 40) -> list[dict]:
    """A realistic long agent trajectory: `turns` assistant turns, 1-3 tool calls each (the paper averages 13 turns
    and 15.82 calls), tool results of file-sized text, some reasoning, a final answer."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Refactor the report generator in src/ and make its tests pass."},
    ]
    n = 0
    for turn in range(turns - 1):
        calls = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            n += 1
            name = rng.choice(("read", "exec", "write", "edit", "ls"))
            path = f"src/module_{rng.randrange(20)}.py"
            arguments = {
                "read": {"path": path},
                "ls": {"path": "src"},
                "exec": {"command": f"pytest -q {path}"},
                "write": {"path": path, "content": _code(rng, 8)},
                "edit": {"path": path, "old": "return total", "new": "return round(total, 2)"},
            }[name]
            calls.append(call(name, arguments, f"call_{n}"))
        message = {
            "role": "assistant",
            "content": f"Step {turn + 1}: checking {len(calls)} thing(s).",
            "tool_calls": calls,
        }
        if rng.random() < 0.4:
            message["reasoning_content"] = f"The failure in step {turn} points at the rounding; look again."
        messages.append(message)
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": _code(rng, file_lines)})
    messages.append({"role": "assistant", "content": "All tests pass now; the generator rounds totals to cents."})
    return messages


def _code(rng: random.Random, lines: int) -> str:
    words = ("total", "amount", "region", "report", "row", "value", "items", "path", "data", "result")
    out = []
    for i in range(lines):
        a, b = rng.choice(words), rng.choice(words)
        out.append(f"    {a}_{i} = {b}.get('{rng.choice(words)}', {rng.randrange(100)})  # {a} from {b}")
    return "\n".join(out) + "\n"


@contextmanager
def sampling(policy):
    """A LivePolicy's sampler run in a thread of its own while a test calls it (the trainer runs it in its main thread
    while it waits for a step's rollouts; a tiny model does not mind the second thread); stopped after."""
    thread = threading.Thread(target=policy.run, name="test-policy-sampler", daemon=True)
    thread.start()
    try:
        yield policy
    finally:
        policy.stop()
        thread.join(timeout=30)


def scripted_model(answers: list[list[int]], vocabulary: int = 1024):
    """A causal LM for the batched sampler whose rows sample scripted answers, in the order the rows start: each new
    row (a prefill with an empty cache) takes the next answer, and its step k gives answer[k] all the probability (its
    logprob 0), then the end of the answer repeats its last token. The row's answer and prompt length ride in a
    one-layer cache of its own ([rows, 1, columns, 1]), which the sampler merges, cuts and drops like a real one. Run
    the policy with prefix_bytes=0: a stored prefix would skip the prefill that takes an answer."""
    import torch

    class Scripted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))  # the sampler reads the device off a parameter
            self.answers = [list(a) for a in answers]
            self.started: list[list[int]] = []  # the answers taken, a row's index into them in its cache

        def forward(self, input_ids, attention_mask, cache, **kwargs):
            rows, width = input_ids.shape
            if cache.get_seq_length() == 0:
                scripts = [self.answers.pop(0) for _ in range(rows)]
                self.started += scripts
                first = len(self.started) - rows
                picked = torch.arange(first, first + rows, dtype=torch.float32)
                lengths = attention_mask.sum(1).float()
            else:
                picked = cache.layers[0].keys[:, 0, -1, 0]
                lengths = cache.layers[0].values[:, 0, -1, 0]
            shape = (rows, 1, width, 1)
            cache.update(picked.view(rows, 1, 1, 1).expand(shape), lengths.view(rows, 1, 1, 1).expand(shape), 0)
            logits = torch.full((rows, 1, vocabulary), float("-inf"))
            for row in range(rows):
                script = self.started[int(picked[row])]
                index = min(int(attention_mask[row].sum() - lengths[row]), len(script) - 1)
                logits[row, 0, script[index]] = 0.0
            return SimpleNamespace(logits=logits)

    return Scripted()
