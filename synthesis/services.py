"""Every state change of synthesis, one function each: the pages (synthesis.views), the API (synthesis.api), the
commands and the jobs validate what they are given and call these.

    batch = start_batch("persona", 20, generator, judge, seed=7, user=admin)   # queued as jobs (synthesis.run_batch)
    run_here(start_batch("skill", 5, generator, judge, here=True, user=None))  # or run in this process
    resume_batch(batch, user=admin); cancel_batch(batch, user=admin)           # begin(batch): the job's
    import_personas("persona.jsonl"); import_skills(bundled=True)              # tasks.importing.ImportReport
    run = start_annotation(user=admin)        # the job; annotate_skills(skills, endpoint) runs in this process
    set_override(skill, True, reason="…", user=admin)                          # None clears it
    rows = assess_revision(revision, STAGES, judge=endpoint, user=admin)       # assess_tasks; start_assessment

`user` is the person acting, a required keyword wherever a row records one (the batch's, the job run's or the
verdict's creator, the override's author): a command passes None, a job its run's creator (as the pipeline's
catalog stage passes the batch's). Imports and annotations record nobody (Persona, Skill and SkillAnnotation have
no field for a person), so those take no user.

What these build on stays with its concept: drawing a batch's items, its configuration and the figures of what it
produced in synthesis.batches (the items run through synthesis.pipeline and its stages); reading personas and
operations in synthesis.seeds; parsing skill folders in synthesis.skills; the annotation prompt and the
synthesizable rule in synthesis.annotation; the quality-assessment verdicts in synthesis.qa.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path

from django.db import transaction
from django.utils import timezone

import jobs
from jobs.models import JobRun
from jobs.services import cancel_job
from llm.client import EndpointBusy, MissingApiKey, ModelCallError, complete_json
from llm.models import ModelEndpoint
from tasks.formats import FormatError
from tasks.formats.archive import opened
from tasks.importing import ImportReport
from tasks.models import Blob, Task
from tasks.paths import printable
from tasks.services import store_blobs

from . import pipeline
from .annotation import (
    ANNOTATE_JOB,
    ANNOTATE_PROMPT_VERSION,
    ANNOTATE_PURPOSE,
    ANNOTATION_SCHEMA,
    AnnotationError,
    AnnotationFailed,
    AnnotationResult,
    annotation_messages,
    annotator_endpoint,
)
from .batches import (
    MAX_COUNT,
    PREVIEW_COUNT,
    QA_KEYS,
    RUN_BATCH_JOB,
    BatchError,
    batch_config,
    config_differences,
    config_hash,
    draw_seeds,
)
from .models import (
    Persona,
    QAStage,
    QualityAssessment,
    Route,
    Skill,
    SkillAnnotation,
    SkillFile,
    SynthesisBatch,
    SynthesisItem,
)
from .novelty import catalog_index
from .qa import ASSESS_JOB, assess, judge_endpoint, parse_stages, qa_task_from_revision
from .seeds import BATCH, MAX_PERSONA_CHARS, open_text, persona_hash, read_personas
from .skills import (
    BUNDLED_SOURCE,
    SKILL_FILE,
    ParsedSkill,
    SkillError,
    SkillImportError,
    bundled_skills_dir,
    find_skill_folders,
    missing_bins,
    parse_skill_folder,
)

_UNSET = object()


# --- batches: starting, resuming, cancelling, running here ------------------------------------------------------------


def _endpoint(value) -> ModelEndpoint:
    if isinstance(value, ModelEndpoint):
        return value
    found = ModelEndpoint.objects.filter(name=value).first()
    if found is None:
        raise BatchError(f"no model endpoint named {value!r}")
    return found


def _budget(value, kind):
    if value is None:
        return None
    if kind is int:
        if int(value) < 0:
            raise BatchError("the token budget must not be negative")
        return int(value)
    value = Decimal(str(value))
    if value < 0:
        raise BatchError("the cost budget must not be negative")
    return value


def start_batch(
    route,
    count,
    generator,
    judge,
    seed=None,
    preview=False,
    budget_usd=None,
    budget_tokens=None,
    options=None,
    qa_thresholds=None,
    *,
    user,
    here=False,
    name="",
) -> SynthesisBatch:
    """Create the batch and its items (or resume the earlier batch of this configuration, see synthesis.batches'
    docstring), and queue it on the job workers unless `here` (then call run_here). Raises BatchError."""
    if route not in Route.values:
        raise BatchError(f"unknown route {route!r}; choose one of {', '.join(Route.values)}")
    count = PREVIEW_COUNT if preview else int(count)
    if not 1 <= count <= MAX_COUNT:
        raise BatchError(f"the count must be between 1 and {MAX_COUNT:,}")
    generator, judge = _endpoint(generator), _endpoint(judge)
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    options = dict(options or {})
    config = batch_config(route=route, count=count, generator=generator, judge=judge, seed=seed, preview=preview,
                          options=options, qa_thresholds=qa_thresholds)  # fmt: skip
    digest = config_hash(config)
    budgets = {"budget_usd": _budget(budget_usd, Decimal), "budget_tokens": _budget(budget_tokens, int)}
    earlier = SynthesisBatch.objects.filter(config_hash=digest).order_by("pk").first()
    if earlier is not None:
        return resume_batch(earlier, user=user, here=here, **budgets)
    seeds = draw_seeds(route, count, seed, options)
    with transaction.atomic():
        batch = SynthesisBatch.objects.create(
            name=name, route=route, requested=count, preview=preview, generator=generator, judge=judge, seed=seed,
            prompt_versions=config["prompt_versions"], qa_thresholds=qa_thresholds or {}, options=options,
            config=config, config_hash=digest, created_by=user if user and user.is_authenticated else None,
            **budgets,
        )  # fmt: skip
        SynthesisItem.objects.bulk_create(
            SynthesisItem(batch=batch, index=i, seed=item_seed) for i, item_seed in enumerate(seeds)
        )
        if not here:
            _queue(batch, user=user)
    return batch


def _queue(batch: SynthesisBatch, *, user) -> None:
    run = jobs.enqueue(RUN_BATCH_JOB, created_by=user if user and user.is_authenticated else None, batch_id=batch.pk)
    SynthesisBatch.objects.filter(pk=batch.pk).update(job_run=run)
    batch.job_run = run


def _rerun_qa(batch: SynthesisBatch) -> int:
    """Send the items that were not kept and had reached QA back to it; returns how many."""
    count = 0
    for item in batch.items.filter(stage="qa").exclude(status=SynthesisItem.Status.KEPT).exclude(
        status=SynthesisItem.Status.RUNNING
    ):  # fmt: skip
        results = {k: v for k, v in item.stage_results.items() if k != "qa"}
        draft = {k: v for k, v in item.draft.items() if k != "qa"}
        count += SynthesisItem.objects.filter(pk=item.pk, status=item.status).update(
            status=SynthesisItem.Status.PENDING, stage_results=results, draft=draft, reason="", worker=""
        )
    return count


def _retry_failures(batch: SynthesisBatch) -> int:
    """Failed items whose failure was retryable go back to pending at the stage that failed."""
    count = 0
    for item in batch.items.filter(status=SynthesisItem.Status.FAILED):
        if not (item.stage_results.get(item.stage) or {}).get("retryable"):
            continue
        results = {k: v for k, v in item.stage_results.items() if k != item.stage}
        count += SynthesisItem.objects.filter(pk=item.pk, status=SynthesisItem.Status.FAILED).update(
            status=SynthesisItem.Status.PENDING, stage_results=results, reason=""
        )
    return count


def resume_batch(
    batch: SynthesisBatch,
    config: dict | None = None,
    *,
    budget_usd=_UNSET,
    budget_tokens=_UNSET,
    user,
    here: bool = False,
) -> SynthesisBatch:
    """Go on with the batch: what it has not finished, retryable failures, items a dead worker left running.

    `config` (a batch_config dict) that differs from the batch's is refused (BatchError naming the keys) unless
    only the judge, qa_thresholds and options["qa_stages"] differ: then those are taken and the QA stage is run
    again on the items not kept. `budget_usd` / `budget_tokens` replace the budget (None: no limit); a paused
    batch still over its budget pauses again at its next model call. A complete batch with nothing to retry
    stays complete.
    """
    batch = SynthesisBatch.objects.select_related("generator", "judge").get(pk=batch.pk)
    rerun_qa = False
    updates = {}
    if config is not None:
        changed = config_differences(batch.config, config)
        refused = [key for key in changed if key.removeprefix("options.") not in QA_KEYS]
        if refused:
            raise BatchError(f"batch #{batch.pk} was started with another {', '.join(refused)}; only the judge and "
                             "the QA settings may change on resume (they rerun QA): start a new batch")  # fmt: skip
        if changed:
            rerun_qa = True
            updates.update(config=config, config_hash=config_hash(config), qa_thresholds=config["qa_thresholds"],
                           options=config["options"], judge=_endpoint(config["judge"]["name"]))  # fmt: skip
    if budget_usd is not _UNSET:
        updates["budget_usd"] = _budget(budget_usd, Decimal)
    if budget_tokens is not _UNSET:
        updates["budget_tokens"] = _budget(budget_tokens, int)
    with transaction.atomic():
        if updates:
            SynthesisBatch.objects.filter(pk=batch.pk).update(**updates)
        pipeline.reclaim_lost_items(batch)
        redo = (_rerun_qa(batch) if rerun_qa else 0) + _retry_failures(batch)
        left = batch.items.exclude(status__in=SynthesisItem.FINISHED).exists()
        if batch.status == SynthesisBatch.Status.COMPLETE and not redo and not left:
            batch.refresh_from_db()
            return batch
        SynthesisBatch.objects.filter(pk=batch.pk).update(
            status=SynthesisBatch.Status.QUEUED, status_reason="", finished_at=None
        )
        batch.refresh_from_db()
        if not here:
            _queue(batch, user=user)
    return batch


def cancel_batch(batch: SynthesisBatch, *, user) -> SynthesisBatch:
    """Stop the batch: no item starts another stage (a stage running now finishes and is recorded). Its
    unfinished items stay pending, so `resume_batch` can go on with them."""
    SynthesisBatch.objects.filter(pk=batch.pk).exclude(status__in=SynthesisBatch.FINISHED).update(
        status=SynthesisBatch.Status.CANCELLED, finished_at=timezone.now(),
        status_reason=f"cancelled by {user}" if user and user.is_authenticated else "cancelled",
    )  # fmt: skip
    if batch.job_run_id:  # queued item jobs end at once; running ones stop between stages anyway
        for run in JobRun.objects.filter(parent_id=batch.job_run_id).exclude(status__in=JobRun.FINISHED):
            cancel_job(run, user=user)
    batch.refresh_from_db()
    return batch


def begin(batch: SynthesisBatch) -> None:
    """The batch is being worked on (from queued)."""
    SynthesisBatch.objects.filter(pk=batch.pk, status=SynthesisBatch.Status.QUEUED).update(
        status=SynthesisBatch.Status.RUNNING, started_at=timezone.now()
    )


def run_here(batch: SynthesisBatch, *, backend=None, on_item=None) -> SynthesisBatch:
    """Run the batch's pending items one after another in this process (`synthesize --here`), until none is
    left or the batch is paused or cancelled; the batch finishes as it would on the workers."""
    begin(batch)
    pipeline.reclaim_lost_items(batch)
    while True:
        status = SynthesisBatch.objects.filter(pk=batch.pk).values_list("status", flat=True).get()
        item = batch.items.filter(status=SynthesisItem.Status.PENDING).order_by("index").first()
        if item is None or status not in pipeline.RUNNABLE:
            break
        done = pipeline.run_item(item.pk, backend=backend)
        if on_item and done is not None:
            on_item(done)
    pipeline.maybe_finish(batch.pk)
    batch.refresh_from_db()
    return batch


# --- seeds: personas --------------------------------------------------------------------------------------------------


def import_personas(path_or_file, *, source: str | None = None) -> ImportReport:
    """Import the personas of a JSONL or plain-text file (a path or an open file). Raises SeedError when it cannot
    be opened; a line that cannot be used is a failure in the report, the rest are imported."""
    stream, name, release = open_text(path_or_file)
    report = ImportReport()
    source = source or name
    try:
        pending: dict[str, str] = {}  # hash -> text, in file order
        for number, text, error in read_personas(stream, name):
            where = f"{name}:{number}"
            if error:
                report.fail(where, error)
            elif len(text) > MAX_PERSONA_CHARS:
                report.fail(where, f"the persona has {len(text):,} characters (at most {MAX_PERSONA_CHARS:,})")
            else:
                key = persona_hash(text)
                if key in pending:
                    report.unchanged += 1  # the same persona twice in one file
                else:
                    pending[key] = " ".join(text.split())
            if len(pending) >= BATCH:
                _save_personas(pending, source, report)
                pending = {}
        _save_personas(pending, source, report)
    finally:
        if release == "close":
            stream.close()
        elif release == "detach":
            stream.detach()
    return report


def _save_personas(pending: dict[str, str], source: str, report: ImportReport) -> None:
    if not pending:
        return
    with transaction.atomic():
        known = set(Persona.objects.filter(text_hash__in=pending).values_list("text_hash", flat=True))
        new = [
            Persona(text=text, text_hash=key, source=source[:200]) for key, text in pending.items() if key not in known
        ]
        # ignore_conflicts: another import adding the same persona meanwhile is not an error (it is there).
        Persona.objects.bulk_create(new, ignore_conflicts=True)
    report.imported += len(new)
    report.unchanged += len(known)


# --- seeds: skills ----------------------------------------------------------------------------------------------------


def import_skills(path=None, *, bundled: bool = False, source: str | None = None) -> ImportReport:
    """Import every skill at `path` (or the bundled ones). Each skill is saved on its own; one that fails is in
    the report's `failed` and the others go on. Raises SkillImportError when the input cannot be read at all."""
    if bundled == (path is not None):
        raise ValueError("import_skills needs a path or bundled=True, not both")
    if bundled:
        path, source = bundled_skills_dir(), source or BUNDLED_SOURCE
    path = Path(path)
    if path.name == SKILL_FILE and path.is_file():  # the SKILL.md of a folder: that folder
        path = path.parent
    report = ImportReport()
    try:
        with opened(path) as root:
            if root.is_file():  # a .jsonl: the task reader's other kind of input, never a skill
                raise SkillImportError(f"{path.name} is not a folder or an archive of skill folders")
            folders = find_skill_folders(root)
            if not folders:
                raise SkillImportError(f"found no skill folder (a folder with {SKILL_FILE}) in {path.name}")
            first_seen: dict[str, str] = {}
            for folder in folders:
                where = folder.relative_to(root).as_posix()
                where = path.name if where == "." else f"{path.name}/{where}"
                _import_one(folder, where, source or str(path), report, first_seen)
    except FormatError as exc:  # ArchiveError included: an unsafe or unreadable archive
        raise SkillImportError(str(exc)) from None
    return report


