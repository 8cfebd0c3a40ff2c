"""Planted flaws: known flaws an admin plants into copies of accepted candidates, to learn whether the review works.

    plants = plant_flaws(benchmark, ["check_removed", "input_removed"], 4, user=admin, seed=7)
    report = planted_report(benchmark)            # per kind: the share the LLM named, the share reviewers caught
    shown = revelation(candidate, user=reviewer)  # after their decision: what the candidate really was

Each plant copies the revision a reviewer accepted as a new task (tasks.services.create_task) whose first revision
carries the flaw, and proposes it to the same benchmark, where it waits for its diagnosis like any candidate (a
sanity check and a diagnosis are queued). Nothing on the queue marks it: the copy gets an id of its own made of its
instruction's words, as people name tasks, and is recorded as its original was (`_disguised`). The kinds:

    check_removed       the checker's entry script ends by printing 1.0: a placeholder workspace gets full marks
    instruction_cut     the instruction loses the sentence with the most details the checker relies on
    input_removed       an input file the instruction or the checker names is removed or emptied
    rubric_contradicts  a rubric rule pays only when the output the checker requires is missing (with no output
                        path to name, the first rule's level descriptions are inverted)

The LLM named a plant when a diagnosis of the planted revision has an issue on the affected component. A reviewer
caught it by rejecting it or recording a fix of it; accepting it without a fix missed it. A planted copy never
enters a benchmark: accepting one closes it (services.decide), freezing leaves it out, and dataset building and
training runs leave its task out (training_jobs). Right after a reviewer's accept or reject, the page and the API
reveal what it was (`revelation`).
"""

from __future__ import annotations

import random
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from django.db import transaction

import jobs
from accounts.roles import ADMIN
from tasks.importing import IMPORT_STAGE
from tasks.job_kinds import SANITY_JOB
from tasks.models import Task
from tasks.package import PackageError, PackageFile, TaskPackage
from tasks.paths import TaskFileError
from tasks.sanity import output_paths
from tasks.services import TaskExistsError, create_task, package_from_revision

from . import services
from .models import BenchmarkCandidate, DiagnosisIssue, LLMDiagnosis, PlantedFlaw, ReviewDecision

Kind = PlantedFlaw.Kind
Component = DiagnosisIssue.Component
Decision = ReviewDecision.Decision
MAX_PLANTS = 50  # at a time
KIND_COMPONENT = {
    Kind.CHECK_REMOVED: Component.CHECKER,
    Kind.INSTRUCTION_CUT: Component.INSTRUCTION,
    Kind.INPUT_REMOVED: Component.INPUT_FILE,
    Kind.RUBRIC_CONTRADICTS: Component.RUBRIC,
}


class PlantError(services.ReviewError):
    """The flaws cannot be planted as asked; the message says why. Nothing was planted."""


@dataclass(frozen=True)
class Flaw:
    package: TaskPackage  # the copy, flaw included
    path: str  # the file changed, for a file's flaw
    change: str  # what was changed, in words


# --- the flaws -------------------------------------------------------------------------------------------------


def _files(package: TaskPackage, role: str) -> dict[str, PackageFile]:
    return {f.path: f for f in package.files if f.role == role}


def _with_file(package: TaskPackage, role: str, path: str, data: bytes | None) -> TaskPackage:
    files = [f for f in package.files if not (f.role == role and f.path == path)]
    if data is not None:
        files.append(PackageFile(path=path, data=data, role=role))
    return replace(package, files=files)


def _reward_text(package: TaskPackage) -> str:
    return "\n".join(f.data.decode("utf-8", "replace") for f in _files(package, "reward").values())


def remove_check(package: TaskPackage, rng: random.Random) -> Flaw | None:
    """The checker's entry script (the reward file its entry command runs) prints 1.0 last: its last line is the
    score, so every workspace, a placeholder too, gets full marks."""
    try:
        tokens = shlex.split(package.checker_entry)
    except ValueError:
        return None
    reward = _files(package, "reward")
    for token in tokens:
        path = token.removeprefix("./").removeprefix("reward/")
        if path == token.removeprefix("./") or path not in reward:
            continue
        line = {".sh": b"echo 1.0\n", ".py": b"print(1.0)\n"}.get(path[path.rfind(".") :])
        if line is None:
            continue
        data = reward[path].data
        data = data + (b"" if data.endswith(b"\n") or not data else b"\n") + line
        change = f"reward/{path}: appended `{line.decode().strip()}`, so the score is 1 whatever the workspace holds"
        return Flaw(_with_file(package, "reward", path, data), path, change)
    return None


