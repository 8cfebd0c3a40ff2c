"""Quality assessment of the finished draft: synthesis.qa_checks.assess with the batch's judge and thresholds.

The stages asked are the batch's options["qa_stages"] (default: all of QAStage). Novelty compares with the whole
catalog pool, which holds the tasks this batch kept before (they enter the catalog as they are kept), and with the
batch's drafts not there yet (batch_drafts): those that passed QA and wait for the catalog stage, and those of a
lower index being assessed at the same moment on another worker (of two near-duplicates the earlier item wins).
Any "fail" rejects the item at "qa:<stage>" (the first failing stage, in QAStage order; every verdict is kept);
an "error" (the judge unreachable, no verdict) fails the item at "qa", to be tried again when the batch is
resumed. The verdicts travel in the draft to the catalog stage, which stores them as QualityAssessment rows.
"""

from __future__ import annotations

from django.db.models import Q

from llm.models import ModelCall
from synthesis import qa_checks

from ..llm_json import StageFailure, add_usage, check_budget
from ..models import QAStage, Stage, SynthesisItem
from ..pipeline import FAIL, PASS, SKIPPED, StageResult
from .catalog import external_id

STAGE = "qa"
DEFAULT_STAGES = [s.value for s in QAStage]


def qa_task(item):
    draft = item.draft
    return qa_checks.QATask(
        instruction=draft["instruction"],
        input_files={path: text.encode() for path, text in draft["files"].items()},
        checker_files={path: text.encode() for path, text in draft["checker"].items()},
        rubric=draft.get("rubric") or [],
        category=draft.get("category"),
        subcategory=draft.get("subcategory"),
        external_id=f"synthesis-item-{item.pk}",
        expected_behavior=draft.get("expected_behavior", ""),
    )


def batch_drafts(item) -> list[tuple[str, str, str | None]]:
    """(the id it will have in the catalog, instruction, subcategory group) of the batch's other drafts that novelty
    compares the item with besides the catalog: past QA and not in the catalog yet, or of a lower index and in QA
    now."""
    from synthesis.novelty import group_of

    Status = SynthesisItem.Status
    waiting = Q(stage=Stage.CATALOG, status__in=(Status.PENDING, Status.RUNNING))
    assessed_now = Q(stage=Stage.QA, status=Status.RUNNING, index__lt=item.index)
    others = SynthesisItem.objects.filter(waiting | assessed_now, batch_id=item.batch_id).exclude(pk=item.pk)
    found = []
    for other in others.order_by("index").only("batch_id", "index", "draft"):
        draft = other.draft
        if draft.get("instruction"):
            group = group_of(draft.get("category"), draft.get("subcategory"))
            found.append((external_id(other), draft["instruction"], group))
    return found


def _as_dict(verdict) -> dict:
    return {
        "verdict": verdict.verdict,
        "reason": verdict.reason,
        "details": verdict.details or {},
        "model_call_id": verdict.model_call_id,
        "endpoint_name": verdict.endpoint_name,
        "prompt_version": verdict.prompt_version,
    }


def run(item, ctx):
    stages = ctx.options.get("qa_stages", DEFAULT_STAGES)
    if not stages:
        return StageResult(SKIPPED, "no quality-assessment stages were asked for this batch", data={"qa": {}})
    check_budget(item.batch_id)
    before = ModelCall.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    try:
        # reuse_answers: a batch resumed in the middle of QA asks the judge nothing it has the answer of (answers are
        # matched by judge endpoint, so a new judge is asked again).
        also = batch_drafts(item) if QAStage.NOVELTY in stages else None
        verdicts = qa_checks.assess(
            qa_task(item),
            stages,
            judge=ctx.judge,
            thresholds=ctx.batch.qa_thresholds or None,
            also=also,
            subject=item.subject,
            reuse_answers=True,
        )
    finally:
        for call in ModelCall.objects.filter(subject=item.subject, pk__gt=before):
            add_usage(item, call)
    found = {stage: _as_dict(verdicts[stage]) for stage in stages if stage in verdicts}
    details = {"verdicts": found}
    errors = [f"{stage}: {v['reason']}" for stage, v in found.items() if v["verdict"] == "error"]
    missing = [stage for stage in stages if stage not in found]
    if errors or missing:
        reason = "; ".join(errors + [f"{stage}: no verdict" for stage in missing])
        raise StageFailure(f"qa: {reason}", retryable=True, details=details)  # the funnel tells which step failed
    failing = [stage for stage in DEFAULT_STAGES if found.get(stage, {}).get("verdict") == "fail"]
    if failing:
        first = found[failing[0]]
        reason = first["reason"]
        nearest = first["details"].get("nearest")
        if failing[0] == QAStage.NOVELTY and nearest and str(nearest) not in reason:
            reason += f" (nearest: {nearest}, similarity {first['details'].get('similarity')})"
        return StageResult(FAIL, reason, data={"qa": found}, details=details, rejected_at=f"qa:{failing[0]}")
    return StageResult(PASS, "", data={"qa": found}, details=details)
