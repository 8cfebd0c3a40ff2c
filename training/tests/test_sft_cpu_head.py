"""The SFT trainer's LM head on CPU (training.trainers.sft.head_on_labelled_tokens): it projects only the labelled
tokens, and a step's loss, gradients and metrics are those of TRL's own fused head on the same packed batch."""

import json

import pytest
import torch


def conversation(n: int) -> dict:
    call = {"id": "c0", "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": f"{n}.md"})}}
    return {
        "messages": [
            {"role": "system", "content": "You work in a local workspace."},
            {"role": "user", "content": f"Read {n}.md and tell me its first line."},
            {"role": "assistant", "content": f"Reading {n}.md.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": f"line {n}\nline {n + 1}\n"},
            {"role": "assistant", "content": f"The first line is: line {n}."},
        ],
        "tools": [],
    }


def cpu_config(model_path: str, tmp_path) -> dict:
    dataset = tmp_path / "samples.jsonl"
    dataset.write_text("".join(json.dumps(conversation(n)) + "\n" for n in range(8)))
    return {
        "base_model_path": model_path,
        "dataset_path": str(dataset),
        "output_dir": str(tmp_path / "out"),
        "packing": True,
        "max_length": 256,
        "bf16": False,
        "cpu": True,
        "learning_rate": 1e-4,
        "num_train_epochs": 1,
        "max_steps": 1,
        "per_device_batch_size": 2,
        "gradient_accumulation_steps": 1,
        "gradient_checkpointing": False,
        "lr_scheduler_type": "constant",
        "warmup_ratio": 0.0,
        "weight_decay": 0.0,
        "save_steps": 10**9,
        "save_total_limit": 0,
        "logging_steps": 1,
        "seed": 0,
    }


@pytest.mark.nodb
def test_the_cpu_head_scores_labelled_tokens_only_and_trains_as_trls(tiny_model_path, tmp_path):
    from transformers import set_seed
    from trl.trainer.utils import add_fused_lm_head

    from training.trainers.sft import load_model, load_samples, sft_trainer

    config = cpu_config(tiny_model_path, tmp_path)
    set_seed(0)
    trainer = sft_trainer(config, load_samples(config["dataset_path"]))
    batch = next(iter(trainer.get_train_dataloader()))
    labelled = int((batch["labels"][:, 1:] != -100).sum())
    assert 0 < labelled < batch["labels"].numel() - 1  # a packed batch with prompt and tool tokens left out

    reference = load_model(config)  # the same weights, with TRL's fused head alone
    add_fused_lm_head(reference, outputs=("log_probs", "entropy", "is_top1"))
    reference.train()
    trainer.model.train()

    rows = []
    hook = trainer.model.get_output_embeddings().register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    ours = trainer.model(**batch, fused_lm_head=True)
    hook.remove()
    theirs = reference(**batch, fused_lm_head=True)
    assert rows == [labelled]  # one projection, of the labelled tokens (TRL's CPU head projects every position)

    assert torch.equal(ours.label_mask, theirs.label_mask)
    torch.testing.assert_close(ours.loss, theirs.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.log_probs, theirs.log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.entropy, theirs.entropy, rtol=1e-4, atol=1e-5)
    assert torch.equal(ours.is_top1, theirs.is_top1)

    ours.loss.backward()
    theirs.loss.backward()
    reference_grads = dict(reference.named_parameters())
    for name, parameter in trainer.model.named_parameters():
        torch.testing.assert_close(parameter.grad, reference_grads[name].grad, rtol=1e-4, atol=1e-6, msg=name)

    # TRL's loss and metrics read these fields: a step trains and logs as with its own head
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logged and {"entropy", "mean_token_accuracy"} <= set(logged[0])
