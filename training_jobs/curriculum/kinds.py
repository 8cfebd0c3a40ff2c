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
    make: Callable[..., CurriculumTask]  # make(rng, vocabulary=TRAIN_VOCABULARY)


def lines_text(lines) -> str:
    return "".join(f"{line}\n" for line in lines)


def _task(kind: str, instruction: str, inputs: dict, solution: dict, expected: dict) -> CurriculumTask:
    return CurriculumTask(kind, instruction, inputs, solution, {"kind": kind, **expected})


def _file(rng: random.Random, v: Vocabulary, *, folder: bool = True) -> str:
    return (rng.choice(v.folders) if folder else "") + rng.choice(v.topics) + ".txt"


def _words(rng: random.Random, v: Vocabulary, low: int, high: int) -> list[str]:
    """Distinct words of one group, between low and high of them."""
    group = v.groups[rng.choice(sorted(v.groups))]
    return rng.sample(group, rng.randint(low, min(high, len(group))))


def plural(word: str) -> str:
    if word.endswith(("ch", "sh", "s", "x")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _phrase(rng: random.Random, v: Vocabulary) -> str:
    names, things, beings, shades, places = (v.groups[g] for g in v.phrase_groups)
    templates = (
        lambda: f"hello {rng.choice(names)}",
        lambda: f"buy {rng.randint(2, 9)} {plural(rng.choice(things))}",
        lambda: f"the {rng.choice(beings)} is {rng.choice(shades)}",
        lambda: f"meet {rng.choice(names)} in {rng.choice(places)}",
        lambda: f"{rng.choice(names)} likes {rng.choice(shades)} {plural(rng.choice(things))}",
    )
    return rng.choice(templates)()


# --- the kinds -------------------------------------------------------------------------------------------------


def make_write(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    path, text = _file(rng, v), _phrase(rng, v)
    instruction = f"Create the file {path} containing exactly this text: {text}"
    return _task("write", instruction, {}, {path: text + "\n"}, {"path": path, "text": text})


def make_append(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    path = _file(rng, v)
    words = _words(rng, v, 3, 6)
    lines, new = words[:-1], words[-1]
    instruction = f"Append this line to the end of {path}: {new}"
    expected = {"path": path, "lines": lines, "new": new}
    return _task("append", instruction, {path: lines_text(lines)}, {path: lines_text([*lines, new])}, expected)


def make_copy(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    source = _file(rng, v, folder=False)
    target = rng.choice(v.copy_folders) + rng.choice((source, v.copy_prefix + source))
    text = lines_text(_phrase(rng, v) for _ in range(rng.randint(1, 3)))
    instruction = f"Copy {source} to {target} and keep {source} as it is."
    return _task(
        "copy", instruction, {source: text}, {target: text}, {"source": source, "target": target, "text": text}
    )


def make_count(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    path = _file(rng, v, folder=False)
    what = rng.choice(("lines", "words"))
    if what == "lines":
        lines = _words(rng, v, 2, 9)
    else:
        lines = [" ".join(_words(rng, v, 2, 5)) for _ in range(rng.randint(1, 3))]
    number = len(lines) if what == "lines" else sum(len(line.split()) for line in lines)
    out = rng.choice(v.count_outputs)
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


def make_extract(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    path = rng.choice(v.json_files) + ".json"
    keys = rng.sample(sorted(v.json_fields), rng.randint(3, 5))
    record = {key: rng.choice(v.json_fields[key]) for key in keys}
    key = rng.choice(keys)
    value = str(record[key])
    out = f"{key}.txt"
    instruction = f"Read {path} and write only the value of its {key} field to {out}"
    inputs = {path: json.dumps(record, indent=2) + "\n"}
    # The other fields' values: a file holding them too is a copy of the input, not the value picked out of it.
    others = sorted({str(v) for v in record.values()} - {value})
    expected = {"path": out, "value": value, "other_values": others}
    return _task("extract", instruction, inputs, {out: value + "\n"}, expected)


def make_sort(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    source = _file(rng, v)
    folder, _, name = source.rpartition("/")
    stem = name.removesuffix(".txt")
    target = (folder and folder + "/") + rng.choice(
        (f"{stem}_{v.sorted_word}.txt", f"{v.sorted_word}_{stem}.txt", f"{v.sorted_word}.txt")
    )
    lines = _words(rng, v, 4, 7)
    while lines == sorted(lines):
        rng.shuffle(lines)
    instruction = f"Sort the lines of {source} in alphabetical order and write them to {target}"
    # The lines as they came: the same lines in that order are a copy of the input, not a sort gone wrong.
    expected = {"path": target, "lines": sorted(lines), "unsorted": lines}
    return _task("sort", instruction, {source: lines_text(lines)}, {target: lines_text(sorted(lines))}, expected)


SENTENCES = (
    "we talked about {} all day",
    "please write {} on the board",
    "the answer today is {}",
    "{} is the word of the week",
    "the note says {} and nothing more",
    "next on the list is {}",
)


def make_replace(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    path = _file(rng, v, folder=False)
    old, new = _words(rng, v, 2, 2)
    sentence = rng.choice(v.sentences)
    text, replaced = sentence.format(old), sentence.format(new)
    # The edit tool replaces text that occurs exactly once: no other word of the sentence may hold the old one.
    assert text.count(old) == 1, (sentence, old)
    instruction = f"Replace the word {old} with the word {new} in {path}"
    expected = {"path": path, "old": old, "text": replaced}
    return _task("replace", instruction, {path: text + "\n"}, {path: replaced + "\n"}, expected)


def make_folder(rng: random.Random, v: Vocabulary | None = None) -> CurriculumTask:
    v = v or TRAIN_VOCABULARY
    group = rng.choice(sorted(v.groups))
    words = rng.sample(v.groups[group], rng.randint(2, 3))
    files = {f"{group}/{word}.txt": word for word in words}
    writes = [f"{word} in {path}" for path, word in files.items()]
    listed = ", ".join(writes[:-1]) + " and " + writes[-1]
    instruction = f"Make a folder named {group} with {len(files)} files. Write {listed}"
    return _task("folder", instruction, {}, {p: w + "\n" for p, w in files.items()}, {"files": files})


# --- vocabularies ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocabulary:
    """Every word, file name, JSON key and value a task can be drawn with (the kinds' templates aside). The train
    split and today's held-out split draw from TRAIN_VOCABULARY; the lexical held-out split from LEXICAL_VOCABULARY,
    which shares none of them (tests/test_curriculum_vocabulary.py checks both the lists and the drawn tasks)."""

    groups: dict[str, tuple]  # word groups by name (the folder kind names a folder after one)
    phrase_groups: tuple[str, str, str, str, str]  # the groups of names, things, beings, shades and places
    topics: tuple[str, ...]  # file names' stems
    folders: tuple[str, ...]
    copy_folders: tuple[str, ...]
    copy_prefix: str
    count_outputs: tuple[str, ...]
    json_files: tuple[str, ...]
    json_fields: dict[str, object]  # key: its values (a tuple or a range)
    sorted_word: str
    sentences: tuple[str, ...]

    def items(self) -> set[str]:
        """Every word and name the vocabulary holds, as text (what must not appear in the other one's tasks)."""
        found = {*self.groups, *self.topics, *self.json_files, *self.json_fields, self.sorted_word}
        found |= {word for group in self.groups.values() for word in group}
        found |= {folder.strip("/") for folder in (*self.folders, *self.copy_folders) if folder}
        found |= {self.copy_prefix.strip("_")} | {name.removesuffix(".txt") for name in self.count_outputs}
        return found | {str(value) for value in self.json_values() if isinstance(value, str)}

    def json_values(self) -> set:
        """The values an input JSON file's fields can hold (numbers too: their ranges are disjoint as well)."""
        return {value for values in self.json_fields.values() for value in values}


TRAIN_VOCABULARY = Vocabulary(
    groups=WORD_GROUPS,
    phrase_groups=("names", "fruits", "animals", "colors", "cities"),
    topics=TOPICS,
    folders=FOLDERS,
    copy_folders=("backup/", "copies/", "old/", "archive/"),
    copy_prefix="copy_",
    count_outputs=("count.txt", "total.txt", "answer.txt", "result.txt"),
    json_files=("config", "user", "server", "profile", "settings", "order"),
    json_fields=JSON_FIELDS,
    sorted_word="sorted",
    sentences=SENTENCES,
)

LEXICAL_VOCABULARY = Vocabulary(
    groups={
        "people": (
            "alice",
            "bruno",
            "chloe",
            "diego",
            "elena",
            "frank",
            "gina",
            "henry",
            "ivan",
            "julia",
            "karl",
            "laura",
            "milo",
            "nina",
            "omar",
            "pablo",
            "quinn",
            "ruth",
            "simon",
            "tina",
            "uma",
            "vera",
        ),
        "vegetables": (
            "carrot",
            "onion",
            "pepper",
            "cabbage",
            "turnip",
            "radish",
            "leek",
            "bean",
            "lentil",
            "parsnip",
            "cucumber",
            "zucchini",
            "artichoke",
            "shallot",
        ),
        "creatures": (
            "camel",
            "llama",
            "bison",
            "moose",
            "badger",
            "beaver",
            "ferret",
            "gecko",
            "heron",
            "robin",
            "crane",
            "whale",
            "shark",
            "frog",
            "toad",
            "hamster",
        ),
        "shades": ("teal", "navy", "maroon", "beige", "coral", "ivory", "amber", "indigo", "violet", "cyan", "lilac"),
        "places": (
            "nairobi",
            "sydney",
            "toronto",
            "mumbai",
            "athens",
            "warsaw",
            "havana",
            "quito",
            "hanoi",
            "lagos",
            "zurich",
            "munich",
            "boston",
            "denver",
        ),
    },
    phrase_groups=("people", "vegetables", "creatures", "shades", "places"),
    topics=(
        "recipes",
        "budget",
        "errands",
        "contacts",
        "movies",
        "lessons",
        "hobbies",
        "gifts",
        "meals",
        "photos",
        "letters",
        "visits",
        "repairs",
        "bills",
    ),
    folders=("", "", "papers/", "misc/", "inbox/", "drafts/", "stuff/"),
    copy_folders=("saved/", "spare/", "vault/", "history/"),
    copy_prefix="dup_",
    count_outputs=("tally.txt", "sum.txt", "digits.txt", "output.txt"),
    json_files=("inventory", "account", "device", "member", "options", "booking"),
    json_fields={
        "owner": ("alice", "bruno", "chloe", "diego", "elena", "frank", "gina", "henry", "ivan", "julia"),
        "town": ("nairobi", "sydney", "toronto", "mumbai", "athens", "warsaw", "havana", "quito"),
        "shade": ("teal", "navy", "maroon", "beige", "coral", "ivory", "amber", "indigo"),
        "animal": ("camel", "llama", "bison", "moose", "badger", "beaver", "ferret", "gecko"),
        "snack": ("carrot", "onion", "pepper", "cabbage", "turnip", "radish", "leek", "bean"),
        "room": range(100, 1000),
        "code": range(10000, 20000),
        "built": range(1800, 1900),
        "gate": range(9000, 10000),
    },
    sorted_word="ordered",
    sentences=(
        "my favourite item is {}",
        "remember to bring {} tomorrow",
        "everyone voted for {}",
        "{} was the last word spoken",
        "a sign reads {} in big letters",
        "write {} next to the date",
    ),
)

VOCABULARIES = {"train": TRAIN_VOCABULARY, "lexical": LEXICAL_VOCABULARY}


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
