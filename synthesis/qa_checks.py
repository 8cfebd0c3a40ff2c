"""Quality assessment of a task, synthesized or not: six stages, each a verdict with its reason.

    verdicts = assess(task, ["novelty", "plausibility"], judge=endpoint)     # {stage: QAVerdict}
    task = qa_task_from_revision(revision)                                  # what a catalog revision shows QA

- novelty: the instruction's MiniLM embedding against the whole pool (synthesis.novelty; default the catalog's
  current instructions, the task itself left out) and the drafts given as `also` (a batch's items not in the catalog
  yet), whatever their subcategories. Fails at a cosine similarity ≥ thresholds["novelty"] (0.90), naming the
  nearest task; the subcategory only adds to what is reported (whether the nearest task shares it, else the nearest
  one that does).
- plausibility: the judge sees the instruction and the input files (bounded): realistic, consistent with its
  files, feasible for an agent with file tools and no network.
- difficulty: the judge's level 1–5 with a reason; fails outside difficulty_min..difficulty_max (2..5).
- leak: does the instruction give away what the checker expects (the judge sees the checker).
- alignment: the instruction's requirements against the checker's code (coverage), and the checker's
  over-strict checks; fails naming the uncovered requirements and the over-strict checks.
- rubric: do the rubric's rules judge what code cannot; a task without a rubric passes ("no rubric").

Each judged stage is one call through llm.client (a JSON answer checked against the stage's schema, one repair
turn; ModelCall purpose "qa:<stage>", the caller's subject). A stage whose call fails is an "error" verdict with
the error as its reason: the task was not judged, which is not the task's fault. Prompts: synthesis.qa_prompts.
Storing the verdicts (assess_revision, assess_tasks, the job's start_assessment) is synthesis.services'.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field

from llm import jsonout
from llm.client import EndpointBusy, EndpointUnavailable, MissingApiKey, ModelCallError, complete_json, get_endpoint
from llm.models import ModelCall, ModelEndpoint
from tasks.models import RevisionFile

from . import novelty
from .models import QAStage, QualityAssessment
from .qa_prompts import PROMPT_VERSIONS, SCHEMAS, SYSTEM

STAGES = [s.value for s in QAStage]  # in the order they run
JUDGED = [s for s in STAGES if s != QAStage.NOVELTY]
DEFAULT_THRESHOLDS = {"novelty": 0.90, "difficulty_min": 2, "difficulty_max": 5}
PASS, FAIL, ERROR = QualityAssessment.Verdict.PASS.value, QualityAssessment.Verdict.FAIL.value, "error"

MAX_INSTRUCTION_CHARS = 12_000
MAX_FILE_CHARS = 6_000  # of one input file shown to the plausibility judge
MAX_FILES_CHARS = 40_000  # of all input files shown together; the rest are named with their sizes
MAX_HEAD_CHARS = 600  # of each input file's head shown with the checker (alignment, leak)
MAX_CHECKER_CHARS = 30_000  # of the checker's files together
MAX_REASON_CHARS = 2_000


def purpose(stage: str) -> str:
    return f"qa:{stage}"


@dataclass
class QATask:
    """What QA looks at: a draft of the pipeline or a catalog revision (qa_task_from_revision). `category` and
    `subcategory` are slugs (ScenarioCategory / ScenarioSubcategory)."""

    instruction: str
    input_files: dict[str, bytes]
    checker_files: dict[str, bytes]
    rubric: list
    category: str | None
    subcategory: str | None
    external_id: str = ""
    expected_behavior: str = ""


@dataclass
class QAVerdict:
    stage: str
    verdict: str  # "pass" | "fail" | "error"
    reason: str
    details: dict = field(default_factory=dict)
    model_call_id: int | None = None
    endpoint_name: str = ""
    prompt_version: str = ""


# --- what the judge is shown -------------------------------------------------------------------------------------


def _text(data: bytes, limit: int) -> tuple[str | None, bool]:
    """(the start of the file as text, whether it was cut); None for a binary file."""
    head = data[: limit * 4]  # a character is at most 4 bytes in UTF-8
    if b"\x00" in head[:8192]:
        return None, False
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) == len(data))
    except UnicodeDecodeError:
        return None, False
    return text[:limit], len(text) > limit or len(head) < len(data)


def _file_block(path: str, data: bytes, limit: int) -> tuple[str, int]:
    """The file's section of a prompt, and the characters of content it shows (at most `limit`)."""
    if not data:
        return f"### `{path}` (empty)", 0
    if limit <= 0:
        return f"### `{path}` ({len(data):,} bytes; not shown: the files' budget is spent)", 0
    text, cut = _text(data, limit)
    if text is None:
        return f"### `{path}` (binary, {len(data):,} bytes; not shown)", 0
    note = f"; only its first {len(text):,} characters are shown" if cut else ""
    return f"### `{path}` ({len(data):,} bytes{note})\n<<<FILE>>>\n{text}\n<<<END FILE>>>", len(text)


