"""Plain helpers and constants shared by training_jobs' test modules (fixtures live in conftest.py)."""

import hashlib
import random
import threading
from pathlib import Path

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from lib.testing import wait_until
from llm.models import ModelCall, ModelCallTokens
from llm.testing_tokens import (
    TOY_EOS,
    toy_assistant,
    toy_logprob,
    toy_prompt_ids,
    toy_tokenize,
)
from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package
from training_jobs.kinds.sft import build_config
from training_jobs.models import Checkpoint, TrainingMetric, TrainingRun
from training_jobs.run_jobs import execute_training, run_dir


def in_thread(run_id: int) -> threading.Thread:
    def body():
        from django.db import connection

        try:
            execute_training(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def trainer_pid(run: TrainingRun) -> int:
    path = run_dir(run) / "trainer.pid"
    wait_until(path.exists, "the trainer's pid file", timeout=300)
    return int(path.read_text())


SYSTEM = {"role": "system", "content": "You work in /workspace."}


USER = {"role": "user", "content": "Summarise fruit.csv."}


def answer(content=None, calls=()):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    return message


def record(session, messages, message, *, tokens=True, error="", status=200, tools=None) -> ModelCall:
    """One proxied call as the proxy stores it: its request, answer and (with `tokens`) the toy policy's tokens."""
    request = {"model": "policy", "messages": messages, **({"tools": tools} if tools else {})}
    call = ModelCall.objects.create(
        endpoint_name="policy",
        purpose="proxy",
        session=session,
        request=request,
        status_code=status,
        error=error,
        response=None if error else {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
    )
    if tokens and not error:
        completion = toy_tokenize(toy_assistant(message.get("content"), message.get("tool_calls"))) + [TOY_EOS]
        ModelCallTokens.objects.record(
            call=call,
            prompt_token_ids=toy_prompt_ids(request),
            completion_token_ids=completion,
            completion_logprobs=[toy_logprob(t, n) for n, t in enumerate(completion)],
        )
    return call


def calls_of(session):
    return ModelCall.objects.filter(session=session).select_related("tokens").order_by("created_at", "id")


def tool(call_id, text):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


# Words unrelated to one another, for instructions that no two tasks share (distinct_instruction).
WORDS = (
    "apple harbor violin glacier tax invoice tulip rocket saddle lantern orbit canyon pepper sonnet ledger falcon quartz "
    "meadow ferry cactus vinyl bishop compass marble walrus thunder biscuit pylon orchid kayak anchor prism mosaic "
    "badger velvet cobalt turbine nectar granite jigsaw lemur piano oyster sundial tractor umbrella zeppelin yogurt "
    "wombat xylophone vortex tundra sapphire raccoon quiver pelican noodle magnet kettle jasmine igloo hammock goblet "
    "fjord emerald dolphin crayon blizzard asteroid"
).split()


def distinct_instruction(external_id: str) -> str:
    """An instruction of the task's own: eight words drawn by its id. Tasks sharing one instruction (or a template
    with only the id changed) are near-duplicates to the contamination check (training_jobs.contamination), so tests
    that pin one task and train on another give each its own; any two of these are far below the threshold."""
    rng = random.Random(hashlib.sha256(external_id.encode()).digest())
    return "Work on " + " ".join(rng.sample(WORDS, 8)) + "."


def task(external_id: str, *, rubric: bool = False):
    files = [
        PackageFile("notes.txt", b"apples and pears\n", "input"),
        PackageFile("check.py", LENGTH_CHECK.encode(), "reward"),
        PackageFile("reward.sh", REWARD_SH.encode(), "reward"),
    ]
    package = TaskPackage(
        external_id=external_id,
        instruction="Summarise notes.txt in one line.",
        metadata={"category": "Testing", "grading_type": "automated"},
        files=files,
    )
    if rubric:
        package.rubric, package.code_weight = [RULE], 0.7
    return save_package(package).revision


def served_run(model_path: str, tmp_path: Path, *, lora_without_hash: bool = False) -> Checkpoint:
    """A finished run with one checkpoint: a folder of its own linked to the tiny model (or a LoRA adapter with no
    sha256, which cannot be merged)."""
    run = TrainingRun.objects.create(
        name="served",
        base_model_path=model_path,
        config=build_config("tiny-cpu"),
        preset="tiny-cpu",
        cpu=True,
        status=TrainingRun.Status.SUCCEEDED,
    )
    folder = tmp_path / f"run-{run.pk}" / "checkpoint-2"
    folder.parent.mkdir(parents=True)
    if lora_without_hash:
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
    else:
        folder.symlink_to(model_path, target_is_directory=True)
    return Checkpoint.objects.create(run=run, step=2, path=str(folder))


def pinned_version(revision) -> BenchmarkVersion:
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="fruit-bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=revision)
    return version


def make_run(name: str, kind: str = "sft", steps: dict | None = None, **fields) -> TrainingRun:
    """A run with one metric row per step of `steps` ({step: values}); an RL step may be two rows (`[values, …]`)."""
    fields = {"status": "succeeded", "steps": max(steps or {0: None})} | fields
    run = TrainingRun.objects.create(name=name, kind=kind, base_model_path="/models/tiny", **fields)
    for step, values in (steps or {}).items():
        for row in values if isinstance(values, list) else [values]:
            TrainingMetric.objects.create(run=run, step=step, epoch=step / 10, values=row)
    return run


MAX_BODY = 64 * 1024


PROBE = "probe-secret-of-the-worker"


# The reward a random tiny policy can earn: its final message's length mod 7, over 6 (a real checker reading the
# reward payload). Two samples of a group almost always differ, so the advantages are not all zero.
LENGTH_CHECK = r"""
import json, os
with open(os.environ["OPENCLAW_REWARD_PAYLOAD"]) as handle:
    message = json.load(handle)["final_message"]
print(json.dumps({"length_mod_7": (len(message) % 7) / 6}))
"""


REWARD_SH = """#!/usr/bin/env bash
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scores="$(python3 "$here/check.py")"
printf '%s' "$scores" | python3 -c 'import json, sys
v = [float(x) for x in json.load(sys.stdin).values()]
print(round(sum(v) / len(v), 6))'
"""


# A rubric rule: with no judge endpoint the rollout is "incomplete" (no task score), so a hybrid reward is None.
RULE = {
    "name": "clear",
    "target_file": "notes.txt",
    "weight": 1.0,
    "scores": {level: f"clear at {level}" for level in ("0", "0.25", "0.5", "0.75", "1")},
}
