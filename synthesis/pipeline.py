"""The runner: one item through its remaining stages, each stage's result recorded before the next starts.

    run_item(item_id)            # claim it (pending → running), run what is left, record how it ended

A stage is a module of synthesis/stages with `run(item, ctx) -> StageResult`. The runner, and only the runner,
writes the item: the stage's result goes into item.stage_results[stage], its data into item.draft, and the item
moves to the next stage, or ends:
- verdict "fail": rejected at that stage (rejected stage and reason kept; QA stages as "qa:<stage>");
- StageFailure: failed at that stage (a stage that could not run after its retries), with the reason; a
  retryable failure (model or sandbox unreachable, a QA "error") is tried again when the batch is resumed;
- BudgetReached: the batch was paused; the item goes back to pending at the same stage;
- any other exception: failed at that stage with the exception named (never silently dropped).
A stage's result is stored only once it has finished, in an UPDATE conditional on this worker still owning the
item, so a finished stage is never run again and a worker that lost the item writes nothing.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.utils import timezone

from jobs.models import JobRun
from jobs.runner import lost_reason, worker_gone, worker_id
from llm.models import ModelEndpoint
from sandbox import Backend
from tasks.verification import checker_backend

from .llm_json import BudgetReached, StageFailure
from .models import STAGE_ORDER, Route, Stage, SynthesisBatch, SynthesisItem

log = logging.getLogger(__name__)

PASS, FAIL, SKIPPED, ERROR = "pass", "fail", "skipped", "error"
RUNNABLE = (SynthesisBatch.Status.QUEUED, SynthesisBatch.Status.RUNNING)


@dataclass
class StageResult:
    verdict: str  # pass | fail | skipped (a skipped stage passes the item on, e.g. a rubric not needed)
    reason: str = ""
    data: dict = field(default_factory=dict)  # merged into item.draft
    details: dict = field(default_factory=dict)  # kept with the verdict in item.stage_results[stage]
    rejected_at: str = ""  # the stage named when rejected, if not the stage itself (e.g. "qa:novelty")

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, **self.details}


@dataclass
class StageContext:
    """What every stage of one batch needs: the batch, its endpoints and the sandbox."""

    batch: SynthesisBatch
    generator: ModelEndpoint
    judge: ModelEndpoint
    backend: Backend | None = None

    @classmethod
    def for_batch(cls, batch: SynthesisBatch, backend: Backend | None = None) -> StageContext:
        return cls(batch=batch, generator=batch.generator, judge=batch.judge, backend=backend)

    @property
    def options(self) -> dict:
        return self.batch.options or {}

    def sandbox(self) -> Backend:
        if self.backend is None:
            self.backend = checker_backend()
        return self.backend


def stage_module(stage: str, route: str):
    name = stage
    if stage == Stage.GENERATE:
        name = "generate_skill" if route == Route.SKILL else "generate_persona"
    return importlib.import_module(f"synthesis.stages.{name}")


def _owned(item: SynthesisItem, worker: str):
    return SynthesisItem.objects.filter(pk=item.pk, status=SynthesisItem.Status.RUNNING, worker=worker)


def claim_item(item_id: int, *, job_run: JobRun | None = None, worker: str | None = None) -> SynthesisItem | None:
    """Take a pending item (conditional UPDATE pending → running): two deliveries never both run it."""
    worker = worker or worker_id()
    claimed = SynthesisItem.objects.filter(pk=item_id, status=SynthesisItem.Status.PENDING).update(
        status=SynthesisItem.Status.RUNNING, worker=worker, job_run=job_run, updated_at=timezone.now()
    )
    if not claimed:
        return None
    return SynthesisItem.objects.select_related("batch__generator", "batch__judge").get(pk=item_id)


def item_lost(item: SynthesisItem) -> str:
    """Why a running item is taken to be lost ("" while its worker is believed alive)."""
    if item.status != SynthesisItem.Status.RUNNING:
        return ""
    if item.worker and worker_gone(item.worker):
        return f"its worker {item.worker} exited before the item finished"
    run = item.job_run
    if run is not None and run.is_finished:
        return f"its job run #{run.pk} ended {run.status} while the item was still running"
    if run is not None and lost_reason(run):
        return f"its job run #{run.pk} was lost: {lost_reason(run)}"
    return ""


def reclaim_lost_items(batch: SynthesisBatch | None = None) -> list[int]:
    """Put running items whose worker is gone back to pending, at the stage they had reached (their finished
    stages are kept, so nothing finished is run again). Returns their ids."""
    running = SynthesisItem.objects.filter(status=SynthesisItem.Status.RUNNING).select_related("job_run")
    if batch is not None:
        running = running.filter(batch=batch)
    reclaimed = []
    for item in running:
        reason = item_lost(item)
        if not reason:
            continue
        back = SynthesisItem.objects.filter(pk=item.pk, status=SynthesisItem.Status.RUNNING, worker=item.worker).update(
            status=SynthesisItem.Status.PENDING, worker="", job_run=None
        )
        if back:
            log.warning("synthesis item %s reclaimed: %s", item.pk, reason)
            reclaimed.append(item.pk)
    return reclaimed


def _end(item: SynthesisItem, worker: str, status: str, stage: str, reason: str, results: dict) -> bool:
    return bool(
        _owned(item, worker).update(
            status=status, stage=stage, reason=reason[:10_000], stage_results=results, updated_at=timezone.now()
        )
    )


def _back_to_pending(item: SynthesisItem, worker: str) -> None:
    _owned(item, worker).update(status=SynthesisItem.Status.PENDING, worker="", job_run=None)


def run_stages(item: SynthesisItem, ctx: StageContext, worker: str) -> SynthesisItem:
    """Run the claimed item's remaining stages; returns it as stored."""
    start = STAGE_ORDER.index(item.stage)
    for stage in STAGE_ORDER[start:]:
        batch_status = SynthesisBatch.objects.filter(pk=item.batch_id).values_list("status", flat=True).first()
        if batch_status not in RUNNABLE:  # paused or cancelled meanwhile: leave the item where it is
            _back_to_pending(item, worker)
            break
        attempts = {**item.attempts, stage: item.attempts.get(stage, 0) + 1}
        if not _owned(item, worker).update(stage=stage, attempts=attempts):
            return SynthesisItem.objects.get(pk=item.pk)  # not ours any more
        item.stage, item.attempts = stage, attempts
        try:
            result = stage_module(stage, ctx.batch.route).run(item, ctx)
        except BudgetReached:
            _back_to_pending(item, worker)
            break
        except StageFailure as exc:
            results = {
                **item.stage_results,
                stage: {**exc.details, "verdict": ERROR, "reason": exc.reason, "retryable": exc.retryable},
            }
            _end(item, worker, SynthesisItem.Status.FAILED, stage, exc.reason, results)
            break
        except Exception as exc:  # a defect, not the task's fault: recorded, never dropped
            log.exception("synthesis item %s, stage %s", item.pk, stage)
            reason = f"{stage}: {type(exc).__name__}: {exc}"
            results = {**item.stage_results, stage: {"verdict": ERROR, "reason": reason, "retryable": False}}
            _end(item, worker, SynthesisItem.Status.FAILED, stage, reason, results)
            break
        results = {**item.stage_results, stage: result.as_dict()}
        draft = {**item.draft, **result.data}
        if result.verdict == FAIL:
            at = result.rejected_at or stage
            results[stage]["rejected_at"] = at
            _owned(item, worker).update(draft=draft)
            _end(item, worker, SynthesisItem.Status.REJECTED, stage, f"{at}: {result.reason}", results)
            break
        following = STAGE_ORDER[STAGE_ORDER.index(stage) + 1 :]
        if not following:  # catalog passed: the task is in the catalog
            _owned(item, worker).update(draft=draft, task_id=result.details.get("task_pk"))
            _end(item, worker, SynthesisItem.Status.KEPT, stage, "", results)
            break
        if not _owned(item, worker).update(stage=following[0], draft=draft, stage_results=results):
            break
        item.stage, item.draft, item.stage_results = following[0], draft, results
    return SynthesisItem.objects.get(pk=item.pk)


