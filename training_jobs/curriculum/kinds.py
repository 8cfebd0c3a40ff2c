"""The eight kinds of curriculum task: what each asks, the files it starts from, its answer and what its checker checks.

A kind's `make(rng)` draws one task's parameters from `rng` (a random.Random) and returns a CurriculumTask. The
instruction says everything the task needs in one or two short sentences, with what to write at the end (after a
colon) or a path at the end, so that a small model copying from it never copies a full stop into an answer. Every
task is solved by one or two tool calls of the builtin harness (read, write, edit, exec).

`expected` is what the shipped checker (checker.py) reads from reward/expected.json: the kind and the answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

FRUITS = (
    "apple",
    "banana",
    "cherry",
    "grape",
    "lemon",
    "mango",
    "melon",
    "peach",
    "pear",
    "plum",
    "kiwi",
    "lime",
    "fig",
    "apricot",
    "papaya",
    "guava",
)
ANIMALS = (
    "cat",
    "dog",
    "horse",
    "mouse",
    "tiger",
    "zebra",
    "eagle",
    "otter",
    "panda",
    "rabbit",
    "sheep",
    "goat",
    "wolf",
    "fox",
    "owl",
    "duck",
)
COLORS = ("red", "blue", "green", "yellow", "purple", "black", "white", "brown", "pink", "gray", "silver", "gold")
CITIES = (
    "paris",
    "london",
    "tokyo",
    "berlin",
    "madrid",
    "rome",
    "oslo",
    "dublin",
    "vienna",
    "prague",
    "lisbon",
    "cairo",
    "lima",
    "seoul",
)
NAMES = (
    "anna",
    "ben",
    "carla",
    "david",
    "emma",
    "felix",
    "grace",
    "hugo",
    "iris",
    "jack",
    "lena",
    "mario",
    "nora",
    "oscar",
    "paula",
    "rosa",
    "sam",
    "tara",
    "victor",
    "wendy",
)
TOPICS = (
    "notes",
    "todo",
    "shopping",
    "guests",
    "plants",
    "books",
    "songs",
    "tools",
    "pets",
    "trips",
    "ideas",
    "games",
    "snacks",
    "chores",
)
FOLDERS = ("", "", "docs/", "notes/", "data/", "work/", "home/")
WORD_GROUPS = {"fruits": FRUITS, "animals": ANIMALS, "colors": COLORS, "cities": CITIES, "names": NAMES}


@dataclass(frozen=True)
class CurriculumTask:
    kind: str
    instruction: str
    inputs: dict[str, str]  # workspace path -> text, the files the agent starts with
    solution: dict[str, str]  # workspace path -> text, the files that differ once the task is done
    expected: dict  # what the checker checks (reward/expected.json), with "kind"


@dataclass(frozen=True)
class Kind:
    name: str  # also the id part and the category slug's end
    title: str  # the category's name after "Curriculum: "
    make: Callable[[random.Random], CurriculumTask]


def lines_text(lines) -> str:
    return "".join(f"{line}\n" for line in lines)


def _task(kind: str, instruction: str, inputs: dict, solution: dict, expected: dict) -> CurriculumTask:
    return CurriculumTask(kind, instruction, inputs, solution, {"kind": kind, **expected})


def _file(rng: random.Random, *, folder: bool = True) -> str:
    return (rng.choice(FOLDERS) if folder else "") + rng.choice(TOPICS) + ".txt"


def _words(rng: random.Random, low: int, high: int) -> list[str]:
    """Distinct words of one group, between low and high of them."""
    group = WORD_GROUPS[rng.choice(sorted(WORD_GROUPS))]
    return rng.sample(group, rng.randint(low, min(high, len(group))))


def plural(word: str) -> str:
    if word.endswith(("ch", "sh", "s", "x")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _phrase(rng: random.Random) -> str:
    templates = (
        lambda: f"hello {rng.choice(NAMES)}",
        lambda: f"buy {rng.randint(2, 9)} {plural(rng.choice(FRUITS))}",
        lambda: f"the {rng.choice(ANIMALS)} is {rng.choice(COLORS)}",
        lambda: f"meet {rng.choice(NAMES)} in {rng.choice(CITIES)}",
        lambda: f"{rng.choice(NAMES)} likes {rng.choice(COLORS)} {plural(rng.choice(FRUITS))}",
    )
    return rng.choice(templates)()


# --- the kinds -------------------------------------------------------------------------------------------------


def make_write(rng: random.Random) -> CurriculumTask:
    path, text = _file(rng), _phrase(rng)
    instruction = f"Create the file {path} containing exactly this text: {text}"
    return _task("write", instruction, {}, {path: text + "\n"}, {"path": path, "text": text})


def make_append(rng: random.Random) -> CurriculumTask:
    path = _file(rng)
    words = _words(rng, 3, 6)
    lines, new = words[:-1], words[-1]
    instruction = f"Append this line to the end of {path}: {new}"
    expected = {"path": path, "lines": lines, "new": new}
    return _task("append", instruction, {path: lines_text(lines)}, {path: lines_text([*lines, new])}, expected)


def make_copy(rng: random.Random) -> CurriculumTask:
    source = _file(rng, folder=False)
    target = rng.choice(("backup/", "copies/", "old/", "archive/")) + rng.choice((source, "copy_" + source))
    text = lines_text(_phrase(rng) for _ in range(rng.randint(1, 3)))
    instruction = f"Copy {source} to {target} and keep {source} as it is."
    return _task(
        "copy", instruction, {source: text}, {target: text}, {"source": source, "target": target, "text": text}
    )


def make_count(rng: random.Random) -> CurriculumTask:
    path = _file(rng, folder=False)
    what = rng.choice(("lines", "words"))
    if what == "lines":
        lines = _words(rng, 2, 9)
    else:
        lines = [" ".join(_words(rng, 2, 5)) for _ in range(rng.randint(1, 3))]
    number = len(lines) if what == "lines" else sum(len(line.split()) for line in lines)
    out = rng.choice(("count.txt", "total.txt", "answer.txt", "result.txt"))
    instruction = f"Count the {what} in {path} and write only the number to {out}"
    expected = {"path": out, "number": number}
    return _task("count", instruction, {path: lines_text(lines)}, {out: f"{number}\n"}, expected)


JSON_FIELDS = {
    "name": NAMES,
    "city": CITIES,
    "color": COLORS,
    "pet": ANIMALS,
    "fruit": FRUITS,
    "port": range(3000, 9000),
    "age": range(18, 90),
    "year": range(1990, 2031),
    "floor": range(1, 40),
}


def make_extract(rng: random.Random) -> CurriculumTask:
    path = rng.choice(("config", "user", "server", "profile", "settings", "order")) + ".json"
    keys = rng.sample(sorted(JSON_FIELDS), rng.randint(3, 5))
    record = {key: rng.choice(JSON_FIELDS[key]) for key in keys}
    key = rng.choice(keys)
    value = str(record[key])
    out = f"{key}.txt"
    instruction = f"Read {path} and write only the value of its {key} field to {out}"
    inputs = {path: json.dumps(record, indent=2) + "\n"}
    return _task("extract", instruction, inputs, {out: value + "\n"}, {"path": out, "value": value})


def make_sort(rng: random.Random) -> CurriculumTask:
    source = _file(rng)
    folder, _, name = source.rpartition("/")
    stem = name.removesuffix(".txt")
    target = (folder and folder + "/") + rng.choice((f"{stem}_sorted.txt", f"sorted_{stem}.txt", "sorted.txt"))
    lines = _words(rng, 4, 7)
    while lines == sorted(lines):
        rng.shuffle(lines)
    instruction = f"Sort the lines of {source} in alphabetical order and write them to {target}"
    expected = {"path": target, "lines": sorted(lines)}
    return _task("sort", instruction, {source: lines_text(lines)}, {target: lines_text(sorted(lines))}, expected)


SENTENCES = (
    "we talked about {} all day",
    "please write {} on the board",
    "the answer today is {}",
    "{} is the word of the week",
    "the note says {} and nothing more",
    "next on the list is {}",
)


def make_replace(rng: random.Random) -> CurriculumTask:
    path = _file(rng, folder=False)
    old, new = _words(rng, 2, 2)
    sentence = rng.choice(SENTENCES)
    text, replaced = sentence.format(old), sentence.format(new)
    # The edit tool replaces text that occurs exactly once: no other word of the sentence may hold the old one.
    assert text.count(old) == 1, (sentence, old)
    instruction = f"Replace the word {old} with the word {new} in {path}"
    expected = {"path": path, "old": old, "text": replaced}
    return _task("replace", instruction, {path: text + "\n"}, {path: replaced + "\n"}, expected)


def make_folder(rng: random.Random) -> CurriculumTask:
    group = rng.choice(sorted(WORD_GROUPS))
    words = rng.sample(WORD_GROUPS[group], rng.randint(2, 3))
    files = {f"{group}/{word}.txt": word for word in words}
    writes = [f"{word} in {path}" for path, word in files.items()]
    listed = ", ".join(writes[:-1]) + " and " + writes[-1]
    instruction = f"Make a folder named {group} with {len(files)} files. Write {listed}"
    return _task("folder", instruction, {}, {p: w + "\n" for p, w in files.items()}, {"files": files})


KINDS = {
    kind.name: kind
    for kind in (
        Kind("write", "write a file", make_write),
        Kind("append", "append a line", make_append),
        Kind("copy", "copy a file", make_copy),
        Kind("count", "count lines or words", make_count),
        Kind("extract", "extract a JSON field", make_extract),
        Kind("sort", "sort lines", make_sort),
        Kind("replace", "replace a word", make_replace),
        Kind("folder", "create a folder of files", make_folder),
    )
}