def _files(files: dict[str, bytes], *, per_file: int, total: int) -> str:
    if not files:
        return "(none: the workspace starts empty)"
    blocks, left = [], total
    for path in sorted(files):
        block, used = _file_block(path, files[path], min(per_file, left))
        blocks.append(block)
        left -= used
    return "\n\n".join(blocks)


def _instruction(task: QATask) -> str:
    text = task.instruction
    if len(text) > MAX_INSTRUCTION_CHARS:
        text = f"{text[:MAX_INSTRUCTION_CHARS]}\n[… cut: {len(task.instruction):,} characters in all]"
    return f"## Instruction (what the user asks the agent)\n<<<INSTRUCTION>>>\n{text}\n<<<END INSTRUCTION>>>"


def _rubric(task: QATask) -> str:
    if not task.rubric:
        return "## Rubric\n(none)"
    return "## Rubric rules\n" + json.dumps(task.rubric, ensure_ascii=False, indent=1)[:MAX_FILES_CHARS]


def _checker(task: QATask) -> str:
    section = _files(task.checker_files, per_file=MAX_CHECKER_CHARS, total=MAX_CHECKER_CHARS)
    return f"## Checker (the files under reward/)\n{section}"


def _heads(task: QATask) -> str:
    return "## Input files (names and heads)\n" + _files(
        task.input_files, per_file=MAX_HEAD_CHARS, total=MAX_FILES_CHARS
    )


def _expected(task: QATask) -> str:
    return (
        f"## Expected behaviour (the task author's note)\n{task.expected_behavior}\n\n"
        if task.expected_behavior
        else ""
    )


def messages_for(stage: str, task: QATask) -> list[dict]:
    """The conversation sent for one judged stage (PROMPT_VERSIONS[stage] names this wording)."""
    if stage == QAStage.PLAUSIBILITY:
        files = _files(task.input_files, per_file=MAX_FILE_CHARS, total=MAX_FILES_CHARS)
        parts = [_instruction(task), f"## Input files (the initial workspace)\n{files}"]
    elif stage == QAStage.DIFFICULTY:
        parts = [_instruction(task), _heads(task), _rubric(task)]
    elif stage == QAStage.LEAK:
        parts = [_instruction(task), _expected(task) + _checker(task)]
    elif stage == QAStage.ALIGNMENT:
        parts = [_instruction(task), _heads(task), _checker(task), _rubric(task)]
    elif stage == QAStage.RUBRIC:
        parts = [_instruction(task), _checker(task), _rubric(task)]
    else:
        raise ValueError(f"{stage!r} is not a judged QA stage")
    user = "\n\n".join(parts) + "\n\nAnswer with only the JSON object."
    return [{"role": "system", "content": SYSTEM[stage]}, {"role": "user", "content": user}]


# --- the stages ---------------------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _novelty(task: QATask, limit: float, pool, also) -> QAVerdict:
    version = PROMPT_VERSIONS["novelty"]
    try:
        pools = [pool if pool is not None else novelty.catalog_index()]
        if also:
            pools.append(novelty.NoveltyIndex.from_texts(also))
        vector = novelty.embed([task.instruction])[0]
    except (ImportError, OSError, ValueError) as exc:  # the model package missing or unreadable
        return QAVerdict("novelty", ERROR, f"the embedding model could not be used: {exc}", prompt_version=version)
    exclude = task.external_id or None

    def nearest(within=None):
        found = [(*index.nearest(vector, exclude=exclude, within=within), index) for index in pools]
        return max((f for f in found if f[0] is not None), key=lambda f: f[1], default=(None, 0.0, None))

    found, similarity, index = nearest()
    details = {"nearest": found, "similarity": round(similarity, 4) if found else None}
    if found is None:
        return QAVerdict("novelty", PASS, "no task to compare with in the whole pool", details, prompt_version=version)
    where = "in the whole pool"
    if index is not pools[0]:
        where += ", as an item of this batch not in the catalog yet"
    group = novelty.group_of(task.category, task.subcategory)
    if group and index.group(found) == group:
        where += f"; it is of the same subcategory, {task.subcategory}"
    elif group:
        same, same_similarity, _ = nearest(within=group)
        if same is None:
            where += f"; no other task is of its subcategory, {task.subcategory}"
        else:
            details.update(nearest_in_subcategory=same, similarity_in_subcategory=round(same_similarity, 4))
            where += f"; the nearest of its subcategory, {task.subcategory}, is {same} at {same_similarity:.3f}"
    if similarity >= limit:
        reason = f"near-duplicate of {found}: similarity {similarity:.3f} ≥ {limit:.2f} ({where})"
        return QAVerdict("novelty", FAIL, reason, details, prompt_version=version)
    reason = f"nearest task {found} at similarity {similarity:.3f} < {limit:.2f} ({where})"
    return QAVerdict("novelty", PASS, reason, details, prompt_version=version)


