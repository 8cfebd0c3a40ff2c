"""Every state change of rollouts: start, run (one attempt), retry, and marking lost ones failed.

A rollout's life: queued -> running -> scored | failed (| cancelled). One attempt:
1. wait for a sandbox slot of this machine (evaluation.slots), claim the row (conditional UPDATE: queued -> running);
2. open a proxy session (subject "rollout:<id>"), check that the agent can reach its model through it
   (evaluation.infra.preflight: a second, not the harness's retries), materialise the input files as the workspace;
3. run the harness in the sandbox (harnesses.sandboxed.run_agent); close the session and free the slot when the agent
   stopped (the next rollout's agent starts while this one is scored: the checker has a sandbox of its own);
4. store the final workspace as a diff against the initial one (contents as blobs);
5. only now install the checker's reward/ files and score the workspace (tasks.scoring.score_run: the checker, with
   the final message and the transcript in the reward payload, and the rubric's judge when the task has a rubric);
6. count the model calls the proxy recorded, rebuild the trajectories from them, and store everything
   (evaluation.services.results).
Every state change is told to the rollout's evaluation run, when it has one (services.run_progress.rollout_changed).
The turns, tool calls, transcript and final message stored (and given to the checker and the judge) are the proxy's
record (evaluation.proxy_record), never the agent's word: what it wrote about itself is stored apart, as its own
account (Rollout.agent_account), and `error` holds only what ClawGym saw.
An agent that times out, crashes or errs is still scored (its workspace is what it is), unless it stopped in error
because its model's server or the proxy failed (evaluation.infra.upstream_failure): that is not the model's 0, the
rollout fails and may be retried, like one whose preflight failed, or one holding a call whose answer the proxy could
not record (evaluation.infra.unrecorded_answers: its agent may have seen part of it). A rubric rule left without
a judgement (no judge endpoint, a failed judge call) is `incomplete`: the run stands, judge it again
(rejudge_rollout). No score at all (the sandbox or harness could not run, the worker died) is `failed`, and
retryable: a retry is the next attempt on the same row, replacing its results, so nothing is counted twice.
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

import jobs
from jobs.models import JobRun
from jobs.runner import lost_reason, when_reachable, worker_gone, worker_id
from lib.bounds import TextRefused, check_json
from llm.models import ModelEndpoint
from llm.sampling import derived_seed, policy_for
from llm.services import close_proxy_session, open_proxy_session, proxy_base_url
from sandbox import Workspace
from tasks.judging import JudgingError, judge_rubric
from tasks.models import RevisionFile, TaskRevision
from tasks.scoring import combine, score_run
from tasks.verification import CheckResult, CheckStatus

from ..harnesses import (
    HARNESSES,
    AgentOutcome,
    AgentTask,
    ExitReason,
    HarnessUnavailable,
    check_options,
    get_harness,
)
from ..harnesses.sandboxed import WALL_MARGIN_SECONDS, run_agent
from ..infra import answer_failure, preflight, settle_calls, unrecorded_answers, upstream_failure
from ..job_kinds import ROLLOUT_JOB
from ..models import Rollout, RolloutScore, Trajectory
from ..proxy_record import ProxyRecord, proxy_record
from ..slots import NoSlotFree, rollout_slot
from ..workspaces import attempt_folder, final_workspace, remove_orphaned_folders
from .results import record_scoring, requeue, score_fields, store_failure, store_result
from .run_progress import rollout_changed

log = logging.getLogger(__name__)

MAX_REPEATS = 64
# Rollout options ClawGym acts on itself (the sandbox's deadline, the proxy's budget and token recording): never
# passed to the harness as agent options.
CLAWGYM_OPTIONS = ("timeout", "token_limit", "record_tokens")
# Exit reasons that leave nothing to score: the rollout fails, and may be retried.
NOT_SCORED = {
    ExitReason.SANDBOX_ERROR,
    ExitReason.HARNESS_UNAVAILABLE,
    ExitReason.WORKER_LOST,
    ExitReason.RUNNER_ERROR,
    ExitReason.CANCELLED,
    ExitReason.PROXY_UNAVAILABLE,
    ExitReason.UPSTREAM_ERROR,
}


class RolloutError(ValueError):
    """A rollout cannot be started or retried as asked; the message says why."""


# --- starting -------------------------------------------------------------------------------------------------


def create_rollouts(
    revision: TaskRevision,
    endpoint: ModelEndpoint,
    *,
    harness: str | None = None,
    repeats: int = 1,
    options: dict | None = None,
    user,
) -> list[Rollout]:
    """`repeats` queued rollouts of one revision with one model, sharing a group id. Nothing runs yet."""
    harness = harness or settings.CLAWGYM_DEFAULT_HARNESS
    if harness not in HARNESSES:
        raise RolloutError(f"unknown harness {harness!r}; known: {', '.join(HARNESSES)}")
    if not 1 <= repeats <= MAX_REPEATS:
        raise RolloutError(f"repeats must be between 1 and {MAX_REPEATS}, got {repeats}")
    if not endpoint.enabled:
        raise RolloutError(f"model endpoint {endpoint.name!r} is disabled")
    if options is not None and not isinstance(options, dict):
        raise RolloutError("harness options must be a JSON object")
    try:
        check_json(options or {}, "the harness options", setting="CLAWGYM_MAX_NOTE_BYTES")
        check_options(harness, options or {})
    except (TextRefused, ValueError) as exc:
        raise RolloutError(str(exc)) from None
    # The proxy's token budget, a limit ClawGym enforces itself (check_options bounds the sandbox's deadline).
    value = (options or {}).get("token_limit")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RolloutError(f"the token_limit option must be a whole number of tokens, got {value!r}")
    if not isinstance((options or {}).get("record_tokens", False), bool):
        raise RolloutError(f"the record_tokens option must be true or false, got {options['record_tokens']!r}")
    group = uuid.uuid4().hex[:12]
    creator = user if user is not None and user.is_authenticated else None
    return [
        Rollout.objects.create(
            revision=revision,
            endpoint=endpoint,
            harness=harness,
            harness_options=options or {},
            repeat_index=index,
            group=group,
            created_by=creator,
        )
        for index in range(repeats)
    ]


def enqueue_rollout(rollout: Rollout, *, user) -> JobRun:
    """Queue a job on the `sandbox` queue that runs the rollout's next attempt."""
    run = jobs.enqueue(ROLLOUT_JOB, created_by=user, total=1, rollout_id=rollout.pk)
    Rollout.objects.filter(pk=rollout.pk).update(job_run=run)
    rollout.job_run = run
    return run


