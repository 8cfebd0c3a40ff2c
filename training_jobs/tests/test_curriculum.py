"""The generated curriculum (training_jobs.curriculum): its splits by seed, its checkers, and `manage.py curriculum`.

Every task's checker runs here in-process on five workspaces (the solution, nothing, the inputs, the sanity check's
placeholders, a plausible wrong answer); one task of each kind also goes through the real sanity check in the
sandbox, since `curriculum import` sanity-checks every benchmark task before accepting it.
"""

import collections
import hashlib
import json
import os
import runpy
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.models import Benchmark, BenchmarkVersion
from sandbox import Workspace
from sandbox.testing import require_bwrap
from tasks.formats.clawgym import ClawGymFolder
from tasks.models import SanityReport, Task
from tasks.sanity import output_paths, placeholder
from tasks.verification import CheckerSpec, run_checker
from training_jobs.curriculum.build import (
    CHECKER,
    SIZES,
    TRAIN_KINDS,
    UNSEEN_KIND,
    CurriculumError,
    curriculum,
    parse_sizes,
    task_files,
    write_curriculum,
)
from training_jobs.curriculum.kinds import KINDS, SENTENCES, WORD_GROUPS
from training_jobs.kinds.rl import tasks_from

ROOT = Path(__file__).resolve().parents[2]
CHECKER_PATH = ROOT / "training_jobs" / "curriculum" / "checker.py"
SMALL = "train=2,heldout=1,unseen_kind=1,heldout_lexical=1"  # one benchmark task of each kind per held-out split


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# --- the splits ------------------------------------------------------------------------------------------------


def test_same_seed_same_bytes_in_any_process(tmp_path):
    write_curriculum(curriculum(0), tmp_path / "here")
    # Another interpreter, with another hash seed: nothing may depend on set or dict order of a process.
    script = "import sys; from training_jobs.curriculum.build import *; write_curriculum(curriculum(0), sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "there")],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    write_curriculum(curriculum(1), tmp_path / "other")
    assert tree_digest(tmp_path / "here") == tree_digest(tmp_path / "there")
    assert tree_digest(tmp_path / "here") != tree_digest(tmp_path / "other")


def test_kinds_splits_and_sizes():
    drawn = curriculum(0)
    kinds = {split: collections.Counter(item.kind for item in items) for split, items in drawn.splits.items()}
    assert len(KINDS) == 8 and set(TRAIN_KINDS) | {UNSEEN_KIND} == set(KINDS)
    assert kinds["train"] == dict.fromkeys(TRAIN_KINDS, SIZES["train"]) and len(drawn.splits["train"]) == 161
    assert kinds["heldout"] == dict.fromkeys(TRAIN_KINDS, SIZES["heldout"]) and len(drawn.splits["heldout"]) == 42
    assert kinds["unseen_kind"] == {UNSEEN_KIND: 16}
    assert UNSEEN_KIND not in kinds["train"] and UNSEEN_KIND not in kinds["heldout"]
    ids = [item.task_id for items in drawn.splits.values() for item in items]
    assert kinds["heldout_lexical"] == dict.fromkeys(TRAIN_KINDS, SIZES["heldout_lexical"])
    assert len(ids) == len(set(ids)) == 261
    for split, items in drawn.splits.items():
        for item in items:
            assert f"-{split.replace('_', '-')}-{item.kind}-" in item.task_id


def test_held_out_parameters_are_new():
    drawn = curriculum(0)

    def asked(split):
        return {item.task.instruction for item in drawn.splits[split]}

    def answers(split):
        return {json.dumps([item.task.inputs, item.task.expected], sort_keys=True) for item in drawn.splits[split]}

    for split in ("heldout", "unseen_kind", "heldout_lexical"):
        assert not asked(split) & asked("train") and not answers(split) & answers("train")
    assert not asked("heldout") & asked("unseen_kind")
    assert sum(len(asked(split)) for split in drawn.splits) == 261  # no instruction twice within a split either


def test_sizes_and_an_exhausted_kind():
    assert parse_sizes("heldout=2") == {**SIZES, "heldout": 2}
    for bad in ("heldout=0", "test=3", "train", "heldout=²", f"heldout={10**20}"):
        with pytest.raises(CurriculumError):
            parse_sizes(bad)
    with pytest.raises(CurriculumError, match="ran out of distinct tasks"):
        curriculum(0, {"heldout": 60})  # extract has 54 instructions (6 files, 9 fields)


def test_replaced_word_occurs_once():
    """The edit tool needs old_text to occur exactly once: no sentence may hold a word of any group twice."""
    for sentence in SENTENCES:
        for words in WORD_GROUPS.values():
            for word in words:
                assert sentence.format(word).count(word) == 1, (sentence, word)