def _decide(stage: str, answer: dict, thresholds: dict, task: QATask) -> tuple[str, str, dict]:
    """(verdict, reason, details) from the judge's validated answer."""
    reason = _cut(answer["reason"])
    if stage == QAStage.PLAUSIBILITY:
        problems = [_cut(p) for p in answer.get("problems") or []]
        return (PASS if answer["plausible"] else FAIL), reason, {"problems": problems}
    if stage == QAStage.DIFFICULTY:
        level, low, high = answer["level"], thresholds["difficulty_min"], thresholds["difficulty_max"]
        if low <= level <= high:
            return PASS, f"level {level}: {reason}", {"level": level}
        return FAIL, f"level {level} is outside {low}..{high}: {reason}", {"level": level}
    if stage == QAStage.LEAK:
        leaked = [_cut(v) for v in answer.get("leaked") or []]
        if answer["leaks"]:
            named = f" (gives away: {'; '.join(leaked)})" if leaked else ""
            return FAIL, f"the instruction leaks the answer{named}: {reason}", {"leaked": leaked}
        return PASS, reason, {"leaked": []}
    if stage == QAStage.ALIGNMENT:
        requirements = answer["requirements"]
        uncovered = [_cut(r["requirement"]) for r in requirements if not r["covered"]]
        strict = [_cut(f"{s['check']}" + (f" ({s['why']})" if s.get("why") else "")) for s in answer["over_strict"]]
        coverage = round((len(requirements) - len(uncovered)) / len(requirements), 4) if requirements else None
        details = {
            "coverage": coverage,
            "requirements": len(requirements),
            "uncovered": uncovered,
            "over_strict": strict,
        }
        problems = ([f"uncovered: {'; '.join(uncovered)}"] if uncovered else []) + (
            [f"over-strict: {'; '.join(strict)}"] if strict else []
        )
        if problems:
            return FAIL, _cut(" — ".join(problems) + f". {reason}"), details
        return PASS, reason, details
    if stage == QAStage.RUBRIC:
        names = {str(rule.get("name", "")) for rule in task.rubric if isinstance(rule, dict)}
        redundant = [_cut(r) for r in answer.get("redundant_rules") or []]
        details = {"redundant_rules": redundant, "unknown_rules": [r for r in redundant if names and r not in names]}
        if answer["complementary"]:
            return PASS, reason, details
        named = f" (repeating the checker: {', '.join(redundant)})" if redundant else ""
        return FAIL, _cut(f"the rubric does not complement the checker{named}: {reason}"), details
    raise ValueError(stage)


def _answer_text(call: ModelCall) -> str:
    response = call.response or {}
    if call.api == ModelEndpoint.ApiStyle.RESPONSES:
        return "".join(
            part.get("text", "")
            for out in response.get("output") or []
            if out.get("type") == "message"
            for part in out.get("content") or []
            if part.get("type") == "output_text"
        )
    choices = response.get("choices") or []
    return ((choices[0].get("message") or {}).get("content") or "") if choices else ""


def _recorded(stage: str, judge: ModelEndpoint, messages: list[dict], subject: str):
    """(answer, call) of an earlier valid answer to exactly this question for this subject, or None."""
    calls = ModelCall.objects.filter(
        subject=subject,
        purpose=purpose(stage),
        endpoint_name=judge.name,
        model=judge.model,
        response__isnull=False,
        error="",
    ).order_by("-pk")
    key = json.dumps(messages, sort_keys=True)
    for call in calls:
        request = call.request or {}
        if json.dumps(request.get("messages", request.get("input")), sort_keys=True) != key:
            continue
        try:
            return jsonout.parse_answer(_answer_text(call), SCHEMAS[stage]), call
        except jsonout.JsonAnswerError:
            continue
    return None


