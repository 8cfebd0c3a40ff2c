"""RL runs on CPU with a tiny Qwen3 policy: real GRPOTrainer steps (`accelerate launch -m training.trainers.grpo`)
whose rollout_func ran real sandboxed builtin-harness rollouts on a django-q worker (sandbox queue), through the
recording proxy (the live ASGI server) to the trainer's live policy server, scored by real checkers. Group dropping
(hybrid reward on a task whose rubric nobody judges: no task score, reward None), a step whose every group dropped
(skipped: the weights do not move), a killed trainer resumed from its last checkpoint, and `train --kind rl --json`'s
exact shape."""

import json
import os
import signal
import threading
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.models import Rollout
from evaluation.testing import needs_bwrap
from jobs.testing import start_django_q_worker, use_engine
from training_jobs.models import Checkpoint, RLRollout, TrainingMetric, TrainingRun
from training_jobs.run_jobs import execute_training, run_dir
from training_jobs.services.runs import start_training_run
from training_jobs.testing.rl_tasks import task

pytestmark = [needs_bwrap, pytest.mark.workers, pytest.mark.once, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def sandbox_worker_process(_live_server_asgi_module, django_db_setup, django_db_blocker):
    """A django-q cluster (two workers: a step's rollouts run side by side) whose rollouts reach the proxy of this
    test process (the live ASGI server)."""
    with django_db_blocker.unblock():
        worker = start_django_q_worker(workers=2, proxy_url=_live_server_asgi_module.url)
    yield worker
    worker.stop()
    worker.cleanup()


@pytest.fixture
def sandbox_worker(sandbox_worker_process, live_server_asgi, settings, tmp_path):
    if not sandbox_worker_process.alive():
        pytest.fail(f"the django-q worker died:\n{sandbox_worker_process.log_tail()}")
    settings.CLAWGYM_TRAINING_DIR = tmp_path / "training"
    os.environ["HF_HUB_OFFLINE"] = "1"
    with use_engine("django_q"):
        yield sandbox_worker_process


def weights(path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def same_weights(a, b) -> bool:
    left, right = weights(a), weights(b)
    return left.keys() == right.keys() and all((left[k] == right[k]).all() for k in left)


def test_two_grpo_steps_on_sandboxed_rollouts_with_a_dropped_group(sandbox_worker, tiny_model_path):
    good, judged = task("rl-summary"), task("rl-rubric", rubric=True)
    out = StringIO()
    call_command(
        "train",
        "--kind",
        "rl",
        "--base-model",
        tiny_model_path,
        "--task",
        "rl-summary",
        "--task",
        str(judged.pk),
        "--preset",
        "tiny-cpu",
        "--cpu",
        "--here",
        "--json",
        "--set",
        "max_steps=2",
        "--set",
        "min_group_survivors=2",
        "--set",
        "reward=hybrid",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    run = TrainingRun.objects.get(pk=report["run"])
    assert set(report) == {"run", "status", "steps", "rollouts", "checkpoints", "metrics"}
    assert (report["status"], report["steps"], report["rollouts"]) == ("succeeded", 2, 8), run.log_tail
    assert [c["step"] for c in report["checkpoints"]] == [1, 2]
    assert [set(m) for m in report["metrics"]] == [
        {
            "step",
            "reward_mean",
            "reward_std",
            "groups_dropped",
            "inexact_samples",
            "rollout_p50_s",
            "rollout_max_s",
            "loss",
        }
    ] * 2
    assert "training.trainers.grpo" in run.log_tail and run.config["tasks"] == [good.pk, judged.pk]

    for metric in TrainingMetric.objects.filter(run=run).order_by("step"):
        step, values = metric.step, metric.values
        rows = list(RLRollout.objects.filter(run=run, step=step).select_related("rollout"))
        assert len(rows) == 4 and {r.group_index for r in rows} == {0, 1}
        # Real rollouts on the worker, with the exact-token recording asked of the proxy.
        for row in rows:
            rollout = row.rollout
            assert rollout.harness == "builtin" and rollout.harness_options["record_tokens"] is True
            assert (
                rollout.worker.split(":")[1] != str(os.getpid()) and rollout.endpoint.name == f"rl-run-{run.pk}-policy"
            )
        kept = [r for r in rows if r.rollout.revision_id == good.pk]
        dropped = [r for r in rows if r.rollout.revision_id == judged.pk]
        # Nobody judged the rubric: no task score, reward None, the group dropped and counted; the other one trained.
        assert all(r.reward is None and r.dropped and r.rollout.status == "incomplete" for r in dropped)
        assert all(r.rollout.status == "scored" and r.reward == r.rollout.score and not r.dropped for r in kept)
        assert all(r.samples >= 1 and r.inexact_samples == 0 for r in kept)
        rewards = [r.reward for r in kept]
        assert values["groups"] == 2 and values["groups_dropped"] == 1 and values["rollouts"] == 4
        assert values["reward_mean"] == pytest.approx(sum(rewards) / 2)
        assert values["reward_spread"] == pytest.approx(max(rewards) - min(rewards))
        assert values["inexact_samples"] == 0 and values["samples"] >= 2 and values["tokens_sampled"] > 0
        assert 0 < values["rollout_p50_s"] <= values["rollout_max_s"]
        # The trainer's logprobs of the tokens the policy sampled (through the proxy) are the policy's own.
        assert values["logprob_mismatch"] < 1e-4
        assert values["skipped"] == 0 and "loss" in values and values["learning_rate"] > 0
    last = Checkpoint.objects.get(run=run, step=2)
    assert (Path(last.path) / "config.json").exists()
    spreads = [m.values["reward_spread"] for m in TrainingMetric.objects.filter(run=run)]
    if any(spreads):  # a group whose rewards differ has non-zero advantages: the policy moved
        assert not same_weights(tiny_model_path, last.path)


def test_a_step_whose_every_group_dropped_is_skipped(sandbox_worker, tiny_model_path):
    judged = task("rl-rubric-only", rubric=True)
    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path=tiny_model_path,
        tasks=[judged.pk],
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 1, "reward": "hybrid"},
        enqueue=False,
    )
    execute_training(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.log_tail
    [metric] = TrainingMetric.objects.filter(run=run)
    assert metric.values["skipped"] == 1 and metric.values["groups_dropped"] == metric.values["groups"] == 2
    assert "loss" not in metric.values and "reward_mean" not in metric.values
    assert RLRollout.objects.filter(run=run, dropped=True, reward=None).count() == 4
    # Not trained on: the step's checkpoint holds the base model's weights.
    assert same_weights(tiny_model_path, Checkpoint.objects.get(run=run, step=1).path)


def test_a_killed_trainer_resumes_from_its_last_checkpoint(sandbox_worker, tiny_model_path):
    good = task("rl-resume")
    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path=tiny_model_path,
        tasks=[good.pk],
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_steps": 50, "prompts_per_step": 1},
        enqueue=False,
    )

    def body():
        from django.db import connection

        try:
            execute_training(run.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    pid_file = run_dir(run) / "trainer.pid"
    deadline = time.monotonic() + 240
    while not Checkpoint.objects.filter(run=run).exists():
        assert time.monotonic() < deadline, TrainingRun.objects.get(pk=run.pk).log_tail
        time.sleep(0.2)
    os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    thread.join(timeout=120)
    run.refresh_from_db()
    assert run.status == "failed" and "killed by signal 9" in run.error and "--resume" in run.error
    last = Checkpoint.objects.filter(run=run).order_by("-step").first()

    out = StringIO()
    call_command(
        "train",
        "--resume",
        str(run.pk),
        "--set",
        f"max_steps={last.step + 1}",
        "--here",
        "--json",
        stdout=out,
        stderr=StringIO(),
    )
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    run.refresh_from_db()
    assert report["status"] == "succeeded" and report["steps"] == last.step + 1, run.log_tail
    assert run.attempt == 2 and run.resumed_from == last and f"resumed from checkpoint step {last.step}" in run.log_tail
    # One metric row and one group of rollouts per step, none twice; the steps past the checkpoint sampled again.
    steps = list(TrainingMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))
    assert steps == list(range(1, last.step + 2))
    assert sorted(set(RLRollout.objects.filter(run=run).values_list("step", flat=True))) == steps
    assert RLRollout.objects.filter(run=run).count() == 2 * len(steps)
    assert Rollout.objects.filter(pk__in=RLRollout.objects.filter(run=run).values("rollout")).count() == 2 * len(steps)


@pytest.mark.harness
def test_an_openclaw_rollout_of_an_rl_step_has_an_exact_sample(sandbox_worker, tiny_model_path):
    """The real OpenClaw CLI streams its calls: the proxy records the live policy's streamed token ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evaluation.harnesses import HarnessUnavailable, get_harness
    from llm.models import served_key
    from training.rl.policy_server import LivePolicy, PolicyServer
    from training_jobs.rl.batches import policy_key_env, run_step
    from training_jobs.testing import sampling

    try:
        get_harness("openclaw").check_available()
    except HarnessUnavailable as exc:
        from sandbox.testing import unavailable

        unavailable(f"the OpenClaw harness cannot run here: {exc}")
    good = task("rl-openclaw")
    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path=tiny_model_path,
        tasks=[good.pk],
        harness="openclaw",
        preset="tiny-cpu",
        cpu=True,
        overrides={"max_context": 32768, "prompts_per_step": 1},
        enqueue=False,
    )
    # One OpenClaw rollout is enough here (its ~18K-token prompt takes the tiny CPU policy a while); a run's config
    # never has groups of one (GRPO compares a group's rollouts), so the stored config is edited for this step only.
    TrainingRun.objects.filter(pk=run.pk).update(config={**run.config, "num_generations": 1, "min_group_survivors": 1})
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, local_files_only=True)
    # Its key, as the run's job gives it to the trainer (the policy endpoint names it; the proxy derives it too).
    server = PolicyServer(
        LivePolicy(lambda: model, tokenizer, temperature=1.0, max_tokens=32, max_context=32768),
        api_key=served_key(policy_key_env(run)),
    )
    try:
        with sampling(server.policy):
            answer = run_step(run.pk, 1, [good.pk], server.start())
    finally:
        server.stop()
    rows = list(RLRollout.objects.filter(run=run, step=1).select_related("rollout"))
    assert len(rows) == 1 and all(r.rollout.harness == "openclaw" for r in rows)
    for row, generation in zip(rows, answer["generations"]):
        rollout = row.rollout
        assert rollout.status == "scored", (rollout.exit_reason, rollout.error, rollout.log_tail[-2000:])
        assert (
            row.reward == rollout.code_score == generation["reward"] and row.samples >= 1 and row.inexact_samples == 0
        )
        # Every call of OpenClaw's is a sample of its own (its internal-context message breaks the chain): all of
        # them go to the trainer, exact, each with policy tokens.
        assert len(generation["samples"]) == row.samples >= 1
        for sample in generation["samples"]:
            assert sample["exact"] and len(sample["completion_ids"]) == len(sample["logprobs"])
            assert len(sample["env_mask"]) == len(sample["completion_ids"])
            assert sum(sample["env_mask"]) >= 1
    assert answer["metrics"]["inexact_samples"] == 0 and answer["metrics"]["rollouts"] == 1 and not answer["skipped"]