SENTENCE = re.compile(r"[^\s][^\n]*?(?:[.!?]+(?=\s|\Z)|(?=\n)|\Z)")
WORD = re.compile(r"[A-Za-z_][\w.\-/]{3,}")


def cut_instruction(package: TaskPackage, rng: random.Random) -> Flaw | None:
    """Cut the sentence (not the first: it says what the task is) that holds the most details the checker relies
    on: words the checker's files use, numbers and paths."""
    text = package.instruction
    spans = [m for m in SENTENCE.finditer(text) if len(m.group().strip()) >= 15]
    if len(spans) < 2:
        return None
    checker_words = {w.lower() for w in WORD.findall(_reward_text(package))}

    def details(sentence: str) -> int:
        words = {w.lower().rstrip(".") for w in WORD.findall(sentence)}
        return len(words & checker_words) + 2 * len(re.findall(r"\d+|\w+\.\w{2,4}\b|/", sentence))

    scored = [(details(m.group()), rng.random(), m) for m in spans[1:]]
    best_score, _, best = max(scored, key=lambda item: item[:2])
    if best_score <= 0:
        return None
    instruction = (text[: best.start()] + text[best.end() :]).strip()
    instruction = re.sub(r"[ \t]{2,}", " ", re.sub(r"\n{3,}", "\n\n", instruction))
    if not instruction:
        return None
    cut = " ".join(best.group().split())
    return Flaw(replace(package, instruction=instruction), "", f"cut from the instruction: “{cut}”")


def remove_input(package: TaskPackage, rng: random.Random) -> Flaw | None:
    """Remove or empty an input file, one the instruction or the checker names where there is one."""
    inputs = _files(package, "input")
    if not inputs:
        return None
    named_in = package.instruction + "\n" + _reward_text(package)
    named = sorted(p for p in inputs if p.rsplit("/", 1)[-1] in named_in)
    path = rng.choice(named or sorted(inputs))
    size = len(inputs[path].data)
    if size and rng.random() < 0.5:
        flawed = _with_file(package, "input", path, b"")
        return Flaw(flawed, path, f"input file {path} emptied (it held {size} bytes)")
    return Flaw(_with_file(package, "input", path, None), path, f"input file {path} removed")


def contradict_rubric(package: TaskPackage, rng: random.Random) -> Flaw | None:
    """Add a rubric rule that pays only when the output the instruction asks for (and the checker reads) is not
    written; with no output path to name, invert the first rule's level descriptions."""
    outputs = output_paths(package.instruction, _files(package, "input"))
    rules = list(package.rubric)
    names = {rule["name"] for rule in rules}
    if outputs:
        target = outputs[0]
        name = next(n for n in ("answer_in_reply", "reply_only", "no_output_file", "answer_format") if n not in names)
        rule = {
            "name": name,
            "target_file": "",
            "scores": {
                "0": f"The result is written to {target} (or any file) instead of being given in the final reply.",
                "1": f"The result is given in the final reply only; {target} is not created.",
            },
            "weight": 1.0,
        }
        change = f"rubric rule “{name}” added: it pays only when {target}, which the checker reads, is not written"
        return Flaw(replace(package, rubric=[*rules, rule]), "", change)
    for i, rule in enumerate(rules):
        levels = sorted(rule["scores"], key=float)
        if len(levels) < 2:
            continue
        texts = [rule["scores"][level] for level in levels]
        inverted = dict(rule, scores=dict(zip(levels, reversed(texts), strict=True)))
        change = f"rubric rule “{rule['name']}”: its level descriptions inverted (the top score describes the worst)"
        return Flaw(replace(package, rubric=[*rules[:i], inverted, *rules[i + 1 :]]), "", change)
    return None


MAKERS = {
    Kind.CHECK_REMOVED: remove_check,
    Kind.INSTRUCTION_CUT: cut_instruction,
    Kind.INPUT_REMOVED: remove_input,
    Kind.RUBRIC_CONTRADICTS: contradict_rubric,
}


# --- planting --------------------------------------------------------------------------------------------------


def sources(benchmark) -> list[BenchmarkCandidate]:
    """The accepted candidates of `benchmark` a flaw may be planted into a copy of (never a planted copy)."""
    accepted = BenchmarkCandidate.objects.filter(
        benchmark=benchmark, status=BenchmarkCandidate.Status.ACCEPTED, plant__isnull=True
    )
    return list(accepted.select_related("task", "proposed_by").order_by("id"))


