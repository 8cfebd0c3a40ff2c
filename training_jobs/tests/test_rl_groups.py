"""Groups of an RL step: rewards that count, groups dropped below min_group_survivors, the samples trained of a
rollout with several, truncation to the run's lengths, the step's metrics; the RL config's rules; the bridge's
grouping of TRL's repeated prompts. Plain Python and a database for the config's task checks."""

import pytest

from training.rl.groups import (
    METRICS,
    Generation,
    Group,
    all_dropped,
    apply_min_survivors,
    main_samples,
    percentile,
    step_metrics,
    truncate,
)
from training.rl.rollout_func import prompt_for, revision_of
from training_jobs.kinds import TrainingRunError, parse_overrides
from training_jobs.kinds.rl import build_rl_config
from training_jobs.rl.batches import group_prompts, harness_options
from training_jobs.rl.samples import Sample
from training_jobs.testing.rl_tasks import distinct_instruction


def group(index, rewards, walls=None):
    walls = walls or [1.0] * len(rewards)
    return Group(
        index=index,
        generations=[
            Generation(rollout_id=index * 10 + i, reward=r, wall_seconds=w, samples=1)
            for i, (r, w) in enumerate(zip(rewards, walls))
        ],
    )


def test_a_group_below_min_survivors_is_dropped_whole():
    kept = apply_min_survivors(group(0, [1.0, None, 0.0, 0.5]), 3)
    assert not kept.dropped and [g.reward for g in kept.generations] == [1.0, None, 0.0, 0.5]
    dropped = apply_min_survivors(group(1, [1.0, None, None, 0.5]), 3)
    assert dropped.dropped and [g.reward for g in dropped.generations] == [None] * 4
    assert "2 of 4 survived" in dropped.generations[0].note
    assert not all_dropped([kept, dropped]) and all_dropped([dropped]) and not all_dropped([])


def test_step_metrics_count_only_the_rewards_that_count():
    groups = [
        apply_min_survivors(group(0, [1.0, 0.0, 0.5, None], walls=[2.0, 4.0, 6.0, 30.0]), 3),
        apply_min_survivors(group(1, [1.0, None, None, None], walls=[1.0, 1.0, 1.0, 1.0]), 3),
    ]
    groups[0].generations[0].inexact_samples = 1
    groups[0].generations[1].tokens_sampled = 7
    groups[0].generations[1].side_samples = 2
    groups[0].generations[0].main = [sample(5, env=3), sample(2)]  # trained: the group kept, the rollout rewarded
    groups[0].generations[3].main = [sample(4)]  # no reward: trains nothing
    groups[1].generations[0].main = [sample(6)]  # its group dropped: trains nothing
    metrics = step_metrics(groups)
    assert set(metrics) <= set(METRICS)
    assert metrics["reward_mean"] == pytest.approx(0.5)  # group 1's 1.0 was dropped with its group
    assert metrics["reward_std"] == pytest.approx((1 / 6) ** 0.5)
    assert metrics["reward_spread"] == pytest.approx(1.0)  # only the kept group's max − min
    assert (metrics["groups"], metrics["groups_dropped"], metrics["rollouts"]) == (2, 1, 8)
    assert (metrics["inexact_samples"], metrics["samples"], metrics["tokens_sampled"]) == (1, 8, 7)
    assert (metrics["samples_trained"], metrics["side_samples"], metrics["tokens_trained"]) == (2, 2, 7)
    assert metrics["rollout_max_s"] == 30.0 and metrics["rollout_p50_s"] == pytest.approx(1.5)
    empty = step_metrics([apply_min_survivors(group(0, [None, None]), 1)])
    assert empty["reward_mean"] is None and empty["reward_spread"] is None and empty["groups_dropped"] == 1


def test_percentile_interpolates():
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.5) == 3.0
    assert percentile([1.0, 2.0, 3.0, 10.0], 0.5) == 2.5


def sample(policy, env=0, prompt=3):
    return Sample(
        prompt_ids=list(range(prompt)),
        completion_ids=list(range(policy + env)),
        logprobs=[-0.5] * policy + [0.0] * env,
        env_mask=[1] * policy + [0] * env,
    )