def test_folders_read_back_as_clawgym_tasks(tmp_path):
    manifest = write_curriculum(curriculum(0), tmp_path)
    for split, ids in manifest["splits"].items():
        read = list(ClawGymFolder().read(tmp_path / split))
        assert [p.external_id for p in read] == sorted(ids)  # no ReadFailure among them
        assert (tmp_path / f"{split}.txt").read_text().split() == ids
    assert json.loads((tmp_path / "manifest.json").read_text())["train_selection"] == "prefix=curriculum-s0-train-"
    with pytest.raises(CurriculumError, match="not an empty folder"):
        write_curriculum(curriculum(0), tmp_path)


# --- the checkers ----------------------------------------------------------------------------------------------


def wrong_answer(item) -> dict[str, str]:
    """A near miss an agent could plausibly leave, on top of the inputs (None: the file is deleted)."""
    task, expected = item.task, item.task.expected
    if item.kind == "write":
        return {expected["path"]: expected["text"] + ".\n"}
    if item.kind == "append":
        return {expected["path"]: expected["new"] + "\n"}  # overwrote the file instead of appending
    if item.kind == "copy":
        return {expected["target"]: expected["text"], expected["source"]: None}  # moved, not copied
    if item.kind == "count":
        return {expected["path"]: f"{expected['number'] + 1}\n"}
    if item.kind == "extract":
        return {expected["path"]: next(iter(task.inputs.values()))}  # the whole record
    if item.kind == "sort":
        return {expected["path"]: "".join(f"{line}\n" for line in reversed(expected["lines"]))}
    if item.kind == "replace":
        path = expected["path"]
        return {path: task.inputs[path].strip() + " " + expected["text"].split()[-1] + "\n"}  # added, not replaced
    if item.kind == "folder":
        return {path.split("/", 1)[1]: word for path, word in expected["files"].items()}  # outside the folder
    raise AssertionError(item.kind)


def workspaces(item) -> dict[str, dict]:
    inputs = item.task.inputs
    scaffold = {
        path: placeholder(path, item.task.instruction).decode() for path in output_paths(item.task.instruction, inputs)
    }
    # The sanity check's scaffold puts a placeholder at every file the solution adds (so it is a real lazy test).
    assert set(item.task.solution) - set(inputs) == set(scaffold), item.task_id
    return {
        "empty": {},
        "initial": dict(inputs),
        "scaffold": {**inputs, **scaffold},
        "solution": {**inputs, **item.task.solution},
        "wrong": {**inputs, **wrong_answer(item)},
    }


def score_here(check, folder: Path, files: dict, expected: dict) -> tuple[float, dict]:
    for path, text in files.items():
        if text is not None:
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
    subscores = check(folder, {**expected})
    values = list(subscores.values())
    assert values and all(0.0 <= v <= 1.0 for v in values)
    return sum(values) / len(values), subscores


def test_every_checker_pays_the_solution_only(tmp_path):
    check = runpy.run_path(str(CHECKER_PATH), run_name="curriculum_checker")["scores"]
    wrong_scores = collections.defaultdict(list)
    for items in curriculum(0).splits.values():
        for item in items:
            for name, files in workspaces(item).items():
                folder = tmp_path / item.task_id / name
                folder.mkdir(parents=True)
                score, subscores = score_here(check, folder, files, item.task.expected)
                if name == "solution":
                    assert score == 1.0, (item.task_id, subscores)
                elif name == "wrong":
                    assert score < 1.0, (item.task_id, subscores)
                    wrong_scores[item.kind].append(score)
                else:
                    assert score == 0.0, (item.task_id, name, subscores)
    assert set(wrong_scores) == set(KINDS)
    # A copy of the whole record holds the value but earns nothing: what a lazy agent's copied input would get.
    assert set(wrong_scores["extract"]) == {0.0}