def _import_one(folder: Path, where: str, source: str, report: ImportReport, first_seen: dict[str, str]) -> None:
    try:
        parsed = parse_skill_folder(folder)
    except (SkillError, OSError) as exc:
        report.fail(printable(where), str(exc))
        return
    if parsed.name in first_seen:
        report.fail(printable(where), f"the skill name {parsed.name!r} is also that of {first_seen[parsed.name]}")
        return
    first_seen[parsed.name] = where
    outcome = save_skill(parsed, source=source[:500])
    if outcome == "imported":
        report.imported += 1
    elif outcome == "updated":
        report.updated += 1
    else:
        report.unchanged += 1


def save_skill(parsed: ParsedSkill, *, source: str) -> str:
    """Create or replace the skill named `parsed.name`: "imported", "updated" or "unchanged"."""
    content_hash = parsed.content_hash
    fields = {
        "description": parsed.description, "source": source, "front_matter": parsed.front_matter,
        "required_bins": parsed.required_bins, "required_env": parsed.required_env,
        "primary_env": parsed.primary_env, "content_hash": content_hash, "skipped_files": parsed.skipped,
    }  # fmt: skip
    with transaction.atomic():
        skill = Skill.objects.select_for_update().filter(name=parsed.name).first()
        if skill is not None and skill.content_hash == content_hash:
            return "unchanged"
        outcome = "imported" if skill is None else "updated"
        if skill is None:
            skill = Skill.objects.create(name=parsed.name, **fields)
        else:
            for key, value in fields.items():
                setattr(skill, key, value)
            skill.save()
            skill.files.all().delete()
        blobs = store_blobs(list(parsed.files.values()))
        SkillFile.objects.bulk_create(
            SkillFile(skill=skill, path=path, blob=blobs[Blob.digest(data)]) for path, data in parsed.files.items()
        )
    return outcome