def run_item(item_id: int, *, job_run: JobRun | None = None, backend: Backend | None = None) -> SynthesisItem | None:
    """Claim the item and run its remaining stages; then finish the batch when this was its last item.

    Returns the item as stored, or None when it was not pending (another worker has it, or it is finished)."""
    worker = worker_id()
    item = claim_item(item_id, job_run=job_run, worker=worker)
    if item is None:
        return None
    ctx = StageContext.for_batch(item.batch, backend=backend)
    try:
        item = run_stages(item, ctx, worker)
    finally:
        _back_to_pending(item, worker)  # only if an unexpected error left it running
        maybe_finish(item.batch_id)
    return item


def maybe_finish(batch_id: int) -> bool:
    """Finish the batch once every item is kept, rejected or failed: complete, or failed when every item failed
    (a batch that made nothing is no success; resuming it retries the retryable failures)."""
    items = SynthesisItem.objects.filter(batch_id=batch_id)
    if items.exclude(status__in=SynthesisItem.FINISHED).exists():
        return False
    status, reason = SynthesisBatch.Status.COMPLETE, ""
    failed = items.filter(status=SynthesisItem.Status.FAILED)
    if items.exists() and not items.exclude(status=SynthesisItem.Status.FAILED).exists():
        status, reason = SynthesisBatch.Status.FAILED, all_failed_reason(failed)
    return bool(
        SynthesisBatch.objects.filter(Q(pk=batch_id), Q(status__in=RUNNABLE)).update(
            status=status, finished_at=timezone.now(), status_reason=reason
        )
    )


def all_failed_reason(failed) -> str:
    """ "All 9 items failed; most at the files stage: <its first reason>", for the batch's status_reason."""
    count = failed.count()
    common = failed.order_by().values("stage").annotate(n=Count("pk")).order_by("-n", "stage").first()
    first = failed.filter(stage=common["stage"]).order_by("index").values_list("reason", flat=True).first() or ""
    which = "Its only item" if count == 1 else f"All {count} items"
    stage = Stage(common["stage"]).label.lower()
    return f"{which} failed, {'at' if count == 1 else 'most at'} the {stage} stage: {first}"[:500]
