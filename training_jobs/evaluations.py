"""Evaluate every checkpoint of a run on a benchmark version: serve each one (and the base model), start an
evaluation run per endpoint (evaluation.services.runs.start_eval_run), record CheckpointEvaluation rows and the run's
base_eval_run. Every server, the base model's included, is a ModelServer row: they stay up while their rollouts run
and are stopped when idle (training_jobs.serving.stop_idle_servers).

The pages and the API never serve anything themselves: request_evaluation() queues the
`training.evaluate_checkpoints` job (gpu queue), which calls evaluate_checkpoints() on its worker, so the servers
live there and their endpoints name the host it advertises (CLAWGYM_SERVE_ADVERTISE_HOST, see serving.py).
`manage.py evaluate_checkpoints` calls it on the machine it runs on and waits. A checkpoint (or base model) already
evaluated on the version is not served nor started again: the job can run twice, and a second request adds only
the checkpoints saved since.

A checkpoint's evaluations are those runs (CheckpointEvaluation rows) and every other evaluation run of one of its
servers' endpoints (`ckpt-RUN-STEP`), however it was started: the checkpoint row's "Start an evaluation", the API,
`manage.py evaluate` (checkpoint_eval_runs). The form says what to expect of each harness against the run's servers
before anything is queued (expectations)."""

from statistics import median

from django.conf import settings
from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast, Coalesce, Length

from evaluation.harnesses import HARNESSES
from evaluation.models import EvalRun, Rollout
from evaluation.services.runs import start_eval_run
from jobs import enqueue
from jobs.models import JobRun
from llm.models import ModelCall, ModelEndpoint

from .job_kinds import EVALUATE_JOB
from .models import CheckpointEvaluation, ModelServer, TrainingRun
from .serving import ServingError, serve_base_model, serve_checkpoint


class EvaluationError(RuntimeError):
    pass


def evaluate_checkpoints(
    run: TrainingRun, version, *, user, harness: str | None = None, include_base: bool = True, progress=None
) -> list:
    """The evaluation runs of the base model (first, when asked) and of every checkpoint in step order on the
    version: those evaluated already as they are, the others served here and started. `progress(done, total,
    message)` is told after each."""
    checkpoints = list(run.checkpoints.order_by("step"))
    if not checkpoints:
        raise EvaluationError(f"run #{run.pk} has no checkpoint yet")
    earlier = {
        e.checkpoint_id: e.eval_run
        for e in CheckpointEvaluation.objects.filter(
            checkpoint__run=run, eval_run__benchmark_version=version
        ).select_related("eval_run", "eval_run__endpoint")
    }
    base_run = (
        run.base_eval_run if run.base_eval_run_id and run.base_eval_run.benchmark_version_id == version.pk else None
    )
    total = len(checkpoints) + int(include_base)
    report = progress or (lambda done, total, message: None)
    started = []
    try:
        if include_base:
            if base_run is None:
                endpoint = serve_base_model(run).endpoint
                base_run, _ = start_eval_run(
                    endpoint=endpoint,
                    benchmark_version=version,
                    harness=harness,
                    user=user,
                    name=f"base of training run #{run.pk} on {version}",
                )
                TrainingRun.objects.filter(pk=run.pk).update(base_eval_run=base_run)
            started.append(base_run)
            report(len(started), total, f"base model: evaluation run #{base_run.pk}")
        for checkpoint in checkpoints:
            eval_run = earlier.get(checkpoint.pk)
            if eval_run is None:
                server = serve_checkpoint(checkpoint)
                eval_run, _ = start_eval_run(
                    endpoint=server.endpoint,
                    benchmark_version=version,
                    harness=harness,
                    user=user,
                    name=f"{server.endpoint.name} on {version}",
                )
                CheckpointEvaluation.objects.get_or_create(checkpoint=checkpoint, eval_run=eval_run)
            started.append(eval_run)
            report(len(started), total, f"step {checkpoint.step}: evaluation run #{eval_run.pk}")
    except ServingError as exc:
        raise EvaluationError(f"serving failed after {len(started)} evaluation run(s) started: {exc}") from exc
    return started


