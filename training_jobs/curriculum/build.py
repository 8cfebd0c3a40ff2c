"""The curriculum's splits, drawn by seed, and the ClawGym task folders they are written as.

    drawn = curriculum(seed=0)              # .splits = {split: [SplitTask]}: the same for a seed, on any machine
    write_curriculum(drawn, out)            # out/<split>/<task id>/..., out/<split>.txt, out/manifest.json

Splits: `train` holds the TRAIN_KINDS; `heldout` holds new parameters of the same kinds, drawn from the same words;
`heldout_lexical` holds the same kinds drawn from a vocabulary no other split uses (kinds.LEXICAL_VOCABULARY: its
words, file names, JSON keys and values never occur in a train task), so a model that learned the train split's words
rather than the kinds scores less there; `unseen_kind` holds UNSEEN_KIND only, a kind no train task has. No two tasks
anywhere share an instruction (an instruction names every parameter but the input files' content), so a held-out task
never asks what a train task asks. Each split draws from its own random stream, seeded by (seed, split, kind), so one
split's size never changes another's tasks.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from lib.bounds import parse_whole_number
from tasks.package import STANDARD_REWARD_SH

from .kinds import KINDS, LEXICAL_VOCABULARY, TRAIN_VOCABULARY, CurriculumTask

UNSEEN_KIND = "folder"
TRAIN_KINDS = tuple(name for name in KINDS if name != UNSEEN_KIND)
# Tasks per kind in each split (unseen_kind: of its one kind): 161 train, 42 held-out, 42 lexical held-out, 16 of the
# unseen kind.
SIZES = {"train": 23, "heldout": 6, "unseen_kind": 16, "heldout_lexical": 6}
SPLIT_KINDS = {
    "train": TRAIN_KINDS,
    "heldout": TRAIN_KINDS,
    "unseen_kind": (UNSEEN_KIND,),
    "heldout_lexical": TRAIN_KINDS,
}
SPLIT_VOCABULARY = {"heldout_lexical": LEXICAL_VOCABULARY}  # the others: TRAIN_VOCABULARY
ID_PREFIX = "curriculum"
DRAWS_PER_TASK = 200  # redraws allowed for one task whose instruction an earlier task has already

CHECKER = (Path(__file__).parent / "checker.py").read_text()
REWARD_SH = STANDARD_REWARD_SH  # ClawGym's own entry: run check.py, print the mean of its sub-scores last


class CurriculumError(ValueError):
    """The curriculum cannot be made as asked (sizes, a seed, a folder in the way); the message says why."""


@dataclass(frozen=True)
class SplitTask:
    task_id: str
    split: str
    seed: int
    task: CurriculumTask

    @property
    def kind(self) -> str:
        return self.task.kind


@dataclass(frozen=True)
class Curriculum:
    seed: int
    sizes: dict[str, int]  # tasks per kind, by split
    splits: dict[str, list[SplitTask]]

    def task_ids(self) -> dict[str, list[str]]:
        return {split: [item.task_id for item in items] for split, items in self.splits.items()}

    def manifest(self) -> dict:
        return {
            "seed": self.seed,
            "sizes": self.sizes,
            "kinds": {name: KINDS[name].title for name in KINDS},
            "unseen_kind": UNSEEN_KIND,
            "splits": self.task_ids(),
            "train_selection": train_selection(self.seed),
        }


def category_slug(kind: str) -> str:
    return f"{ID_PREFIX}-{kind}"


def task_id(seed: int, split: str, kind: str, number: int) -> str:
    return f"{ID_PREFIX}-s{seed}-{split.replace('_', '-')}-{kind}-{number:03d}"


def train_selection(seed: int) -> str:
    """The train split as a task selection of `train --kind rl --tasks-from` (training_jobs.kinds.rl.tasks_from)."""
    return f"prefix={ID_PREFIX}-s{seed}-train-"


def parse_sizes(text: str) -> dict[str, int]:
    """`train=23,heldout=6,unseen_kind=16,heldout_lexical=6` (any of them; the rest keep SIZES) as {split: tasks per
    kind}."""
    sizes = dict(SIZES)
    for part in filter(None, (p.strip() for p in text.split(","))):
        split, _, value = part.partition("=")
        if split not in SIZES or parse_whole_number(value, least=1) is None:
            raise CurriculumError(f"a size is SPLIT=N with N >= 1 and SPLIT one of {', '.join(SIZES)}; got {part!r}")
        sizes[split] = int(value)
    return sizes


def curriculum(seed: int = 0, sizes: dict[str, int] | None = None) -> Curriculum:
    """The splits' tasks, in a fixed order. Raises CurriculumError when a kind runs out of distinct parameters."""
    sizes = {**SIZES, **(sizes or {})}
    seen: set[str] = set()  # the instructions drawn so far, in every split
    found = {}
    for split, kinds in SPLIT_KINDS.items():
        found[split] = []
        for kind in kinds:
            rng = random.Random(f"clawgym-curriculum:{seed}:{split}:{kind}")
            vocabulary = SPLIT_VOCABULARY.get(split, TRAIN_VOCABULARY)
            for number in range(1, sizes[split] + 1):
                task = _draw_new(partial(KINDS[kind].make, v=vocabulary), rng, seen)
                if task is None:
                    raise CurriculumError(f"kind {kind} ran out of distinct tasks at {split} task {number}")
                seen.add(task.instruction)
                found[split].append(SplitTask(task_id(seed, split, kind, number), split, seed, task))
    return Curriculum(seed, sizes, found)


def _draw_new(make, rng: random.Random, seen: set[str]) -> CurriculumTask | None:
    for _ in range(DRAWS_PER_TASK):
        drawn = make(rng)
        if drawn.instruction not in seen:
            return drawn
    return None


# --- writing the folders ---------------------------------------------------------------------------------------


def data_entry(item: SplitTask) -> dict:
    kind = KINDS[item.kind]
    return {
        "task_id": item.task_id,
        "user_query": item.task.instruction,
        "metadata": {
            "category": category_slug(item.kind),
            "grading_type": "code",
            "curriculum": {"seed": item.seed, "split": item.split, "kind": item.kind, "title": kind.title},
        },
    }


def task_files(item: SplitTask) -> dict[str, str]:
    """{path in the task folder: text} of one ClawGym task folder."""
    files = {"data_entry.json": json.dumps(data_entry(item), indent=2) + "\n"}
    files.update({f"input_files/{path}": text for path, text in item.task.inputs.items()})
    files.update({f"solution/{path}": text for path, text in item.task.solution.items()})
    files["reward/reward.sh"] = REWARD_SH
    files["reward/check.py"] = CHECKER
    files["reward/expected.json"] = json.dumps(item.task.expected, indent=2, sort_keys=True) + "\n"
    return files


def write_curriculum(drawn: Curriculum, out: Path) -> dict:
    """Write out/<split>/<task id>/ (ClawGym task folders), out/<split>.txt (its task ids, one a line) and
    out/manifest.json; returns the manifest. `out` must be missing or empty: a stale task never lingers there."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CurriculumError(f"{out} is not an empty folder; build into a new one")
    for split, items in drawn.splits.items():
        for item in items:
            for path, text in task_files(item).items():
                target = out / split / item.task_id / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        (out / f"{split}.txt").write_text("".join(f"{item.task_id}\n" for item in items), encoding="utf-8")
    found = drawn.manifest()
    (out / "manifest.json").write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    return found