def test_every_main_chain_sample_is_trained_and_cut_to_fit():
    a, b, c = sample(5, env=20), sample(9), sample(9, env=1)
    side = Sample(**{**sample(50).__dict__, "side": True})
    assert main_samples([a, side, b, c]) == [a, b, c] and main_samples([side]) == [] and main_samples([]) == []
    rewarded = Generation(rollout_id=1, reward=0.5, main=[a, b])
    assert rewarded.trained == [a, b] and Generation(rollout_id=2, reward=None, main=[a]).trained == []
    cut = truncate(sample(6, env=4), max_completion=7, max_context=100)
    assert cut.completion_ids == list(range(7)) and cut.env_mask == [1] * 6 + [0] and len(cut.logprobs) == 7
    assert truncate(sample(6, prompt=10), max_completion=50, max_context=12).completion_ids == [0, 1]
    assert truncate(sample(6, prompt=10), max_completion=50, max_context=10) is None
    whole = sample(3)
    assert truncate(whole, 10, 100) is whole


def test_trl_prompts_become_groups_of_one_task():
    assert revision_of(prompt_for(42)) == 42
    with pytest.raises(ValueError, match="not an RL prompt"):
        revision_of("hello")
    assert group_prompts([5, 5, 7, 7], 2) == [5, 7]
    with pytest.raises(ValueError, match="mixes prompts"):
        group_prompts([5, 7, 7, 7], 2)
    with pytest.raises(ValueError, match="not whole groups"):
        group_prompts([5, 5, 5], 2)


def test_rl_config_paper_preset_and_rules():
    paper = build_rl_config("paper")
    assert (paper["epsilon"], paper["epsilon_high"], paper["beta"], paper["learning_rate"]) == (0.2, 0.28, 0.0, 1e-6)
    assert (paper["temperature"], paper["max_completion_length"], paper["max_context"]) == (0.7, 8192, 65536)
    assert (paper["prompts_per_step"], paper["num_generations"], paper["min_group_survivors"]) == (8, 8, 4)
    edited = build_rl_config("paper", parse_overrides(["num_generations=4", "reward=hybrid", "policy.backend=live"]))
    assert edited["num_generations"] == 4 and edited["reward"] == "hybrid" and edited["policy"]["backend"] == "live"
    for bad, says in [
        ("num_generations=1", "at least 2"),
        ("min_group_survivors=9", "between 1 and"),
        ("reward=judge", "one of"),
        ("temperature=0", "above 0"),
        ("max_completion_length=70000", "below max_context"),
        ("epsilon_high=0.1", "epsilon_high"),
        # The trainer normalises the loss per token over the step (DAPO) only: training/tests/test_grpo_every_sample.py.
        ("loss_type=grpo", "one of"),
        ("lora.r=4", "unknown config key"),
        ("mix_share=1.0", r"in \[0, 1\)"),
        ("mix_tasks=[1]", "unknown config key"),  # given apart from the edits, as tasks are (and guarded)
        # Each rollout's deadline: capped as every rollout's is (evaluation.harnesses.check_duration).
        ("rollout_timeout=1000000000", r"rollout_timeout must be at most 3600 s \(CLAWGYM_MAX_ROLLOUT_TIMEOUT\)"),
    ]:
        with pytest.raises(TrainingRunError, match=says):
            build_rl_config("paper", parse_overrides([bad]))
    kept = build_rl_config("paper", {"max_steps": 3}, base={**paper, "tasks": [1, 2]})
    assert kept["tasks"] == [1, 2] and kept["max_steps"] == 3


def test_harness_options_ask_for_recorded_tokens():
    config = build_rl_config("paper")
    assert harness_options(config) == {"record_tokens": True, "timeout": 1800, "max_turns": 40}
    openclaw = harness_options({**config, "harness": "openclaw"})
    assert openclaw["record_tokens"] and (openclaw["max_tokens"], openclaw["context_window"]) == (8192, 65536)


# --- the run services (database) ----------------------------------------------------------------------------------


def revision(external_id: str):
    from tasks.package import PackageFile, TaskPackage
    from tasks.services import save_package

    files = [PackageFile("a.txt", b"a\n", "input"), PackageFile("reward.sh", b"echo 1\n", "reward")]
    return save_package(
        TaskPackage(
            external_id=external_id,
            instruction=distinct_instruction(external_id),
            files=files,
            metadata={"category": "Testing", "grading_type": "automated"},
        )
    ).revision


