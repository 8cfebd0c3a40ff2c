"""A step's rollouts, on the job side: the RL run's `gpu` job serves this to its trainer subprocess over loopback HTTP
(RolloutBridge), so the trainer knows no Django and every state change stays in the job (like SFT's streamed events).

For each prompt (a training task revision) of the step, `num_generations` rollouts are started through the ordinary
rollout jobs on the `sandbox` queue (sandbox-parallel across every sandbox worker, bounded by their slots), on a
ModelEndpoint registered for the run's policy (the live policy server, or vLLM), with `record_tokens: true` so the
proxy records the exact tokens and logprobs the policy sampled. When they are all scored (or the step's deadline
passed, or the run was cancelled) each rollout's samples are built from its recorded calls, its reward read
(training.rl.groups for what counts and what is dropped), and RLRollout rows written.
"""

import json
import logging
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.db import close_old_connections, connection, transaction

from evaluation.harnesses import ExitReason
from evaluation.models import Rollout
from evaluation.services.rollouts import create_rollouts, enqueue_rollout
from jobs.services import cancel_job
from llm.models import SERVED_KEY_PREFIX, ModelEndpoint
from tasks.models import TaskRevision
from training.rl.groups import (
    Generation,
    Group,
    all_dropped,
    apply_min_survivors,
    main_samples,
    policy_tokens,
    step_metrics,
    truncate,
)

from ..models import RLRollout, TrainingRun
from .samples import samples_for_rollout

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
FINISHED = ("scored", "incomplete", "failed", "cancelled")


class StepCancelled(Exception):
    pass


def policy_key_env(run) -> str:
    """The live policy server's key, as its endpoint names it: a served key of its own per attempt (derived from
    SECRET_KEY, llm.models.served_key), given to the trainer that serves it."""
    return f"{SERVED_KEY_PREFIX}RL{run.pk}_A{run.attempt}"


def policy_endpoint(run, policy_url: str):
    """The run's policy as a ModelEndpoint with the agent role (one per run, pointed at this attempt's server): the
    live server's own key, or the key variable a vLLM policy's config names (policy.api_key_env)."""
    config = run.config
    policy = config["policy"]
    live = policy["backend"] == "live" or run.cpu
    model = "policy" if live else (policy.get("served_model_name") or run.base_model_path)
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name=f"rl-run-{run.pk}-policy",
        defaults={
            "base_url": policy_url,
            "model": model,
            "roles": ["agent"],
            "enabled": True,
            "timeout_seconds": 600,
            "api_key_env": policy_key_env(run) if live else policy.get("api_key_env", ""),
            "served_at": policy_url if live else "",  # the live server's key goes to this attempt's address only
            "served_key_env": policy_key_env(run) if live else "",
            # every rollout of a step may call at once: the policy server batches (vLLM) or queues (live)
            "max_concurrent": max(4, min(int(config["prompts_per_step"]) * int(config["num_generations"]), 1024)),
            "sampling": {"temperature": config["temperature"], "max_tokens": config["max_completion_length"]},
        },
    )
    return endpoint


def harness_options(config: dict) -> dict:
    options = {"record_tokens": True, "timeout": int(config["rollout_timeout"])}
    if config["harness"] == "builtin":
        options["max_turns"] = int(config["max_turns"])
    elif config["harness"] == "openclaw":
        options.update(max_tokens=int(config["max_completion_length"]), context_window=int(config["max_context"]))
    return options


def group_prompts(revision_ids: list[int], generations: int) -> list[int]:
    """The step's prompts as TRL gives them (each repeated `generations` times in a row) → one revision a group."""
    if len(revision_ids) % generations:
        raise ValueError(f"{len(revision_ids)} prompts are not whole groups of {generations}")
    groups = [revision_ids[i : i + generations] for i in range(0, len(revision_ids), generations)]
    for group in groups:
        if len(set(group)) != 1:
            raise ValueError(f"a group mixes prompts: {group}")
    return [group[0] for group in groups]