def start_rollouts(revision, endpoint, *, harness=None, repeats=1, options=None, user) -> list[Rollout]:
    """Create the rollouts and queue one job each (handed to the engine when the transaction commits)."""
    with transaction.atomic():
        rollouts = create_rollouts(revision, endpoint, harness=harness, repeats=repeats, options=options, user=user)
        for rollout in rollouts:
            enqueue_rollout(rollout, user=user)
    return rollouts


def retry_rollout(rollout: Rollout, *, user, enqueue: bool = True) -> Rollout:
    """Queue the next attempt of a failed or cancelled rollout: its results are cleared (the earlier attempt is
    noted in `previous_attempts`), so the row counts once. Raises RolloutError for a rollout that is not retryable."""
    with transaction.atomic():
        if not requeue(rollout):
            raise RolloutError(f"rollout #{rollout.pk} is {rollout.status}; only failed or cancelled ones are retried")
        if enqueue:
            enqueue_rollout(rollout, user=user)
    rollout_changed(rollout.pk)
    log.info("rollout %s queued for attempt %s by %s", rollout.pk, rollout.attempt + 1, _who(user))
    return rollout


def _who(user) -> str:
    return user.get_username() if user is not None and user.is_authenticated else "a script"


# --- lost attempts --------------------------------------------------------------------------------------------


def fail_lost_rollouts() -> list[int]:
    """Mark failed (retryable) every running rollout whose process is gone: its worker process exited (same host),
    or its job run ended or was judged lost (any host). Returns their ids."""
    failed = []
    running = Rollout.objects.filter(status=Rollout.Status.RUNNING).select_related("job_run")
    for rollout in running:
        reason = _lost(rollout)
        if not reason:
            continue
        # Its workspace first, so that a rollout seen failed has none left on this machine (a live process's stays).
        remove_orphaned_folders(rollout)
        if _fail(rollout, ExitReason.WORKER_LOST, reason, expected=Rollout.Status.RUNNING):
            failed.append(rollout.pk)
    return failed