@pytest.mark.django_db
def test_an_rl_run_is_queued_on_the_gpu_queue_and_refuses_benchmark_tasks():
    from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
    from training_jobs.kinds.rl import rl_run_json, tasks_from
    from training_jobs.services.runs import cancel_training_run, clone_training_run, start_training_run

    one, two, pinned = revision("rl-one"), revision("rl-two"), revision("rl-bench")
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=pinned)
    with pytest.raises(TrainingRunError, match="contamination guard.*rl-bench"):
        start_training_run(kind="rl", user=None, base_model_path="/models/x", tasks=["rl-one", pinned.pk])
    with pytest.raises(TrainingRunError, match="no task 'nope'"):
        start_training_run(kind="rl", user=None, base_model_path="/models/x", tasks=["nope"])
    with pytest.raises(TrainingRunError, match="give the tasks"):
        start_training_run(kind="rl", user=None, base_model_path="/models/x", tasks=[])
    assert {r.pk for r in tasks_from("limit=10")} == {one.pk, two.pk}  # the benchmark task left out
    with pytest.raises(TrainingRunError, match="unknown task selection filter"):
        tasks_from("colour=red")

    run = start_training_run(
        kind="rl",
        user=None,
        base_model_path="/models/x",
        tasks=["rl-one", two.pk, one.pk],
        harness="openclaw",
        overrides={"num_generations": 4},
    )
    run.refresh_from_db()
    assert run.kind == "rl" and run.job_run.kind == "training.rl_run" and run.job_run.queue == "gpu"
    assert run.config["tasks"] == [one.pk, two.pk] and run.config["harness"] == "openclaw"
    assert run.config["num_generations"] == 4 and run.config["policy"]["backend"] == "vllm" and run.total_steps == 200
    assert rl_run_json(run) == {
        "run": run.pk,
        "status": "queued",
        "steps": 0,
        "rollouts": 0,
        "checkpoints": [],
        "metrics": [],
    }
    clone = clone_training_run(run, {"learning_rate": 2e-6}, enqueue=False, user=None)
    assert clone.kind == "rl" and clone.cloned_from == run
    assert clone.config == {**run.config, "learning_rate": 2e-6}
    cpu = start_training_run(
        kind="rl", user=None, base_model_path="/models/x", tasks=[one.pk], preset="paper", cpu=True, enqueue=False
    )
    assert cpu.config["policy"]["backend"] == "live" and cpu.config["bf16"] is False
    cancelled = cancel_training_run(run, user=None)
    assert cancelled.status == "cancelled" and cancelled.job_run.status == "cancelled"


@pytest.mark.django_db
def test_a_step_stopped_while_its_rollouts_wait_cancels_the_queued_ones():
    from evaluation.models import Rollout
    from training_jobs.models import RLRollout
    from training_jobs.rl.batches import StepCancelled, run_step
    from training_jobs.services.runs import start_training_run

    one = revision("rl-stop")
    run = start_training_run(
        kind="rl", user=None, base_model_path="/models/x", tasks=[one.pk], preset="tiny-cpu", cpu=True, enqueue=False
    )
    with pytest.raises(StepCancelled):  # no worker takes them: they are still queued when the job stops
        run_step(run.pk, 1, [one.pk, one.pk], "http://127.0.0.1:9/v1", should_stop=lambda: True)
    rows = RLRollout.objects.filter(run=run, step=1)
    assert rows.count() == 2
    rollouts = Rollout.objects.filter(pk__in=rows.values("rollout"))
    assert {r.status for r in rollouts} == {"cancelled"} and all(r.harness_options["record_tokens"] for r in rollouts)
    assert all(r.job_run.status == "cancelled" for r in rollouts)
    endpoint = rollouts.first().endpoint
    assert (endpoint.name, endpoint.base_url, endpoint.model) == (
        f"rl-run-{run.pk}-policy",
        "http://127.0.0.1:9/v1",
        "policy",
    )
    assert endpoint.sampling == {"temperature": 1.0, "max_tokens": 32} and "agent" in endpoint.roles


