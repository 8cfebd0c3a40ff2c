"""Plain helpers shared by the evaluation page tests (and clawgym_site's layout test): scripted endpoints, a frozen
benchmark version, finished runs with known scores (STRONG, WEAK, FLAKY), a dressed world of three runs, and URL and
text helpers."""

import re

from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
from evaluation.harnesses.base import ExitReason
from evaluation.models import EvalRun, Rollout
from evaluation.services import run_progress, runs
from evaluation.tests.evalkit import make_tasks
from llm.models import ModelEndpoint

# Per task, the score of each of two repeats (None: the infrastructure failed it: no score).
STRONG = {"eval-a": [1.0, 1.0], "eval-b": [1.0, 0.5], "eval-c": [1.0, 1.0], "eval-d": [0.75, 0.75]}

WEAK = {"eval-a": [1.0, 1.0], "eval-b": [0.75, 0.75], "eval-c": [0.5, 0.75], "eval-d": [0.25, 0.25]}

FLAKY = {"eval-a": [1.0, 1.0], "eval-b": [1.0, 1.0], "eval-c": [1.0, 1.0], "eval-d": [None, 0.5]}

TOKENS = {"eval-a": 100, "eval-b": 200, "eval-c": 300, "eval-d": 400}  # input tokens of each rollout of a task

CHECKS = ("input_kept", "reported_done", "summary_right", "summary_written")


def endpoint(name: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name, base_url="http://127.0.0.1:9/v1", model=f"{name}-model", roles=["agent"]
    )


def freeze(revisions, name="eval-bench") -> BenchmarkVersion:
    benchmark, _ = Benchmark.objects.get_or_create(name=name)
    number = benchmark.versions.count() + 1
    version = BenchmarkVersion.objects.create(benchmark=benchmark, number=number)
    PinnedRevision.objects.bulk_create(PinnedRevision(version=version, revision=r) for r in revisions)
    return version


def finished_run(model: ModelEndpoint, version, scores: dict, *, finish=True) -> EvalRun:
    """A run whose rollouts ended as `scores` says (scored, or an infra failure for None), its figures recomputed."""
    run, _ = runs.create_eval_run(
        endpoint=model, benchmark_version=version, harness="builtin", repeats=2, fresh=True, user=None
    )
    EvalRun.objects.filter(pk=run.pk).update(status=EvalRun.Status.RUNNING, started_at=timezone.now())
    for rollout in run.rollouts.select_related("revision__task"):
        task = rollout.revision.task.external_id
        if not finish and rollout.repeat_index == 1:
            continue  # still queued
        score = scores[task][rollout.repeat_index]
        common = {
            "attempt": 1,
            "finished_at": timezone.now(),
            "input_tokens": TOKENS[task],
            "output_tokens": 10,
            "cost": "0.01",
            "agent_seconds": 2.0,
        }
        if score is None:  # every attempt the run allows failed: it is not retried again
            common["attempt"] = run.max_attempts
            Rollout.objects.filter(pk=rollout.pk).update(
                status=Rollout.Status.FAILED, exit_reason=ExitReason.UPSTREAM_ERROR, **common
            )
        else:
            Rollout.objects.filter(pk=rollout.pk).update(
                status=Rollout.Status.SCORED, exit_reason=ExitReason.COMPLETED, score=score, **common
            )
    run_progress.recompute_run(run)
    # As the last rollout's worker would: the run finishes once nothing is left to run.
    run_progress.rollout_changed(run.rollouts.filter(status=Rollout.Status.SCORED).order_by("pk").last().pk)
    run.refresh_from_db()
    return run


def url(name, *args, **query):
    path = reverse(f"evaluations:{name}", args=args)
    return path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode()).strip()


def build_world() -> dict:
    """Three finished runs of one benchmark version, dressed: {"strong", "weak", "flaky"} (test_eval_pages' scores)."""
    version = freeze(make_tasks().values())
    return {
        name: dress(finished_run(endpoint(name), version, scores))
        for name, scores in (("strong", STRONG), ("weak", WEAK), ("flaky", FLAKY))
    }


def dress(run):
    """Give the run's rollouts what a real one has: a transcript, a final message and the checker's sub-scores (all
    four at 1 for a full score, `summary_right` at 0 otherwise) and, for eval-b, a rubric judgement."""
    for rollout in run.rollouts.select_related("revision__task"):
        task, repeat = rollout.revision.task.external_id, rollout.repeat_index
        right = rollout.score == 1.0
        answer = "3 apples, 2 pears" if right else f"I miscounted the pears in {task}"
        sub = dict.fromkeys(CHECKS, 1.0) | ({} if right else {"summary_right": 0.0})
        judgements = (
            [{"rule": "tidy", "weight": 1, "score": 1.0 if right else 0.0, "reason": "ok"}] if task == "eval-b" else []
        )
        Rollout.objects.filter(pk=rollout.pk).update(
            final_message=f"Done with {task} (repeat {repeat}).",
            sub_scores=sub if rollout.score is not None else {},
            check_status="ok" if rollout.score is not None else "",
            rubric_judgements=judgements,
            transcript=[
                {"role": "user", "content": f"Count the fruit (task {task})."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c1", "name": "write", "arguments": {"path": "summary.txt", "content": answer}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "written"},
                {"role": "assistant", "content": f"Done: {answer}."},
            ],
        )
    return run
