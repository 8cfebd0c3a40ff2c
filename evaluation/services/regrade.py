"""Regrade: score finished rollouts again from their stored final workspaces with their task's current checker and
rubric, without running the agent again. Each regrade is a new RolloutScore (the earlier ones are kept); the
rollout's score fields and its run's figures take the new score, so a reviewer who fixed a checker sees how every
model's score on that task changes.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db import transaction

from jobs import scratch
from sandbox import Workspace
from tasks.scoring import ScoreStatus, score_run

from ..models import EvalRun, Outcome, Rollout, RolloutScore
from ..reports import current_summary
from ..workspaces import write_final_workspace
from .results import score_fields
from .run_progress import rollout_changed

log = logging.getLogger(__name__)

# Outcomes whose final workspace was stored (the agent ran to an end): the ones a regrade can score.
REGRADABLE = (Outcome.SCORED, Outcome.AGENT_LIMIT, Outcome.AGENT_ERROR, Outcome.JUDGE_INCOMPLETE)


def regradable(queryset):
    return queryset.filter(outcome__in=REGRADABLE)


def regrade_rollouts(rollouts, *, user, judge_endpoint=None, on_progress=None) -> dict:
    """Regrade each rollout; returns {"rollouts", "changed", "failed": [{"rollout", "error"}], "tasks": {task id:
    {"revision", "before", "after", "rollouts"}}, "runs": {run id: {"before", "after"}}} (means over the regraded
    rollouts of each task, and each touched run's overall mean before and after)."""
    rollouts = list(rollouts.select_related("revision__task__current_revision", "eval_run"))
    run_ids = sorted({r.eval_run_id for r in rollouts if r.eval_run_id})
    runs_before = dict(EvalRun.objects.filter(pk__in=run_ids).values_list("pk", "overall_mean"))
    before: dict[str, list] = defaultdict(list)
    after: dict[str, list] = defaultdict(list)
    revision_of: dict[str, int] = {}
    changed, failed = 0, []
    for done, rollout in enumerate(rollouts, 1):
        task = rollout.revision.task
        revision_of[task.external_id] = task.current_revision.number
        old = rollout.score
        try:
            new = regrade_one(rollout, user=user, judge_endpoint=judge_endpoint)
        except RegradeError as exc:
            failed.append({"rollout": rollout.pk, "error": str(exc)})
            continue
        before[task.external_id].append(old)
        after[task.external_id].append(new.score)
        changed += new.score != old
        if on_progress:
            on_progress(done, len(rollouts))
    runs_after = {}
    for run in EvalRun.objects.filter(pk__in=run_ids):
        runs_after[run.pk] = current_summary(run)["overall"]["mean"] if run.is_finished else run.overall_mean
    return {
        "rollouts": len(rollouts) - len(failed),
        "changed": changed,
        "failed": failed,
        "tasks": {
            task: {
                "revision": revision_of[task],
                "before": _mean(before[task]),
                "after": _mean(after[task]),
                "rollouts": len(after[task]),
            }
            for task in sorted(after)
        },
        "runs": {str(pk): {"before": runs_before.get(pk), "after": runs_after.get(pk)} for pk in run_ids},
    }


def _mean(values):
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else None


class RegradeError(RuntimeError):
    """This rollout cannot be regraded; the message says why."""


def regrade_one(rollout: Rollout, *, user, judge_endpoint=None) -> RolloutScore:
    """Score the rollout's final workspace with its task's current revision; record it and take it."""
    if rollout.outcome not in REGRADABLE:
        raise RegradeError(f"rollout #{rollout.pk} has no stored final workspace to score ({rollout.status})")
    revision = rollout.revision.task.current_revision
    with scratch.scratch_folder(f"regrade-{rollout.pk}") as folder:
        _written, skipped = write_final_workspace(rollout, folder / "workspace")
        workspace = Workspace(folder / "workspace")
        scored = score_run(
            revision,
            workspace,
            rollout.final_message,
            rollout.transcript,
            judge_endpoint=judge_endpoint,
            subject=rollout.subject,
        )
    if scored.status is ScoreStatus.UNSCORED:
        raise RegradeError(f"the checker could not run on rollout #{rollout.pk}: {scored.code.reason}")
    fields = score_fields(scored)
    if skipped:
        note = f"; {len(skipped)} file(s) of the final workspace were not kept (too large or special)"
        fields["score_reason"] = (fields["score_reason"] + note)[:600]
    with transaction.atomic():
        record = RolloutScore.objects.create(
            rollout=rollout,
            revision=revision,
            kind=RolloutScore.Kind.REGRADE,
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
        Rollout.objects.filter(pk=rollout.pk).update(**fields)
        rollout.trajectories.update(reward=fields["score"])
    rollout_changed(rollout.pk)
    log.info("rollout %s regraded with %s: %s -> %s", rollout.pk, revision, rollout.score, record.score)
    return record