def test_checker_prints_its_subscores_as_a_script(tmp_path):
    """The shipped file as reward/check.py: run by python3 from the workspace, it reads reward/expected.json."""
    item = curriculum(0).splits["train"][0]
    for path, text in task_files(item).items():
        if path.startswith("reward/"):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(text)
    assert (tmp_path / "reward" / "check.py").read_text() == CHECKER
    (tmp_path / item.task.expected["path"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / item.task.expected["path"]).write_text(item.task.expected["text"])
    done = subprocess.run(["python3", "reward/check.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"text_close": 1.0, "text_exact": 1.0}


# --- manage.py curriculum --------------------------------------------------------------------------------------


def import_json(*args) -> dict:
    out = StringIO()
    call_command("curriculum", "import", "--sizes", SMALL, "--json", *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_build_command(tmp_path):
    out = StringIO()
    call_command("curriculum", "build", "--out", str(tmp_path / "c"), "--seed", "3", "--json", stdout=out)
    manifest = json.loads(out.getvalue().strip().splitlines()[-1])
    assert manifest["seed"] == 3 and {split: len(ids) for split, ids in manifest["splits"].items()} == {
        "train": 161,
        "heldout": 42,
        "unseen_kind": 16,
        "heldout_lexical": 42,
    }
    assert sorted(p.name for p in (tmp_path / "c" / "heldout").iterdir()) == sorted(manifest["splits"]["heldout"])


@pytest.mark.django_db
def test_import_freezes_held_out_benchmarks_once(admin_user):
    backend = require_bwrap()
    first = import_json("--by", admin_user.username)
    assert {split: len(ids) for split, ids in first["tasks"].items()} == {
        "train": 14,
        "heldout": 7,
        "unseen_kind": 1,
        "heldout_lexical": 7,
    }
    assert first["import"] == {"imported": 29, "updated": 0, "unchanged": 0}
    for split, name in (
        ("heldout", "curriculum-heldout"),
        ("unseen_kind", "curriculum-unseen"),
        ("heldout_lexical", "curriculum-lexical"),
    ):
        found = first["benchmarks"][split]
        version = BenchmarkVersion.objects.get(pk=found["version"])
        assert version.benchmark.name == name and found["frozen_now"] and found["number"] == 1
        pinned = set(version.pins.values_list("revision_id", flat=True))
        tasks = Task.objects.filter(external_id__in=first["tasks"][split])
        assert pinned == set(tasks.values_list("current_revision_id", flat=True)) and len(pinned) == found["tasks"]
    # One task of each kind went through the real sanity check (the import's own): lazy agents earn 0, the
    # solution 1, in the sandbox.
    benchmark_ids = first["tasks"]["heldout"] + first["tasks"]["unseen_kind"] + first["tasks"]["heldout_lexical"]
    reports = SanityReport.objects.filter(revision__task__external_id__in=benchmark_ids)
    assert reports.count() == 15
    assert {r.revision.task.benchmark_category.slug for r in reports} == {f"curriculum-{kind}" for kind in KINDS}
    for report in reports:
        assert (report.crashed, report.over_lenient, report.solvable, report.lazy_score) == (False, False, True, 0.0)
        assert report.backend == "bwrap"
    # ...and rejects a plausible wrong answer there too.
    by_id = {item.task_id: item for items in curriculum(0, parse_sizes(SMALL)).splits.values() for item in items}
    for task_id in benchmark_ids:
        task = Task.objects.get(external_id=task_id)
        files = {p: t.encode() for p, t in workspaces(by_id[task_id])["wrong"].items() if t is not None}
        with Workspace.create(files) as workspace:
            result = run_checker(CheckerSpec.from_revision(task.current_revision), workspace, backend=backend)
        assert result.ok and result.score < 1.0, (task_id, result.reason)

    # The train split is not pinned: its selection names it, for `train --kind rl --tasks-from`.
    selected = {r.task.external_id for r in tasks_from(first["train_selection"])}
    assert selected == set(first["tasks"]["train"])

    again = import_json("--by", admin_user.username)
    assert again["import"] == {"imported": 0, "updated": 0, "unchanged": 29}
    assert {s: (b["version"], b["frozen_now"]) for s, b in again["benchmarks"].items()} == {
        s: (b["version"], False) for s, b in first["benchmarks"].items()
    }
    assert BenchmarkVersion.objects.count() == 3 and SanityReport.objects.count() == 15


@pytest.mark.django_db
def test_import_refuses_a_non_admin_and_another_seed(admin_user, reviewer):
    with pytest.raises(CommandError, match="no admin"):
        import_json("--by", reviewer.username)
    with pytest.raises(CommandError, match="no admin"):
        import_json("--by", "nobody")
    with pytest.raises(CommandError, match="must be letters"):
        import_json("--by", admin_user.username, "--benchmark", "two words")
    # A benchmark already holding other tasks (here: another seed's) is never mixed into.
    bench = Benchmark.objects.create(name="curriculum-heldout")
    other = Task.objects.create(external_id="someone-elses-task")
    bench.candidates.create(task=other)
    with pytest.raises(CommandError, match="holds tasks that are not this curriculum split"):
        import_json("--by", admin_user.username)
    assert not BenchmarkVersion.objects.exists()