def _lost(rollout: Rollout) -> str:
    if rollout.worker and worker_gone(rollout.worker):
        return f"the process running attempt {rollout.attempt} ({rollout.worker}) exited before it finished"
    run = rollout.job_run
    if run is not None and run.is_finished:
        return f"its job run #{run.pk} ended {run.status} while the rollout was still running"
    if run is not None and lost_reason(run):
        return f"its job run #{run.pk} was lost: {lost_reason(run)}"
    return ""


def fail_redelivered(rollout: Rollout, job_run: JobRun) -> bool:
    """A job delivered again after its worker died finds its rollout still running: that attempt is lost."""
    if rollout.status != Rollout.Status.RUNNING or rollout.job_run_id != job_run.pk or rollout.worker == worker_id():
        return False
    reason = (
        f"the worker running attempt {rollout.attempt} ({rollout.worker}) was lost; "
        f"job run #{job_run.pk} was delivered again"
    )
    remove_orphaned_folders(rollout)
    return _fail(rollout, ExitReason.WORKER_LOST, reason, expected=Rollout.Status.RUNNING)


def _fail(rollout: Rollout, exit_reason: str, error: str, *, expected: str) -> bool:
    done = Rollout.objects.filter(pk=rollout.pk, status=expected, attempt=rollout.attempt).update(
        status=Rollout.Status.FAILED, exit_reason=exit_reason, error=error[:2000], finished_at=timezone.now()
    )
    if done:
        log.warning("rollout %s failed: %s", rollout.pk, error)
        # Never raises; first, so that a try again after a database error finds nothing undone.
        rollout_changed(rollout.pk)
        if rollout.proxy_session_id:
            close_proxy_session(rollout.proxy_session)
    return bool(done)


# --- running one attempt --------------------------------------------------------------------------------------


def rollout_timeout(rollout: Rollout) -> int:
    """The agent's deadline in seconds. Never over CLAWGYM_MAX_ROLLOUT_TIMEOUT, also for a rollout stored before the
    cap was lowered (or before there was one): a retry or a resumed run must not hold a worker for longer."""
    asked = int(rollout.harness_options.get("timeout") or settings.CLAWGYM_ROLLOUT_TIMEOUT_SECONDS)
    return min(asked, settings.CLAWGYM_MAX_ROLLOUT_TIMEOUT)


def rollout_seed(rollout: Rollout) -> int | None:
    """The seed this rollout's calls are sampled with, when its run names one (its endpoint's sampling `seed`): its
    own, derived from that seed, its task and its repeat. With the run's seed on every call, two repeats of a task
    would sample the same answer (the same prompt, the same seed) and their spread would describe one sample; a rerun
    (or a retry) of the same task and repeat draws the same again."""
    run_seed = (rollout.endpoint.sampling or {}).get("seed")
    if run_seed is None:
        return None
    return derived_seed(run_seed, rollout.revision.task.external_id, rollout.repeat_index)


def execute_rollout(rollout_id: int, *, job_run: JobRun | None = None, on_wait=None) -> Rollout:
    """Run the next attempt of a queued rollout to its end (scored or failed) and return it.

    Does nothing to a rollout that is not queued (another process took it, or it finished). Waits for a sandbox
    slot first; on_wait(seconds) is called while waiting.
    """
    rollout = Rollout.objects.select_related("revision__task", "endpoint").get(pk=rollout_id)
    if rollout.status != Rollout.Status.QUEUED:
        return rollout
    timeout = rollout_timeout(rollout)
    try:
        with rollout_slot(hold_seconds=timeout + 2 * WALL_MARGIN_SECONDS, on_wait=on_wait) as slot:
            claimed = Rollout.objects.filter(pk=rollout_id, status=Rollout.Status.QUEUED).update(
                status=Rollout.Status.RUNNING,
                attempt=F("attempt") + 1,
                started_at=timezone.now(),
                worker=worker_id(),
                job_run=job_run if job_run is not None else F("job_run"),
            )
            rollout.refresh_from_db()
            if not claimed:
                return rollout
            _run_attempt(rollout, timeout, agent_stopped=slot.release)
    except NoSlotFree as exc:
        _fail(rollout, ExitReason.SANDBOX_ERROR, str(exc), expected=Rollout.Status.QUEUED)
    else:
        rollout_changed(rollout.pk)  # scored or failed by _run_attempt (a failure through _fail has told already)
    rollout.refresh_from_db()
    return rollout