# --- seeds: annotating skills and overriding their label --------------------------------------------------------------


def _fail(skill: Skill, reason: str) -> AnnotationFailed:
    Skill.objects.filter(pk=skill.pk).update(annotation_error=reason[:5000], updated_at=timezone.now())
    skill.annotation_error = reason[:5000]
    return AnnotationFailed(reason)


def annotate_skill(skill: Skill, endpoint: ModelEndpoint) -> SkillAnnotation:
    """Ask the model about the skill and store its annotation. Raises AnnotationFailed (recorded on the skill)."""
    try:
        answer, call = complete_json(
            endpoint, annotation_messages(skill), ANNOTATION_SCHEMA, purpose=ANNOTATE_PURPOSE,
            subject=f"skill:{skill.name}", served=skill, repairs=1,
        )  # fmt: skip
    except (ModelCallError, MissingApiKey, EndpointBusy) as exc:  # InvalidJsonAnswer is a ModelCallError
        raise _fail(skill, f"annotation by {endpoint.name} failed: {exc}") from None
    return store_annotation(skill, answer, endpoint=endpoint, call=call)


def store_annotation(skill: Skill, answer: dict, *, endpoint: ModelEndpoint, call=None) -> SkillAnnotation:
    """Store an answer that matched ANNOTATION_SCHEMA, with the binaries the runtime lacks and the label."""
    missing = missing_bins(skill)
    declared = [*skill.required_env, *([skill.primary_env] if skill.primary_env else [])]
    env = list(dict.fromkeys([*declared, *(e.strip() for e in answer["required_env"] if e.strip())]))
    annotation = SkillAnnotation.objects.create(
        skill=skill, summary=answer["summary"].strip(), core_content=answer["core_content"].strip(),
        auth_required=answer["auth_required"], required_env=env,
        input_format=answer["input_format"].strip(), output_format=answer["output_format"].strip(),
        text_only_compatible=answer["text_only_compatible"], risk=answer["risk"],
        risk_reason=answer["risk_reason"].strip(), missing_bins=missing,
        synthesizable=not answer["auth_required"] and answer["text_only_compatible"] and not missing,
        endpoint_name=endpoint.name, prompt_version=ANNOTATE_PROMPT_VERSION, model_call=call,
    )  # fmt: skip
    Skill.objects.filter(pk=skill.pk).update(annotation_error="")
    skill.annotation_error = ""
    return annotation