def request_evaluation(
    run: TrainingRun, version, *, user, harness: str | None = None, include_base: bool = True
) -> JobRun:
    """Queue the training.evaluate_checkpoints job on a gpu worker and return its JobRun at once; while one for the
    same run and version is queued or running, that one."""
    if not run.checkpoints.exists():
        raise EvaluationError(f"run #{run.pk} has no checkpoint yet")
    if harness and harness not in HARNESSES:
        raise EvaluationError(f"unknown harness {harness!r}; known: {', '.join(HARNESSES)}")
    with transaction.atomic():
        # Two clicks at once: the second waits for the first's job row (PostgreSQL; SQLite writes one at a time).
        TrainingRun.objects.select_for_update().filter(pk=run.pk).first()
        current = evaluation_job(run, version)
        if current is not None:
            return current
        return enqueue(
            EVALUATE_JOB,
            created_by=user,
            run_id=run.pk,
            version_id=version.pk,
            user_id=user.pk if user is not None and user.is_authenticated else None,
            harness=harness,
            include_base=include_base,
        )


def evaluation_job(run: TrainingRun, version=None) -> JobRun | None:
    """The run's evaluate job still queued or running (on that version, when given): the run page polls while it is."""
    jobs = JobRun.objects.filter(kind=EVALUATE_JOB, params__run_id=run.pk, status__in=JobRun.ACTIVE)
    if version is not None:
        jobs = jobs.filter(params__version_id=version.pk)
    return jobs.order_by("-pk").first()


def checkpoint_eval_runs(checkpoint):
    """The checkpoint's evaluation runs, newest first: those "evaluate every checkpoint" recorded and every run of
    an endpoint one of its servers registered."""
    served = ModelServer.objects.filter(checkpoint=checkpoint, endpoint__isnull=False).values("endpoint")
    recorded = CheckpointEvaluation.objects.filter(checkpoint=checkpoint).values("eval_run")
    return EvalRun.objects.filter(Q(pk__in=recorded) | Q(endpoint__in=served)).order_by("-created_at", "-pk")


def latest_score(run: TrainingRun) -> float | None:
    """The overall score of the run's latest checkpoint that has a scored evaluation (its newest; a cancelled
    evaluation has no score here); None when none has."""
    step_of_endpoint = dict(
        ModelServer.objects.filter(checkpoint__run=run, endpoint__isnull=False).values_list(
            "endpoint_id", "checkpoint__step"
        )
    )
    step_of_run = dict(
        CheckpointEvaluation.objects.filter(checkpoint__run=run).values_list("eval_run_id", "checkpoint__step")
    )
    scored = (
        EvalRun.objects.filter(Q(pk__in=step_of_run) | Q(endpoint_id__in=step_of_endpoint))
        .filter(overall_mean__isnull=False)
        .exclude(status=EvalRun.Status.CANCELLED)
        .values_list("pk", "endpoint_id", "overall_mean", "created_at")
    )
    ranked = [
        (step_of_run.get(pk, step_of_endpoint.get(endpoint)), created, score) for pk, endpoint, score, created in scored
    ]
    return max(ranked)[2] if ranked else None


# --- what to expect, before anything is queued ----------------------------------------------------------------

CHARS_PER_TOKEN = 4  # a request's JSON characters per token: the usual rule of thumb for English text and code
# The prompt of a typical model call of each harness when none was measured here: OpenClaw's system prompt and
# tool schemas come to about 20,000 tokens (20,195 with Qwen3's tokenizer, issue 24); the builtin loop's to about
# 450 (inside/builtin_agent.py's SYSTEM_PROMPT and TOOLS), with the instruction and a few turns about 1,500.
PROMPT_TOKENS = {"openclaw": 20_000, "builtin": 1_500}
# Prompt tokens a second a server gets through when none of its calls was measured here: `transformers serve` on
# CPU (a 20K-token prompt did not finish within the endpoint's 120 s timeout there, issue 24: under 170/s), and
# vLLM on a GPU (prefill of a small model; thousands a second), and the batched server on CPU (SmolLM2-135M computed
# 8 fresh 355-token prompts at about 370 tokens/s on 2 cores; a conversation's next call reuses its earlier tokens'
# cache, so an agent's calls go faster than this).
TOKENS_PER_SECOND = {"transformers": 100, "vllm": 5_000, "batched": 370}
MEASURED_SESSIONS = 5  # the latest rollouts of a harness whose calls give its typical prompt
MEASURED_CALLS = 20  # the latest answered calls of the run's servers that give their speed
CALLS_A_ROLLOUT = 5  # a rollout that fits fewer model calls than this in its deadline is expected to run out of time


def _chars(calls) -> list[int]:
    # Calls recorded before their request's length was kept: their stored JSON is their whole request.
    whole = Coalesce("request_chars", Length(Cast("request_part", TextField())))
    return [n for n in calls.annotate(n=whole).values_list("n", flat=True) if n]