def run_step(
    run_id: int, step: int, revision_ids: list[int], policy_url: str, *, first_group: int = 0, should_stop=None
) -> dict:
    """Start the step's rollouts, wait for them, and answer {"generations": [...], "metrics", "skipped"}: one
    generation per prompt given, in order, each {"rollout", "reward", "note", "samples": [{prompt_ids,
    completion_ids, logprobs, env_mask, exact}, …]}: every main-chain sample of the rollout, [] when it trains
    nothing (no reward, no sample that fits)."""
    run = TrainingRun.objects.get(pk=run_id)
    config = {**run.config, "base_model_path": run.base_model_path}
    generations = int(config["num_generations"])
    per_group = group_prompts([int(r) for r in revision_ids], generations)
    endpoint = policy_endpoint(run, policy_url)
    revisions = TaskRevision.objects.in_bulk(per_group)
    missing = [r for r in per_group if r not in revisions]
    if missing:
        raise ValueError(f"no task revision {missing}")
    # An earlier attempt's half-done step (only this process's groups: on several GPUs each asks for its own).
    mine = range(first_group, first_group + len(per_group))
    RLRollout.objects.filter(run=run, step=step, group_index__gte=mine.start, group_index__lt=mine.stop).delete()
    rows: list[list] = []
    with transaction.atomic():
        for index, revision_id in enumerate(per_group):
            rollouts = create_rollouts(
                revisions[revision_id],
                endpoint,
                harness=config["harness"],
                repeats=generations,
                options=harness_options(config),
                user=run.created_by,
            )
            group_rows = []
            for rollout in rollouts:
                enqueue_rollout(rollout, user=run.created_by)
                group_rows.append(
                    RLRollout.objects.create(run=run, step=step, group_index=mine[index], rollout=rollout)
                )
            rows.append(group_rows)
    rollout_ids = [row.rollout_id for group in rows for row in group]
    _wait(run, rollout_ids, deadline=time.monotonic() + float(config["batch_timeout"]), should_stop=should_stop)
    by_id = Rollout.objects.in_bulk(rollout_ids)
    groups = []
    for index, group_rows in enumerate(rows):
        group = Group(index=mine[index])
        for row in group_rows:
            group.generations.append(_generation(by_id[row.rollout_id], config))
        groups.append(apply_min_survivors(group, int(config["min_group_survivors"])))
    for group, group_rows in zip(groups, rows):
        for generation, row in zip(group.generations, group_rows):
            RLRollout.objects.filter(pk=row.pk).update(
                reward=generation.reward,
                samples=generation.samples,
                inexact_samples=generation.inexact_samples,
                dropped=group.dropped,
                wall_seconds=generation.wall_seconds,
            )
    metrics = step_metrics(groups)
    answer = [
        {"rollout": g.rollout_id, "reward": g.reward, "note": g.note, "samples": [sample_json(s) for s in g.trained]}
        for group in groups
        for g in group.generations
    ]
    return {"generations": answer, "metrics": metrics, "skipped": all_dropped(groups)}


def sample_json(sample) -> dict:
    return {
        "prompt_ids": list(sample.prompt_ids),
        "completion_ids": list(sample.completion_ids),
        "logprobs": [None if x is None else float(x) for x in sample.logprobs],
        "env_mask": [int(m) for m in sample.env_mask],
        "exact": bool(sample.exact),
    }


def _wait(run, rollout_ids: list[int], *, deadline: float, should_stop) -> None:
    """Until every rollout finished; past the deadline, or when the run is cancelled, the queued ones are cancelled
    and the running ones left to finish on their own (their rewards are not waited for: None)."""
    while True:
        left = Rollout.objects.filter(pk__in=rollout_ids).exclude(status__in=FINISHED).count()
        if not left:
            return
        cancelled = TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.Status.CANCELLED).exists()
        if cancelled or (should_stop is not None and should_stop()):
            cancel_queued(rollout_ids, "the RL run was cancelled")
            raise StepCancelled(f"run #{run.pk} cancelled while its rollouts ran")
        if time.monotonic() > deadline:
            cancel_queued(rollout_ids, "the RL step's rollouts ran past its batch_timeout")
            log.warning("run %s: %s rollouts still running past the step's deadline: left out", run.pk, left)
            return
        time.sleep(POLL_SECONDS)