def _judged(
    stage: str, task: QATask, judge: ModelEndpoint | None, thresholds: dict, subject: str, reuse: bool
) -> QAVerdict:
    version = PROMPT_VERSIONS[stage]
    if stage == QAStage.RUBRIC and not task.rubric:
        return QAVerdict(stage, PASS, "no rubric", {}, prompt_version=version)
    if judge is None:
        return QAVerdict(
            stage,
            ERROR,
            "no judge endpoint: name one (--judge) or add one with the role 'judge'",
            prompt_version=version,
        )
    messages = messages_for(stage, task)
    found = _recorded(stage, judge, messages, subject) if reuse and subject else None
    if found is not None:
        answer, call = found
    else:
        try:
            answer, call = complete_json(
                judge, messages, SCHEMAS[stage], purpose=purpose(stage), subject=subject, repairs=1
            )
        except (ModelCallError, MissingApiKey, EndpointBusy) as exc:  # InvalidJsonAnswer is a ModelCallError
            call = getattr(exc, "call", None)
            return QAVerdict(stage, ERROR, _cut(str(exc)), {}, call.pk if call else None, judge.name, version)
    verdict, reason, details = _decide(stage, answer, thresholds, task)
    return QAVerdict(stage, verdict, reason, details, call.pk, judge.name, version)


def assess(
    task: QATask,
    stages: list[str],
    *,
    judge: ModelEndpoint | None,
    thresholds: dict | None = None,
    pool=None,
    also=None,
    subject: str = "",
    reuse_answers: bool = False,
) -> dict[str, QAVerdict]:
    """{stage: verdict} for each of `stages` (run in QAStage order). `pool`: the NoveltyIndex to compare with
    (default: the catalog's); `also`: more drafts to compare with, [(id, instruction, group)]. `thresholds` overrides DEFAULT_THRESHOLDS key by key. `reuse_answers`: a valid
    answer recorded before for `subject` to exactly the same question is used instead of asking again (a resumed
    batch repeats no call it has the answer of). Raises ValueError for a stage that does not exist; never for a
    model that fails (that stage's verdict is "error")."""
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown QA stage(s): {', '.join(unknown)} (stages: {', '.join(STAGES)})")
    limits = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    verdicts = {}
    for stage in [s for s in STAGES if s in stages]:
        if stage == QAStage.NOVELTY:
            verdicts[stage] = _novelty(task, float(limits["novelty"]), pool, also)
        else:
            verdicts[stage] = _judged(stage, task, judge, limits, subject, reuse_answers)
    return verdicts


# --- catalog revisions --------------------------------------------------------------------------------------------


def qa_task_from_revision(revision) -> QATask:
    task = revision.task
    files = {"input": {}, "reward": {}}
    for f in revision.files.filter(role__in=files).select_related("blob"):
        files[f.role][f.path] = f.blob.content
    metadata = revision.metadata or {}
    return QATask(
        instruction=revision.instruction,
        input_files=files[RevisionFile.Role.INPUT],
        checker_files=files[RevisionFile.Role.REWARD],
        rubric=revision.rubric or [],
        category=task.scenario_category.slug if task.scenario_category_id else None,
        subcategory=task.scenario_subcategory.slug if task.scenario_subcategory_id else None,
        external_id=task.external_id,
        expected_behavior=str(metadata.get("expected_behavior") or ""),
    )


def latest_assessments(revision) -> list[QualityAssessment]:
    """The latest verdict per stage of a revision, in QAStage order (what the task page shows)."""
    found = {}
    for row in QualityAssessment.objects.filter(revision=revision).order_by("-created_at", "-id"):
        found.setdefault(row.stage, row)
    return [found[s] for s in STAGES if s in found]


# --- many tasks (services.assess_tasks, the job) ----------------------------------------------------------------------


class QAError(Exception):
    """QA cannot start (an unknown stage, no judge to ask). The message says what to do."""


def parse_stages(text: str | None) -> list[str]:
    """ "novelty,plausibility" → the stages, in QAStage order (None or "": every stage). Raises QAError."""
    if not text:
        return list(STAGES)
    asked = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in asked if s not in STAGES]
    if unknown:
        raise QAError(f"unknown QA stage(s): {', '.join(unknown)} (stages: {', '.join(STAGES)})")
    return [s for s in STAGES if s in asked]


def judge_endpoint(name: str | None, stages: list[str]) -> ModelEndpoint | None:
    """The endpoint called `name`, else the first enabled one serving the judge role; None when no stage asked
    needs a judge. Raises QAError when one is needed and there is none."""
    if name:
        try:
            return get_endpoint(name)
        except EndpointUnavailable as exc:
            raise QAError(f"{exc} (manage.py endpoints list shows them)") from None
    if not any(s in JUDGED for s in stages):
        return None
    try:
        return get_endpoint(role=ModelEndpoint.Role.JUDGE)
    except EndpointUnavailable:
        raise QAError(
            "no enabled model endpoint serves the role 'judge': add one (manage.py endpoints add … --role judge), "
            "or name one with --judge"
        ) from None


def verdict_json(row: QualityAssessment | QAVerdict) -> dict:
    """{"verdict", "reason", **details} (novelty: "nearest", "similarity"): one stage in assess_tasks --json."""
    return {**(row.details or {}), "verdict": row.verdict, "reason": row.reason}
