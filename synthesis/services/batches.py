"""Batches: start one (or go on with the earlier batch of its configuration), resume, cancel, and run one in this
process (synthesis.batch_plan's docstring says how a batch is drawn and what a resume may change)."""

from __future__ import annotations

import random
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

import jobs
from jobs.services import cancel_children
from llm.models import ModelEndpoint

from .. import pipeline
from ..batch_plan import (
    MAX_COUNT,
    PREVIEW_COUNT,
    QA_KEYS,
    BatchError,
    batch_config,
    config_differences,
    config_hash,
    draw_seeds,
    retryable,
)
from ..job_kinds import RUN_BATCH_JOB
from ..models import Route, SynthesisBatch, SynthesisItem

_UNSET = object()


def _endpoint(value) -> ModelEndpoint:
    if isinstance(value, ModelEndpoint):
        return value
    found = ModelEndpoint.objects.filter(name=value).first()
    if found is None:
        known = ", ".join(ModelEndpoint.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise BatchError(f"no model endpoint named {value!r} (known: {known}); add one with `endpoints add`")
    if not found.enabled:
        # Refused here, where every way in (form, API, command) passes, rather than by the first stage's call.
        raise BatchError(f"model endpoint {found.name!r} is disabled: enable it on the Models page (/llm/endpoints/)")
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
    """Create the batch and its items (or resume the earlier batch of this configuration, see synthesis.batch_plan's
    docstring), and queue it on the job workers unless `here` (then call run_here). Raises BatchError."""
    if route not in Route.values:
        raise BatchError(f"unknown route {route!r}; choose one of {', '.join(Route.values)}")
    count = PREVIEW_COUNT if preview else int(count)
    if not 1 <= count <= MAX_COUNT:
        raise BatchError(f"the count must be between 1 and {MAX_COUNT:,}")
    generator, judge = _endpoint(generator), _endpoint(judge)
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    options = dict(options or {})
    config = batch_config(
        route=route,
        count=count,
        generator=generator,
        judge=judge,
        seed=seed,
        preview=preview,
        options=options,
        qa_thresholds=qa_thresholds,
    )
    digest = config_hash(config)
    budgets = {"budget_usd": _budget(budget_usd, Decimal), "budget_tokens": _budget(budget_tokens, int)}
    earlier = SynthesisBatch.objects.filter(config_hash=digest).order_by("pk").first()
    if earlier is not None:
        return resume_batch(earlier, user=user, here=here, **budgets)
    seeds = draw_seeds(route, count, seed, options)
    with transaction.atomic():
        batch = SynthesisBatch.objects.create(
            name=name,
            route=route,
            requested=count,
            preview=preview,
            generator=generator,
            judge=judge,
            seed=seed,
            prompt_versions=config["prompt_versions"],
            qa_thresholds=qa_thresholds or {},
            options=options,
            config=config,
            config_hash=digest,
            created_by=user if user and user.is_authenticated else None,
            **budgets,
        )
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
    for item in (
        batch.items.filter(stage="qa")
        .exclude(status=SynthesisItem.Status.KEPT)
        .exclude(status=SynthesisItem.Status.RUNNING)
    ):
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
        if not retryable(item):
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
            raise BatchError(
                f"batch #{batch.pk} was started with another {', '.join(refused)}; only the judge and "
                "the QA settings may change on resume (they rerun QA): start a new batch"
            )
        if changed:
            rerun_qa = True
            updates.update(
                config=config,
                config_hash=config_hash(config),
                qa_thresholds=config["qa_thresholds"],
                options=config["options"],
                judge=_endpoint(config["judge"]["name"]),
            )
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
        status=SynthesisBatch.Status.CANCELLED,
        finished_at=timezone.now(),
        status_reason=f"cancelled by {user}" if user and user.is_authenticated else "cancelled",
    )
    if batch.job_run_id:  # queued item jobs end at once; running ones stop between stages anyway
        cancel_children(batch.job_run, user=user)
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
