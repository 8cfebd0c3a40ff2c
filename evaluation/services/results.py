"""What an attempt of a rollout leaves on its row, and clearing it for the next attempt.

An attempt's results: the agent's fields (the proxy's record of what it did, its own account apart), the model calls'
totals, the scores (and a RolloutScore for every scoring, never replaced), the final workspace as a diff against the
initial one (contents as blobs), and the trajectories rebuilt from the recorded calls. A retry clears them all
(`requeue`; the earlier attempt is noted in `previous_attempts`), so the row counts once.

Nothing here tells the rollout's evaluation run: the services that change a rollout (evaluation.services.rollouts)
and its run (evaluation.services.run_progress) call these, then say what changed.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from llm.models import ModelCall
from tasks.models import Blob, TaskRevision
from tasks.scoring import ScoreStatus, TaskScore
from tasks.services import store_blobs

from ..harnesses import AgentOutcome, ExitReason
from ..models import Rollout, RolloutFile, RolloutScore, Trajectory
from ..proxy_record import ProxyRecord
from ..trajectories import TrajectoryRules, rebuild_trajectories

log = logging.getLogger(__name__)

RESULT_FIELDS = {
    "exit_reason": "",
    "error": "",
    "started_at": None,
    "finished_at": None,
    "agent_seconds": None,
    "checker_seconds": None,
    "final_message": "",
    "turns": None,
    "tool_calls": 0,
    "tools_used": {},
    "harness_usage": {},
    "transcript": [],
    "agent_account": {},
    "log_tail": "",
    "max_rss_bytes": None,
    "model_calls": 0,
    "input_tokens": None,
    "output_tokens": None,
    "cost": 0,
    "outcome": "",
    "score": None,
    "score_reason": "",
    "code_score": None,
    "rubric_score": None,
    "sub_scores": {},
    "check_status": "",
    "check_reason": "",
    "rubric_judgements": [],
    "worker": "",
    "runtime": "",
}


def requeue(rollout: Rollout) -> bool:
    """Queue the next attempt of a failed or cancelled rollout, without a job: its results are cleared (the earlier
    attempt is noted in `previous_attempts`). False, with nothing changed, for a rollout that is not retryable (any
    more: another process may have retried it first). `rollout` is refreshed either way."""
    with transaction.atomic():
        current = Rollout.objects.select_for_update().get(pk=rollout.pk)
        if not current.retryable:
            rollout.refresh_from_db()
            return False
        history = [*current.previous_attempts, _attempt_record(current)]
        Rollout.objects.filter(pk=rollout.pk).update(
            status=Rollout.Status.QUEUED, previous_attempts=history, proxy_session=None, job_run=None, **RESULT_FIELDS
        )
        RolloutFile.objects.filter(rollout=rollout).delete()
        Trajectory.objects.filter(rollout=rollout).delete()
        rollout.refresh_from_db()
    return True


def _attempt_record(rollout: Rollout) -> dict:
    return {
        "attempt": rollout.attempt,
        "status": rollout.status,
        "exit_reason": rollout.exit_reason,
        "error": rollout.error[:1000],
        "finished_at": rollout.finished_at.isoformat() if rollout.finished_at else None,
        "proxy_session": rollout.proxy_session_id,
    }


# --- storing an attempt's results -----------------------------------------------------------------------------


def _agent_fields(outcome: AgentOutcome, record: ProxyRecord) -> dict:
    return {
        "exit_reason": outcome.exit_reason,
        "error": outcome.detail,
        "agent_seconds": round(outcome.seconds, 3),
        "final_message": record.final_message,
        "turns": record.turns,
        "tool_calls": record.tool_calls,
        "tools_used": record.tools_used,
        "harness_usage": outcome.usage,
        "transcript": record.transcript,
        "agent_account": outcome.account.as_dict(),
        "log_tail": outcome.log_tail,
        "max_rss_bytes": outcome.max_rss_bytes,
        "runtime": outcome.runtime,
    }


def store_failure(rollout: Rollout, outcome: AgentOutcome, record: ProxyRecord) -> None:
    Rollout.objects.filter(pk=rollout.pk, status=Rollout.Status.RUNNING, attempt=rollout.attempt).update(
        status=Rollout.Status.FAILED,
        finished_at=timezone.now(),
        **_agent_fields(outcome, record),
        **_call_totals(rollout),
    )
    log.warning("rollout %s failed: %s: %s", rollout.pk, outcome.exit_reason, outcome.detail)


def _call_totals(rollout: Rollout) -> dict:
    totals = ModelCall.objects.filter(session_id=rollout.proxy_session_id).aggregate(
        calls=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost")
    )
    return {
        "model_calls": totals["calls"],
        "input_tokens": totals["input_tokens"],
        "output_tokens": totals["output_tokens"],
        "cost": totals["cost"] or 0,
    }


def score_fields(scored: TaskScore) -> dict:
    check = scored.code
    return {
        "status": Rollout.Status.SCORED if scored.ok else Rollout.Status.INCOMPLETE,
        "score": scored.score,
        "score_reason": scored.reason[:600],
        "code_score": check.score,
        "rubric_score": scored.rubric_score,
        "sub_scores": check.subscores,
        "check_status": str(check.status),
        "check_reason": check.reason[:400],
        "rubric_judgements": [j.as_dict() for j in scored.judgements],
    }


def store_result(rollout: Rollout, outcome: AgentOutcome, record: ProxyRecord, changes, scored: TaskScore) -> None:
    check = scored.code
    if scored.status is ScoreStatus.UNSCORED:
        # The checker could not run: not its fault nor the agent's. No score, and the rollout may be retried.
        fields = {
            **_agent_fields(outcome, record),
            "check_status": str(check.status),
            "check_reason": check.reason[:400],
        }
        fields["exit_reason"] = ExitReason.SANDBOX_ERROR
        fields["error"] = f"the checker could not run: {check.reason}"[:2000]
        Rollout.objects.filter(pk=rollout.pk, status=Rollout.Status.RUNNING, attempt=rollout.attempt).update(
            status=Rollout.Status.FAILED, finished_at=timezone.now(), **fields, **_call_totals(rollout)
        )
        return
    with transaction.atomic():
        still_ours = Rollout.objects.select_for_update().filter(
            pk=rollout.pk, status=Rollout.Status.RUNNING, attempt=rollout.attempt
        )
        if not still_ours.exists():
            log.warning("rollout %s attempt %s was taken over; its results are not stored", rollout.pk, rollout.attempt)
            return
        _store_changes(rollout, changes)
        still_ours.update(
            finished_at=timezone.now(),
            checker_seconds=round(check.duration, 3),
            **score_fields(scored),
            **_agent_fields(outcome, record),
            **_call_totals(rollout),
        )
        store_trajectories(rollout, reward=scored.score)
        # The attempt's own scoring: no one asked for it (a rejudge or a regrade records who did).
        record_scoring(rollout, rollout.revision, scored, kind=RolloutScore.Kind.RUN, user=None)


def record_scoring(rollout: Rollout, revision: TaskRevision, scored: TaskScore, *, kind: str, user) -> RolloutScore:
    """Keep one scoring of the rollout's final workspace (they are never replaced: a regrade adds one)."""
    fields = score_fields(scored)
    return RolloutScore.objects.create(
        rollout=rollout,
        revision=revision,
        kind=kind,
        status=fields["status"],
        score=fields["score"],
        code_score=fields["code_score"],
        rubric_score=fields["rubric_score"],
        sub_scores=fields["sub_scores"],
        check_status=fields["check_status"],
        reason=fields["score_reason"],
        rubric_judgements=fields["rubric_judgements"],
        created_by=user if user and user.is_authenticated else None,
    )


