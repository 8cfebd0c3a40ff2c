"""The seeds of the two routes: importing personas and skills, annotating skills and overriding their label."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from django.db import transaction
from django.utils import timezone

import jobs
from llm.client import EndpointBusy, MissingApiKey, ModelCallError, complete_json
from llm.models import ModelEndpoint
from tasks.formats import FormatError
from tasks.formats.archive import opened
from tasks.importing import ImportReport
from tasks.models import Blob
from tasks.paths import printable
from tasks.services import store_blobs

from ..annotation import (
    ANNOTATE_PROMPT_VERSION,
    ANNOTATE_PURPOSE,
    ANNOTATION_SCHEMA,
    AnnotationError,
    AnnotationFailed,
    AnnotationResult,
    annotation_messages,
    annotator_endpoint,
)
from ..job_kinds import ANNOTATE_JOB
from ..models import Persona, Skill, SkillAnnotation, SkillFile
from ..seed_files import BATCH, MAX_PERSONA_CHARS, open_text, persona_hash, read_personas
from ..skills import (
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

# --- personas ---------------------------------------------------------------------------------------------------------


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


# --- skills -----------------------------------------------------------------------------------------------------------


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
        "description": parsed.description,
        "source": source,
        "front_matter": parsed.front_matter,
        "required_bins": parsed.required_bins,
        "required_env": parsed.required_env,
        "primary_env": parsed.primary_env,
        "content_hash": content_hash,
        "skipped_files": parsed.skipped,
    }
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


# --- annotating skills and overriding their label ---------------------------------------------------------------------


def _fail(skill: Skill, reason: str) -> AnnotationFailed:
    Skill.objects.filter(pk=skill.pk).update(annotation_error=reason[:5000], updated_at=timezone.now())
    skill.annotation_error = reason[:5000]
    return AnnotationFailed(reason)


def annotate_skill(skill: Skill, endpoint: ModelEndpoint) -> SkillAnnotation:
    """Ask the model about the skill and store its annotation. Raises AnnotationFailed (recorded on the skill)."""
    try:
        answer, call = complete_json(
            endpoint,
            annotation_messages(skill),
            ANNOTATION_SCHEMA,
            purpose=ANNOTATE_PURPOSE,
            subject=f"skill:{skill.name}",
            served=skill,
            repairs=1,
        )
    except (ModelCallError, MissingApiKey, EndpointBusy) as exc:  # InvalidJsonAnswer is a ModelCallError
        raise _fail(skill, f"annotation by {endpoint.name} failed: {exc}") from None
    return store_annotation(skill, answer, endpoint=endpoint, call=call)


def store_annotation(skill: Skill, answer: dict, *, endpoint: ModelEndpoint, call=None) -> SkillAnnotation:
    """Store an answer that matched ANNOTATION_SCHEMA, with the binaries the runtime lacks and the label."""
    missing = missing_bins(skill)
    declared = [*skill.required_env, *([skill.primary_env] if skill.primary_env else [])]
    env = list(dict.fromkeys([*declared, *(e.strip() for e in answer["required_env"] if e.strip())]))
    annotation = SkillAnnotation.objects.create(
        skill=skill,
        summary=answer["summary"].strip(),
        core_content=answer["core_content"].strip(),
        auth_required=answer["auth_required"],
        required_env=env,
        input_format=answer["input_format"].strip(),
        output_format=answer["output_format"].strip(),
        text_only_compatible=answer["text_only_compatible"],
        risk=answer["risk"],
        risk_reason=answer["risk_reason"].strip(),
        missing_bins=missing,
        synthesizable=not answer["auth_required"] and answer["text_only_compatible"] and not missing,
        endpoint_name=endpoint.name,
        prompt_version=ANNOTATE_PROMPT_VERSION,
        model_call=call,
    )
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
