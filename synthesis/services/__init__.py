"""Every state change of synthesis, one function each: the pages (synthesis.views), the API (synthesis.api), the
commands and the jobs validate what they are given and call these, by the names this package gives them (its
modules: batches; seeds, for personas, skills and their annotations; qa, for stored quality assessments).

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

What these build on stays with its concept: drawing a batch's items and its configuration in synthesis.batch_plan
and the figures of what it produced in synthesis.batch_report (the items run through synthesis.pipeline and its
stages); reading personas and operations in synthesis.seed_files; parsing skill folders in synthesis.skills; the
annotation prompt and the synthesizable rule in synthesis.annotation; the quality-assessment verdicts in
synthesis.qa_checks.
"""

from .batches import begin, cancel_batch, resume_batch, run_here, start_batch
from .qa import assess_revision, assess_tasks, start_assessment
from .seeds import (
    annotate_skill,
    annotate_skills,
    import_personas,
    import_skills,
    save_skill,
    set_override,
    start_annotation,
    store_annotation,
)

__all__ = [
    "annotate_skill",
    "annotate_skills",
    "assess_revision",
    "assess_tasks",
    "begin",
    "cancel_batch",
    "import_personas",
    "import_skills",
    "resume_batch",
    "run_here",
    "save_skill",
    "set_override",
    "start_annotation",
    "start_assessment",
    "start_batch",
    "store_annotation",
]