def _run_attempt(rollout: Rollout, timeout: int, *, agent_stopped=lambda: None) -> None:
    """One attempt: the agent in the sandbox, then the checker (and judge). `agent_stopped` is called once the agent
    has stopped (execute_rollout frees the machine's rollout slot there: the checker runs in a sandbox of its own)."""
    endpoint, revision = rollout.endpoint, rollout.revision
    session = None
    seed = rollout_seed(rollout)
    try:
        # The token opens the proxy for as long as the agent may run, and the session is closed when the attempt
        # ends however it ends (below, or _fail): a token read later opens nothing.
        # record_tokens (an RL rollout): the proxy stores the exact tokens the policy sampled (llm.tokens). Every
        # rollout's calls are held to the run's sampling (the endpoint's settings), whatever the agent asks for.
        session = open_proxy_session(
            endpoint,
            subject=rollout.subject,
            ttl_seconds=timeout + 3 * WALL_MARGIN_SECONDS,
            token_limit=rollout.harness_options.get("token_limit"),
            record_tokens=bool(rollout.harness_options.get("record_tokens")),
            sampling=policy_for(endpoint, seed=seed),
        )
        Rollout.objects.filter(pk=rollout.pk).update(proxy_session=session, seed=seed)
        rollout.proxy_session, rollout.seed = session, seed
        proxy_base = proxy_base_url(session)
        inputs = {f.path: f.blob.content for f in revision.files_by_role(RevisionFile.Role.INPUT)}
        task = AgentTask(
            instruction=revision.instruction,
            model=endpoint.model,
            api_style=endpoint.api_style,
            api_key=session.token,
            timeout=timeout,
            sampling={**(endpoint.sampling or {}), **({"seed": seed} if seed is not None else {})},
            options={k: v for k, v in rollout.harness_options.items() if k not in CLAWGYM_OPTIONS},
        )
        with attempt_folder(rollout) as scratch, Workspace.create(inputs, base_dir=scratch) as workspace:
            try:
                # Can the agent reach its model at all? Asked before the sandbox starts: a second, not the harness's
                # retries (evaluation.infra.preflight).
                outcome = run_agent(
                    get_harness(rollout.harness),
                    task,
                    workspace,
                    proxy_base=proxy_base,
                    scratch_dir=scratch,
                    preflight=lambda: preflight(session, proxy_base),
                )
            except HarnessUnavailable as exc:
                outcome = AgentOutcome(ExitReason.HARNESS_UNAVAILABLE, detail=str(exc))
            finally:
                close_proxy_session(session)  # the agent stopped: its token opens nothing any more
                agent_stopped()
            settle_calls(session.pk)  # what the agent left in flight, recorded by the proxy once it saw it go
            record = proxy_record(session.pk)
            _classify_agent_error(outcome, session, record)
            if outcome.exit_reason in NOT_SCORED:
                store_failure(rollout, outcome, record)
                return
            changes = workspace.diff()
            # The checker (and the judge, when the task has a rubric) only now: reward/ enters the workspace here.
            scored = score_run(revision, workspace, record.final_message, record.transcript, subject=rollout.subject)
        store_result(rollout, outcome, record, changes, scored)
    except Exception as exc:
        # Also when the database went away mid-attempt (a restart): recorded once it answers again, so the rollout is
        # not left "running" behind a job that has ended.
        error = f"{type(exc).__name__}: {exc}"
        when_reachable(
            lambda: _fail(rollout, ExitReason.RUNNER_ERROR, error, expected=Rollout.Status.RUNNING),
            f"recording that rollout {rollout.pk} failed",
        )
        raise
    finally:
        if session is not None:
            close_proxy_session(session)


