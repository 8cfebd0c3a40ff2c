"""The training speed bench's own parts (the timing is the bench's to run, outside CI): its samples are agent
conversations the SFT trainer takes, and its configuration is one the trainer reads whole."""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_speed_bench  # noqa: E402


def test_the_config_is_a_training_runs_and_the_samples_load(tmp_path):
    from training.trainers.sft import load_samples, sft_config

    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(train_speed_bench.sample(n)) + "\n" for n in range(3)))
    samples = load_samples(str(path))
    assert len(samples) == 3 and samples[0]["messages"] != samples[1]["messages"]  # each with its own numbers
    roles = [m["role"] for m in train_speed_bench.sample(0)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]

    args = argparse.Namespace(max_length=512, warmup=1, steps=3, batch=2)
    config = train_speed_bench.trainer_config(args, "/models/m", str(path), str(tmp_path / "out"))
    trl = sft_config(config)  # every key the trainer reads is there
    assert (trl.max_steps, trl.per_device_train_batch_size, trl.max_length) == (4, 2, 512)
    assert trl.packing and trl.assistant_only_loss and trl.use_cpu
