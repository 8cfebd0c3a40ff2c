"""The lexical held-out split shares no word, file name, JSON key or value with the train split: what a model scores
there it scores on the kinds, not on words it has seen (training_jobs.curriculum.kinds.LEXICAL_VOCABULARY)."""

import itertools
import json
import random
import re
import string

from training_jobs.curriculum.build import curriculum
from training_jobs.curriculum.kinds import KINDS, LEXICAL_VOCABULARY, TRAIN_VOCABULARY, Vocabulary

TOKEN = re.compile(r"[a-z]+|\d+")


def tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text.lower()))


def task_text(task) -> str:
    """Everything a task shows the agent or checks: its instruction, file paths and contents, the answer's values
    (the expected answer's keys are the checker's own field names, the same for every task of a kind)."""
    values = [value for key, value in task.expected.items() if key != "kind"]
    return " ".join([task.instruction, json.dumps(task.inputs), json.dumps(task.solution), json.dumps(values)])


def sentinel_vocabulary() -> Vocabulary:
    """A vocabulary of made-up words: what its tasks say besides them is the kinds' own template text."""
    made = ("zq" + "".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=2))

    def words(n):
        return tuple(itertools.islice(made, n))

    return Vocabulary(
        groups={name: words(16) for name in words(5)},
        phrase_groups=None,  # set below: the groups' own names
        topics=words(14),
        folders=("", *(f"{w}/" for w in words(4))),
        copy_folders=tuple(f"{w}/" for w in words(4)),
        copy_prefix=f"{next(made)}_",
        count_outputs=tuple(f"{w}.txt" for w in words(4)),
        json_files=words(6),
        json_fields={key: words(8) for key in words(9)},
        sorted_word=next(made),
        sentences=TRAIN_VOCABULARY.sentences,
    )


def drawn(vocabulary: Vocabulary, per_kind: int = 300):
    for kind in KINDS.values():
        rng = random.Random(f"vocabulary:{kind.name}")
        for _ in range(per_kind):
            yield kind.make(rng, vocabulary)


def template_words() -> set[str]:
    vocabulary = sentinel_vocabulary()
    vocabulary = Vocabulary(**{**vocabulary.__dict__, "phrase_groups": tuple(vocabulary.groups)})
    found = set()
    for task in drawn(vocabulary):
        found |= tokens(task_text(task))
    words = {w for w in found if not w.startswith("zq") and not w.isdigit()}
    return words | {
        w for sentence in (*TRAIN_VOCABULARY.sentences, *LEXICAL_VOCABULARY.sentences) for w in tokens(sentence)
    }


def test_the_two_vocabularies_share_nothing():
    assert not TRAIN_VOCABULARY.items() & LEXICAL_VOCABULARY.items()
    assert not TRAIN_VOCABULARY.json_values() & LEXICAL_VOCABULARY.json_values()  # the numbers' ranges too


def test_no_task_of_one_vocabulary_holds_a_word_of_the_other():
    shared_templates = template_words()
    for own, other in ((TRAIN_VOCABULARY, LEXICAL_VOCABULARY), (LEXICAL_VOCABULARY, TRAIN_VOCABULARY)):
        for task in drawn(own):
            leaked = (tokens(task_text(task)) & other.items()) - shared_templates
            assert not leaked, (task.instruction, leaked)


def test_the_lexical_split_draws_its_json_values_from_its_own_lists():
    split = curriculum(0).splits["heldout_lexical"]
    extracts = [item.task for item in split if item.kind == "extract"]
    assert extracts
    for task in extracts:
        [record] = [json.loads(text) for text in task.inputs.values()]
        assert set(record) <= set(LEXICAL_VOCABULARY.json_fields)
        assert set(record.values()) <= LEXICAL_VOCABULARY.json_values()
    # Drawn as the split is (seed 0): what a lexical task has in common with any train task is template text or a
    # count, never a word of the train split's lists.
    train_words = set()
    for item in curriculum(0).splits["train"]:
        train_words |= tokens(task_text(item.task))
    allowed = template_words()
    for item in split:
        shared = {w for w in tokens(task_text(item.task)) & train_words if not w.isdigit()}
        assert shared <= allowed, (item.task.instruction, shared - allowed)