def _classify_agent_error(outcome: AgentOutcome, session, record: ProxyRecord) -> None:
    """An agent that stopped in error because its model's server (or the proxy) failed is not the model's 0, nor is
    one that ran out of time after the model's server stalled or failed an answer (the harness saw a timeout, but the
    time went waiting on the server: infra, retried). One whose calls used up the session's token limit ran out of
    tokens, whatever the harness made of the proxy's refusal (an error, or a final answer after it): a limit, scored
    as the checker finds the workspace. An error of the model's own is told by the proxy's record of the last call, not
    by what the agent said about it (its account). Before all that: a session holding a call whose answer the proxy
    could not record is the infrastructure's failure, however the agent stopped (evaluation.infra.unrecorded_answers).
    """
    if outcome.exit_reason not in NOT_SCORED and (unrecorded := unrecorded_answers(session.pk)):
        outcome.exit_reason = ExitReason.PROXY_UNAVAILABLE
        outcome.detail = unrecorded[:2000]
        return
    limit = session.token_limit
    used = session.tokens_used() if limit is not None else 0
    if outcome.exit_reason in (ExitReason.ERROR, ExitReason.COMPLETED) and limit is not None and used >= limit:
        outcome.exit_reason = ExitReason.TOKEN_LIMIT
        refused = f"; its last call failed: {record.last_failure}" if record.last_failure else ""
        outcome.detail = f"its model calls used {used} tokens of its limit of {limit}{refused}"[:2000]
        return
    if outcome.exit_reason == ExitReason.ERROR:
        reason = upstream_failure(session.pk, outcome.relay_failures)
    elif outcome.exit_reason == ExitReason.TIMEOUT:
        reason = answer_failure(session.pk)
    else:
        return
    if reason:
        outcome.exit_reason = ExitReason.UPSTREAM_ERROR
        outcome.detail = reason[:2000]
    elif outcome.exit_reason == ExitReason.ERROR and record.last_failure:
        outcome.detail = f"{outcome.detail}; its last model call failed: {record.last_failure}"[:2000]


def rejudge_rollout(rollout: Rollout, *, judge_endpoint=None, user) -> Rollout:
    """Judge the rubric of a scored or incomplete rollout again, from its stored final workspace and final message,
    and recombine the task score with its stored code score. Raises RolloutError when there is nothing to judge
    or no judge endpoint; a rule the judge fails again leaves the rollout incomplete."""
    rollout = Rollout.objects.select_related("revision__task").get(pk=rollout.pk)
    if not rollout.rejudgeable:
        why = (
            f"its task's revision r{rollout.revision.number} has no rubric (only its checker scores it)"
            if not rollout.revision.has_rubric
            else f"it is {rollout.status}"
        )
        raise RolloutError(
            f"rollout #{rollout.pk} cannot be judged: {why}; only scored or incomplete rollouts of a task with a "
            "rubric are judged"
        )
    if rollout.check_status not in set(CheckStatus):
        # 'tampered' (a checker that wrote to the workspace) was retired: such runs now keep their score, but this
        # one's was not stored, so recombining would pass off a 0 the checker never gave.
        raise RolloutError(
            f"rollout #{rollout.pk} was checked under a retired checker status "
            f"({rollout.check_status!r}) and its code score was not kept: start a new rollout"
        )
    files, _links, _skipped = final_workspace(rollout)
    try:
        judgements = judge_rubric(
            rollout.revision, files, rollout.final_message, endpoint=judge_endpoint, subject=rollout.subject
        )
    except JudgingError as exc:
        raise RolloutError(str(exc)) from None
    check = CheckResult(
        rollout.code_score or 0.0, CheckStatus(rollout.check_status), rollout.check_reason, subscores=rollout.sub_scores
    )
    scored = combine(rollout.revision.rubric, rollout.revision.code_weight, check, judgements)
    with transaction.atomic():
        Rollout.objects.filter(pk=rollout.pk, status__in=[Rollout.Status.SCORED, Rollout.Status.INCOMPLETE]).update(
            **score_fields(scored)
        )
        Trajectory.objects.filter(rollout=rollout).update(reward=scored.score)
        record_scoring(rollout, rollout.revision, scored, kind=RolloutScore.Kind.REJUDGE, user=user)
    rollout_changed(rollout.pk)
    log.info("rollout %s judged again by %s: %s", rollout.pk, _who(user), scored.status)
    rollout.refresh_from_db()
    return rollout