def cancel_queued(rollout_ids: list[int], why: str) -> None:
    queued = list(Rollout.objects.filter(pk__in=rollout_ids, status=Rollout.Status.QUEUED).select_related("job_run"))
    for rollout in queued:
        if rollout.job_run is not None and not rollout.job_run.is_finished:
            cancel_job(rollout.job_run, user=None)
    Rollout.objects.filter(pk__in=[r.pk for r in queued], status=Rollout.Status.QUEUED).update(
        status=Rollout.Status.CANCELLED, exit_reason=ExitReason.CANCELLED, error=why
    )


def _generation(rollout, config: dict) -> Generation:
    """A finished rollout's reward and main-chain samples, each cut to the run's lengths. Reward None: it failed
    (infra), was cancelled or is still running, had no score of the kind the run trains on, or left no main-chain
    sample that fits (no model call recorded, only side calls, prompts longer than max_context)."""
    wall = (
        (rollout.finished_at - rollout.started_at).total_seconds()
        if rollout.finished_at and rollout.started_at
        else None
    )
    generation = Generation(rollout_id=rollout.pk, reward=None, wall_seconds=wall)
    if rollout.status not in ("scored", "incomplete"):
        generation.note = f"{rollout.status}: {rollout.exit_reason or rollout.error[:200]}"
        return generation
    reward = (
        rollout.code_score if config["reward"] == "code" else (rollout.score if rollout.status == "scored" else None)
    )
    samples = samples_of(rollout, tokenizer=config.get("base_model_path"))
    generation.samples = len(samples)
    generation.side_samples = sum(1 for s in samples if s.side)
    generation.inexact_samples = sum(1 for s in samples if not s.exact)
    generation.tokens_sampled = sum(policy_tokens(s) for s in samples)
    main = main_samples(samples)
    cut = [truncate(s, int(config["max_completion_length"]), int(config["max_context"])) for s in main]
    generation.main = [s for s in cut if s is not None and policy_tokens(s)]
    if not generation.main:
        generation.note = (
            "no sample to train on"
            if not samples
            else "only side samples"
            if not main
            else "no sample fits max_context"
        )
        return generation
    generation.reward = None if reward is None else float(reward)
    if reward is None:
        generation.note = f"no {config['reward']} score"
    return generation


def samples_of(rollout, tokenizer=None) -> list:
    """The rollout's samples from its recorded calls; a call without exact tokens is re-tokenized with the policy's
    tokenizer (loaded only then) and its sample counted inexact."""
    return list(samples_for_rollout(rollout, tokenizer=tokenizer))


# --- the bridge ---------------------------------------------------------------------------------------------------


class RolloutBridge:
    """POST /step {"step", "prompts": [revision ids], "policy_url"} with the bearer token → run_step's answer.
    Bound to loopback; the token (in the trainer's config file, which only the job and the trainer read) keeps any
    other local process from starting rollouts."""

    def __init__(self, run_id: int, host: str = "127.0.0.1"):
        self.run_id = run_id
        self.token = secrets.token_urlsafe(24)
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer((host, 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"rl-bridge-{run_id}", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        bridge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                log.debug("rl bridge: " + fmt, *args)

            def _send(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                if self.headers.get("Authorization") != f"Bearer {bridge.token}":
                    self._send(401, {"error": "bad token"})
                    return
                if self.path != "/step":
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                close_old_connections()
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                    answer = run_step(
                        bridge.run_id,
                        int(body["step"]),
                        body["prompts"],
                        body["policy_url"],
                        first_group=int(body.get("first_group") or 0),
                        should_stop=bridge.stopping.is_set,
                    )
                    self._send(200, answer)
                except StepCancelled as exc:
                    self._send(409, {"error": str(exc)})
                except Exception as exc:  # the trainer fails with the reason; the job records it
                    log.exception("rl step of run %s failed", bridge.run_id)
                    self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
                finally:
                    connection.close()

        return Handler


def disable_policy_endpoint(run) -> None:
    """The policy server is gone with the trainer: its endpoint opens nothing any more."""
    ModelEndpoint.objects.filter(name=f"rl-run-{run.pk}-policy").update(enabled=False)