def parse_kinds(kinds) -> list[str]:
    """The kinds asked for, checked, in order, each once; raises PlantError naming the unknown ones."""
    if isinstance(kinds, str):
        kinds = [k for k in re.split(r"[\s,]+", kinds) if k]
    kinds = list(dict.fromkeys(kinds or []))
    unknown = [k for k in kinds if k not in Kind.values]
    if unknown:
        raise PlantError(f"unknown flaw kind {', '.join(map(repr, unknown))}: choose from {', '.join(Kind.values)}")
    if not kinds:
        raise PlantError(f"choose at least one flaw kind: {', '.join(Kind.values)}")
    return kinds


# Words too common to name a task by; an id is made of the words that say what the task is about.
COMMON_WORDS = frozenset(
    "about after also amount and answer any before each file files from give have into just keep line make must "
    "need only other over please same short should some than that their them then there these they this those "
    "using what when where which while will with within without would write your".split()
)


def _copy_id(package: TaskPackage, source: str, rng: random.Random) -> str:
    """An id for a copy shaped as people name the tasks they import (`expense-reconciliation-q1`): a few words of its
    instruction joined by hyphens. Never the source's id with a suffix: beside its accepted original in the queue that
    would mark the copy as one."""
    seen = dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z]{4,}", package.instruction))
    words = [w for w in seen if w not in COMMON_WORDS][:10] or ["task"]
    for attempt in range(200):
        count = min(len(words), rng.choice((2, 3)))
        picked = sorted(rng.sample(range(len(words)), count))
        candidate = "-".join(words[i] for i in picked)[:180]
        if attempt >= 100 or len(words) < 2:  # the instruction's words are all taken: number them as people do
            candidate = f"{candidate}-{rng.randint(2, 99)}"
        if candidate.startswith(source) or source.startswith(candidate):
            continue
        if not Task.objects.filter(external_id=candidate).exists():
            return candidate
    raise PlantError(f"found no free task id for a copy of {source}")


def plant_flaws(benchmark, kinds, count: int, *, user, seed: int | None = None, diagnose: bool = True) -> list:
    """Plant `count` flaws into copies of the benchmark's accepted candidates, going round `kinds`, each copy of
    the source used least so far that can carry the kind. Returns the PlantedFlaw rows. A sanity check of each
    copy, and (`diagnose`) its diagnosis, are queued. All or nothing: PlantError when one cannot be planted."""
    services._require(user, ADMIN, "planting flaws")
    kinds = parse_kinds(kinds)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PLANTS:
        raise PlantError(f"plant between 1 and {MAX_PLANTS} flaws at a time, not {count!r}")
    pool = sources(benchmark)
    if not pool:
        raise PlantError(
            f"{benchmark.name} has no accepted candidate to copy: flaws are planted into copies of accepted ones"
        )
    rng = random.Random(seed)
    used: Counter = Counter()
    plants = []
    with transaction.atomic():
        for i in range(count):
            kind = kinds[i % len(kinds)]
            plants.append(_plant_one(benchmark, kind, pool, used, rng, user=user))
        if diagnose:
            services.start_diagnosis([plant.candidate for plant in plants], user=user)
    return plants


def _plant_one(benchmark, kind: str, pool: list, used: Counter, rng: random.Random, *, user) -> PlantedFlaw:
    order = sorted(pool, key=lambda c: (used[c.pk], rng.random()))
    for source in order:
        revision = services.accepted_revision(source) or source.task.current_revision
        flaw = MAKERS[kind](package_from_revision(revision), rng)
        if flaw is not None:
            break
    else:
        raise PlantError(
            f"no accepted candidate of {benchmark.name} can carry a flaw of kind {kind} "
            f"({Kind(kind).label.lower()}): {_why_not(kind)}"
        )
    used[source.pk] += 1
    package, provenance = _disguised(flaw.package, source.task, rng)
    try:
        created = create_task(package, status=Task.Status.READY, **provenance)
    except (PackageError, TaskFileError, TaskExistsError) as exc:
        raise PlantError(
            f"the copy of {source.task.external_id} with a {kind} flaw is not a valid task: {exc}"
        ) from None
    task = created.task
    Task.objects.filter(pk=task.pk).update(
        benchmark_category=source.task.benchmark_category_id,
        scenario_category=source.task.scenario_category_id,
        scenario_subcategory=source.task.scenario_subcategory_id,
    )
    services.propose_candidates(benchmark, [task], user=source.proposed_by)
    candidate = BenchmarkCandidate.objects.get(benchmark=benchmark, task=task)
    plant = PlantedFlaw.objects.create(
        benchmark=benchmark,
        candidate=candidate,
        source_candidate=source,
        source_revision=revision,
        kind=kind,
        component=KIND_COMPONENT[kind],
        path=flaw.path,
        change=flaw.change,
        created_by=user,
    )
    jobs.enqueue(SANITY_JOB, created_by=user, revision_id=created.revision.pk)
    return plant