@pytest.mark.django_db
def test_train_kind_rl_says_what_it_needs():
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--task ID … or --tasks-from"):
        call_command("train", "--kind", "rl", "--base-model", "/models/x", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="--base-model: 'tinyx' is neither a registered base model"):
        call_command(
            "train", "--kind", "rl", "--base-model", "tinyx", "--task", "1", stdout=StringIO(), stderr=StringIO()
        )
    with pytest.raises(CommandError, match="names no task"):
        call_command(
            "train",
            "--kind",
            "rl",
            "--base-model",
            "/models/x",
            "--tasks-from",
            "status=ready",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    revision("rl-cmd")
    with pytest.raises(CommandError, match=r"min_group_survivors must be between 1 and num_generations \(2\)"):
        call_command(
            "train",
            "--kind",
            "rl",
            "--base-model",
            "/models/x",
            "--task",
            "rl-cmd",
            "--set",
            "num_generations=2",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    with pytest.raises(CommandError, match="no job worker took training run"):
        call_command(
            "train",
            "--kind",
            "rl",
            "--base-model",
            "/models/x",
            "--task",
            "rl-cmd",
            "--start-timeout",
            "0.5",
            stdout=StringIO(),
            stderr=StringIO(),
        )


@pytest.mark.django_db
def test_an_rl_run_mixes_other_tasks_into_every_step():
    """Mix tasks (training.rl.task_mix): stored among the run's tasks (what the contamination guard checks) and apart
    as its mix; one of the run's own tasks is left out of the mix; a clone keeps both; a mix that cannot be drawn,
    a mix task a benchmark pins, or an edit that leaves a step no mix prompt is refused."""
    from benchmarks.models import Benchmark, BenchmarkVersion, PinnedRevision
    from training_jobs.kinds import get_kind, rl_pages
    from training_jobs.services.runs import clone_training_run, resume_training_run, start_training_run

    own, other, third, pinned = (revision(f"rl-mix-{n}") for n in ("own", "other", "third", "bench"))
    version = BenchmarkVersion.objects.create(benchmark=Benchmark.objects.create(name="mix-bench"), number=1)
    PinnedRevision.objects.create(version=version, revision=pinned)
    start = {"kind": "rl", "user": None, "base_model_path": "/models/x", "enqueue": False}

    run = start_training_run(
        **start,
        tasks=[own.pk],
        mix_tasks=["rl-mix-other", third.pk, own.pk],
        overrides={"mix_share": 0.25, "prompts_per_step": 4},
    )
    assert run.config["tasks"] == [own.pk, other.pk, third.pk] and run.config["mix_tasks"] == [other.pk, third.pk]
    assert run.config["mix_share"] == 0.25 and "(+2 mixed in)" in run.name
    assert get_kind("rl").inputs(run) == {"tasks": [own.pk], "mix_tasks": [other.pk, third.pk], "harness": "builtin"}
    assert [t["mix"] for t in rl_pages.run_tasks(run)] == [False, True, True]  # the run page marks the mix
    clone = clone_training_run(run, {"learning_rate": 2e-6}, enqueue=False, user=None)
    assert clone.config == {**run.config, "learning_rate": 2e-6}
    # A run without a mix stores none: its config is as before.
    plain = start_training_run(**start, tasks=[own.pk])
    assert "mix_tasks" not in plain.config and plain.config["mix_share"] == 0.0

    for given, overrides, says in (
        ([other.pk], {}, "mix_share is 0"),
        ([], {"mix_share": 0.25}, "needs mix tasks"),
        ([other.pk], {"mix_share": 0.1, "prompts_per_step": 4}, "rounds to 0 mix prompt"),
        ([own.pk], {"mix_share": 0.25}, "every mix task is among the run's own tasks"),
        ([pinned.pk], {"mix_share": 0.25}, "contamination guard.*rl-mix-bench"),
    ):
        with pytest.raises(TrainingRunError, match=says):
            start_training_run(**start, tasks=[own.pk], mix_tasks=given, overrides=overrides)
    with pytest.raises(TrainingRunError, match="an SFT run trains on a dataset"):
        start_training_run(**{**start, "kind": "sft"}, mix_tasks=[other.pk])
    # Resuming with edited steps checks the stored mix again.
    with pytest.raises(TrainingRunError, match="rounds to 0 mix prompt"):
        resume_training_run(run, user=None, overrides={"prompts_per_step": 1}, enqueue=False)


@pytest.mark.django_db
def test_train_kind_rl_takes_mix_tasks():
    from io import StringIO

    from django.core.management import CommandError, call_command

    from training_jobs.models import TrainingRun

    revision("rl-cmd-own")
    mixed = [revision(f"rl-cmd-mix-{n}") for n in (1, 2)]
    command = ["train", "--kind", "rl", "--base-model", "/models/x", "--task", "rl-cmd-own", "--start-timeout", "0.5"]
    err = StringIO()
    with pytest.raises(CommandError, match="no job worker took training run"):
        call_command(
            *command,
            "--mix-tasks-from",
            "prefix=rl-cmd-",
            "--set",
            "mix_share=0.5",
            "--set",
            "prompts_per_step=2",
            stdout=StringIO(),
            stderr=err,
        )
    run = TrainingRun.objects.latest("pk")
    # The selection's tasks but the run's own are the mix.
    assert sorted(run.config["mix_tasks"]) == sorted(r.pk for r in mixed)
    assert "3 tasks (2 of them the mix, 50% of each step)" in err.getvalue()
    with pytest.raises(CommandError, match="mix_share needs mix tasks"):
        call_command(*command, "--set", "mix_share=0.5", stdout=StringIO(), stderr=StringIO())