def annotate_skills(
    skills: Iterable[Skill],
    endpoint: ModelEndpoint,
    *,
    on_result: Callable[[AnnotationResult], None] | None = None,
) -> list[AnnotationResult]:
    """Annotate each skill, one call after another, in order; a failure is a result with its error (and on the
    skill), never a skipped skill. `on_result` hears of each as it is stored (it may raise to stop, e.g. a
    cancelled job). Raises AnnotationError when the endpoint has no API key (every call would fail alike)."""
    try:
        endpoint.api_key()
    except MissingApiKey as exc:
        raise AnnotationError(str(exc)) from None
    results = []
    for skill in skills:
        try:
            result = AnnotationResult(skill, annotate_skill(skill, endpoint))
        except AnnotationFailed as exc:
            result = AnnotationResult(skill, None, str(exc))
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def set_override(skill: Skill, value: bool | None, *, reason: str, user) -> Skill:
    """Set (True/False) or clear (None) the admin's decision over the annotation's label. A decision needs a
    reason; clearing keeps none."""
    reason = (reason or "").strip()
    if value is not None and not reason:
        raise ValueError("say why the label is overridden (a reason is required)")
    skill.synthesizable_override = value
    skill.override_reason = reason if value is not None else ""
    skill.override_by = user if value is not None and user is not None and user.is_authenticated else None
    skill.save(update_fields=["synthesizable_override", "override_reason", "override_by", "updated_at"])
    return skill