def _disguised(package: TaskPackage, original: Task, rng: random.Random) -> tuple[TaskPackage, dict]:
    """The copy's package under an id of its own, and how its first revision is recorded, so that nothing the queue,
    the candidate page, the task page or the API shows tells it from a real candidate: it is recorded as its
    original's first revision was (the same importer or author, stage and message), never as a reviewer's fix at r1.
    A synthesised original's provenance names its batch and item, which a copy cannot share with it unnoticed (nor
    take a `syn-` id a later item of that batch would need), so such a copy is recorded as imported. The link to the
    original is kept on the PlantedFlaw, which only admins see."""
    first = original.revisions.select_related("author_user").order_by("number").first()
    synthesised = original.source in (Task.Source.PERSONA, Task.Source.SKILL)
    if synthesised:
        metadata = {k: v for k, v in package.metadata.items() if k != "synthesis"}
        package = replace(package, metadata=metadata)
        provenance = {"user": None, "stage": IMPORT_STAGE, "message": "", "source": Task.Source.IMPORTED}
    else:
        provenance = {
            "user": first.author_user if first else None,
            "stage": first.author_stage if first else "",
            "message": first.message if first else "",
            "source": original.source,
        }
    return replace(package, external_id=_copy_id(package, original.external_id, rng)), provenance


def _why_not(kind: str) -> str:
    return {
        Kind.CHECK_REMOVED: "none has a checker entry running a .sh or .py file of reward/",
        Kind.INSTRUCTION_CUT: "none has an instruction of two sentences or more with a detail the checker uses",
        Kind.INPUT_REMOVED: "none has an input file",
        Kind.RUBRIC_CONTRADICTS: "none names an output path in its instruction or has a rubric rule",
    }[kind]


# --- what the review made of them --------------------------------------------------------------------------------


@dataclass
class Outcome:
    plant: PlantedFlaw
    llm: str  # named | not_named | not_diagnosed
    reviewers: str  # caught | missed | pending
    by_reviewer: dict  # {username: caught | missed}


def _reviewer_outcomes(decisions: list) -> dict:
    """{reviewer: caught | missed} over one candidate's decisions (oldest first): a reject or a fix caught it, an
    accept without a fix of the same reviewer missed it."""
    fixed = {d.reviewer_id for d in decisions if d.decision == Decision.FIX}
    found = {}
    for d in decisions:
        if d.decision in (Decision.REJECT, Decision.FIX):
            found[d.reviewer_id] = "caught"
        elif d.decision == Decision.ACCEPT:
            found[d.reviewer_id] = "caught" if d.reviewer_id in fixed else "missed"
    return found


