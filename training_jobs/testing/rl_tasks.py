"""Tasks an RL run trains on: each with an instruction of its own (`distinct_instruction`), and `task`, whose checker
pays a random tiny policy something (optionally with a rubric rule, which no judge grades)."""

import hashlib
import random

from tasks.package import PackageFile, TaskPackage
from tasks.services import save_package

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