def start_annotation(*, user, endpoint_name: str | None = None, skill_ids: list[int] | None = None):
    """Queue the annotate job (of `skill_ids`, or of every skill); returns its JobRun. Raises AnnotationError when no
    endpoint could serve it (checked now, so a page says so at once), jobs.engine.JobEngineError when the engine
    refuses the job."""
    annotator_endpoint(endpoint_name)
    total = Skill.objects.count() if skill_ids is None else len(skill_ids)
    return jobs.enqueue(ANNOTATE_JOB, created_by=user, total=total, skill_ids=skill_ids, endpoint=endpoint_name)


# --- quality assessment -----------------------------------------------------------------------------------------------


def assess_revision(
    revision, stages, *, judge, user, item=None, thresholds=None, pool=None
) -> dict[str, QualityAssessment]:
    """Assess a task revision and store each stage's verdict as a QualityAssessment row (append-only: the latest
    per revision and stage is the one shown). The model calls' subject is "task:<external id>"."""
    task = qa_task_from_revision(revision)
    verdicts = assess(task, list(stages), judge=judge, thresholds=thresholds, pool=pool,
                      subject=f"task:{task.external_id}")  # fmt: skip
    person = user if user is not None and user.is_authenticated else None
    stored = {}
    for stage, v in verdicts.items():
        stored[stage] = QualityAssessment.objects.create(
            revision=revision, stage=stage, verdict=v.verdict, reason=v.reason, details=v.details,
            endpoint_name=v.endpoint_name, prompt_version=v.prompt_version, model_call_id=v.model_call_id,
            item=item, created_by=person,
        )  # fmt: skip
    return stored