def outcomes(plants) -> list[Outcome]:
    """What the LLM and the reviewers made of each plant, in three queries whatever their number."""
    plants = list(plants)
    ids = [p.candidate_id for p in plants]
    decisions = defaultdict(list)
    rows = ReviewDecision.objects.filter(candidate_id__in=ids).exclude(decision=Decision.VERDICT)
    for d in rows.select_related("reviewer").order_by("created_at", "id"):
        decisions[d.candidate_id].append(d)
    diagnosed = defaultdict(set)  # candidate id -> components its diagnoses of the planted revision named
    issues = DiagnosisIssue.objects.filter(diagnosis__candidate_id__in=ids, diagnosis__revision__number=1)
    for candidate_id, component in issues.values_list("diagnosis__candidate_id", "component"):
        diagnosed[candidate_id].add(component)
    any_diagnosis = set(
        LLMDiagnosis.objects.filter(candidate_id__in=ids, revision__number=1).values_list("candidate_id", flat=True)
    )
    out = []
    for plant in plants:
        if plant.candidate_id not in any_diagnosis:
            llm = "not_diagnosed"
        else:
            llm = "named" if plant.component in diagnosed[plant.candidate_id] else "not_named"
        mine = decisions[plant.candidate_id]
        per = _reviewer_outcomes(mine)
        reviewers = "caught" if "caught" in per.values() else ("missed" if per else "pending")
        names = {d.reviewer_id: (d.reviewer.get_username() if d.reviewer else "(deleted)") for d in mine}
        out.append(Outcome(plant, llm, reviewers, {names[pk]: result for pk, result in per.items()}))
    return out


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def planted_report(benchmark) -> dict:
    """Per flaw kind and in all: how many were planted, diagnosed, named by the LLM, decided by reviewers and
    caught by them, with the shares (named of diagnosed, caught of decided); per reviewer, per kind too."""
    plants = PlantedFlaw.objects.filter(benchmark=benchmark).select_related("candidate__task")
    results = outcomes(plants)

    def tally(rows) -> dict:
        diagnosed = sum(r.llm != "not_diagnosed" for r in rows)
        named = sum(r.llm == "named" for r in rows)
        decided = sum(r.reviewers != "pending" for r in rows)
        caught = sum(r.reviewers == "caught" for r in rows)
        return {
            "total": len(rows),
            "diagnosed": diagnosed,
            "caught_by_llm": named,
            "llm_share": _share(named, diagnosed),
            "decided": decided,
            "caught_by_reviewers": caught,
            "reviewer_share": _share(caught, decided),
        }

    report = tally(results)
    report["by_kind"] = {kind: tally([r for r in results if r.plant.kind == kind]) for kind in Kind.values}
    reviewers: dict[str, dict] = {}
    for r in results:
        for name, result in r.by_reviewer.items():
            entry = reviewers.setdefault(name, {"decided": 0, "caught": 0, "by_kind": {}})
            kind = entry["by_kind"].setdefault(r.plant.kind, {"decided": 0, "caught": 0})
            for bucket in (entry, kind):
                bucket["decided"] += 1
                bucket["caught"] += result == "caught"
    for entry in reviewers.values():
        entry["share"] = _share(entry["caught"], entry["decided"])
        for kind in entry["by_kind"].values():
            kind["share"] = _share(kind["caught"], kind["decided"])
    report["by_reviewer"] = dict(sorted(reviewers.items()))
    return report


def plant_rows(benchmark) -> list[Outcome]:
    """Every plant of the benchmark with its outcome, newest first (for admins: the page lists what each was)."""
    plants = PlantedFlaw.objects.filter(benchmark=benchmark).select_related(
        "candidate__task", "source_candidate__task", "source_revision", "created_by"
    )
    return outcomes(plants.order_by("-created_at", "-id"))


# --- the reveal ------------------------------------------------------------------------------------------------


def revelation(candidate, user) -> dict | None:
    """What a planted candidate really was, for `user` once they accepted or rejected it (or once it is closed);
    None for any other candidate, and before that. A planted copy's task proposed to another benchmark is a planted
    candidate there too (services.decide closes it the same way)."""
    plant = (
        PlantedFlaw.objects.filter(candidate__task_id=candidate.task_id)
        .select_related("candidate__task", "source_candidate__task", "source_revision")
        .first()
    )
    if plant is None:
        return None
    here = plant.candidate if plant.candidate_id == candidate.pk else BenchmarkCandidate.objects.get(pk=candidate.pk)
    decisions = list(here.decisions.exclude(decision=Decision.VERDICT).order_by("created_at", "id"))
    uid = getattr(user, "pk", None)
    decided = any(d.reviewer_id == uid and d.decision in (Decision.ACCEPT, Decision.REJECT) for d in decisions)
    if not decided and here.status in BenchmarkCandidate.OPEN:
        return None
    per = _reviewer_outcomes(decisions)
    outcome = per.get(uid) or ("caught" if "caught" in per.values() else "missed" if per else "pending")
    source = plant.source_candidate.task.external_id if plant.source_candidate else "an accepted candidate"
    rev = f" r{plant.source_revision.number}" if plant.source_revision else ""
    who = "You" if uid in per else "The review"
    verb = {"caught": "caught it", "missed": "missed it", "pending": "has not decided it"}[outcome]
    message = (
        f"{plant.candidate.task.external_id} was a planted flaw ({Kind(plant.kind).label.lower()}): {plant.change}. "
        f"It is a copy of {source}{rev}. {who} {verb}. A planted copy is closed and never enters a benchmark."
    )
    return {
        "kind": plant.kind,
        "kind_label": Kind(plant.kind).label,
        "component": plant.component,
        "path": plant.path,
        "change": plant.change,
        "source_task": plant.source_candidate.task.external_id if plant.source_candidate else None,
        "source_revision": plant.source_revision.number if plant.source_revision else None,
        "outcome": outcome,
        "message": message,
    }


def is_planted(candidate) -> bool:
    return PlantedFlaw.objects.filter(candidate_id=candidate.pk).exists()