def prompt_tokens(harness: str) -> tuple[int, str]:
    """(tokens of a typical model call's prompt with this harness, where the figure comes from)."""
    sessions = list(
        Rollout.objects.filter(harness=harness, proxy_session__isnull=False)
        .order_by("-pk")
        .values_list("proxy_session", flat=True)[:MEASURED_SESSIONS]
    )
    lengths = _chars(ModelCall.objects.filter(session__in=sessions)) if sessions else []
    if lengths:
        source = f"measured: the median call of its last {len(sessions)} rollouts"
        return round(median(lengths) / CHARS_PER_TOKEN), source
    return PROMPT_TOKENS.get(harness, PROMPT_TOKENS["openclaw"]), "estimate"


def _serving_backend(run: TrainingRun) -> str:
    server = ModelServer.objects.filter(Q(checkpoint__run=run) | Q(endpoint__name=f"base-{run.pk}")).exclude(backend="")
    backend = server.values_list("backend", flat=True).first() or settings.CLAWGYM_SERVE_BACKEND
    if backend not in TOKENS_PER_SECOND:  # "auto": the gpu worker decides; a run trained on CPU is served there
        backend = "transformers" if run.cpu else "vllm"
    return backend


def server_speed(run: TrainingRun) -> tuple[float, str, str]:
    """(prompt tokens a second the run's servers get through, where the figure comes from, the serving backend):
    measured over the latest answered calls of the run's servers, else of any server on the same backend, else the
    documented estimate."""
    backend = _serving_backend(run)
    mine = ModelServer.objects.filter(Q(checkpoint__run=run) | Q(endpoint__name=f"base-{run.pk}"))
    for servers, whose in (
        (mine, "this run's servers"),
        (ModelServer.objects.filter(backend=backend), f"{backend} servers"),
    ):
        answered = ModelCall.objects.filter(endpoint__in=servers.values("endpoint"), error="", latency_ms__gt=0)
        latest = dict(answered.order_by("-pk").values_list("pk", "latency_ms")[:MEASURED_CALLS])
        seconds = sum(latest.values()) / 1000
        tokens = sum(_chars(ModelCall.objects.filter(pk__in=latest))) / CHARS_PER_TOKEN
        if seconds > 0 and tokens > 0:
            return tokens / seconds, f"measured over the last {len(latest)} calls of {whose}", backend
    return float(TOKENS_PER_SECOND[backend]), "estimate", backend


def expectations(run: TrainingRun) -> dict:
    """What each harness is expected to do against the run's servers: {"harnesses": [{name, title, prompt_tokens,
    prompt_source, call_seconds, verdict ("fits" | "slow" | "times out"), why}], "speed", "speed_source",
    "backend", "call_limit", "deadline", "suggested", "warn"} ("suggested": the harness the form preselects, the
    default one unless it is expected to time out; "warn": some harness is not expected to fit)."""
    speed, speed_source, backend = server_speed(run)
    endpoint = ModelEndpoint.objects.filter(pk__in=ModelServer.objects.filter(checkpoint__run=run).values("endpoint"))
    call_limit = endpoint.values_list("timeout_seconds", flat=True).first()
    call_limit = call_limit or ModelEndpoint._meta.get_field("timeout_seconds").default
    deadline = settings.CLAWGYM_ROLLOUT_TIMEOUT_SECONDS
    rows = []
    for name, harness in HARNESSES.items():
        tokens, source = prompt_tokens(name)
        seconds = tokens / speed
        if seconds > call_limit:
            verdict = "times out"
            why = f"each model call takes about {seconds:,.0f} s, over the endpoint's {call_limit:g} s timeout"
        elif seconds * CALLS_A_ROLLOUT > deadline:
            verdict = "slow"
            why = f"only about {deadline / seconds:.0f} model calls fit in a rollout's {deadline} s"
        else:
            verdict, why = "fits", f"about {seconds:,.1f} s a model call"
        rows.append(
            {
                "name": name,
                "title": harness.title,
                "prompt_tokens": tokens,
                "prompt_source": source,
                "call_seconds": seconds,
                "verdict": verdict,
                "why": why,
            }
        )
    suggested = settings.CLAWGYM_DEFAULT_HARNESS
    if next(row["verdict"] for row in rows if row["name"] == suggested) == "times out":
        suggested = min(rows, key=lambda row: row["call_seconds"])["name"]
    return {
        "harnesses": rows,
        "speed": speed,
        "speed_source": speed_source,
        "backend": backend,
        "call_limit": call_limit,
        "deadline": deadline,
        "suggested": suggested,
        "warn": any(row["verdict"] != "fits" for row in rows),
    }