def assess_tasks(tasks, stages, *, judge, user, on_assessed=None) -> dict[str, dict[str, QualityAssessment]]:
    """assess_revision for each task's current revision, one after another, sharing one novelty pool (the
    catalog's). {external id: {stage: row}}; `on_assessed(task, rows)` hears of each as it is stored."""
    pool = None
    if QAStage.NOVELTY in stages:
        try:
            pool = catalog_index()
        except (ImportError, OSError, ValueError):
            pool = None  # each task's novelty verdict says why (an "error")
    done = {}
    for task in tasks:
        rows = assess_revision(task.current_revision, stages, judge=judge, user=user, pool=pool)
        done[task.external_id] = rows
        if on_assessed is not None:
            on_assessed(task, rows)
    return done


def start_assessment(*, user, task_ids: list[str] | None = None, stages: list[str] | None = None,
                     judge: str | None = None):  # fmt: skip
    """Queue an assessment of `task_ids` (external ids; None: every task with a revision); returns its JobRun.
    Raises QAError (unknown stage, no judge) before queuing, and jobs.engine.JobEngineError."""
    stages = parse_stages(",".join(stages) if stages else None)
    judge_endpoint(judge, stages)
    total = (Task.objects.filter(current_revision__isnull=False) if task_ids is None else
             Task.objects.filter(external_id__in=task_ids, current_revision__isnull=False)).count()  # fmt: skip
    return jobs.enqueue(ASSESS_JOB, created_by=user, total=total, task_ids=task_ids, stages=stages, judge=judge)