def _store_changes(rollout: Rollout, changes) -> None:
    kept = [e.content for part in (changes.added, changes.modified) for e in part.values() if e.kind == "file"]
    blobs = store_blobs(kept)
    rows = []
    for change, entries in (("added", changes.added), ("modified", changes.modified), ("deleted", changes.deleted)):
        for path, entry in entries.items():
            row = RolloutFile(
                rollout=rollout,
                path=path,
                change=change,
                kind=entry.kind,
                size=entry.size,
                sha256=entry.sha256,
                executable=entry.executable,
                target=entry.target[:1000],
                detail=entry.detail,
            )
            if entry.kind == "file" and change != "deleted":
                blob = blobs[Blob.digest(entry.content)]
                row.blob_id, row.sha256 = blob.sha256, blob.sha256
            rows.append(row)
    RolloutFile.objects.bulk_create(rows)


def store_trajectories(rollout: Rollout, *, reward: float | None) -> list[Trajectory]:
    """Rebuild the rollout's trajectories from its current attempt's model calls (replacing earlier ones)."""
    calls = [
        {"id": call.pk, "request": call.request, "response": call.response, "error": call.error}
        for call in ModelCall.objects.filter(session_id=rollout.proxy_session_id)
        .order_by("created_at", "id")
        .with_requests()
    ]
    rebuilt = rebuild_trajectories(
        [{"request": c["request"], "response": c["response"], "error": c["error"]} for c in calls],
        rules=TrajectoryRules.from_settings(),
    )
    Trajectory.objects.filter(rollout=rollout).delete()
    rows = [
        Trajectory(
            rollout=rollout,
            index=index,
            messages=data.messages,
            tools=data.tools,
            reward=reward,
            stats=asdict(data.stats),
            model_call_ids=[calls[i]["id"] for i in data.call_indices],
            excluded=data.excluded,
            exclusion_reason=data.exclusion_reason[:300],
            unverified_turns=data.unverified_turns,
        )
        for index, data in enumerate(rebuilt)
    ]
    return Trajectory.objects.bulk_create(rows)
