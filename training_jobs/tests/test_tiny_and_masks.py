"""The tiny model and tokenizer (built by the tiny_model command), and the multi-turn loss masks checked against the
per-prefix re-render method on varied conversations."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from training import masks
from training.tiny_model import SPECIAL_TOKENS, TOOLS, tiny_tokenizer
from training_jobs.testing import SYSTEM, call, varied_conversations


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = StringIO()
    call_command("tiny_model", str(tmp_path_factory.mktemp("tiny") / "model"), "--json", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])["path"]


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny, local_files_only=True)


def test_tiny_model_loads_and_generates(tiny, tokenizer):
    import torch
    from transformers import AutoModelForCausalLM
    from trl.chat_template_utils import qwen3_training_chat_template

    model = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.vocab_size == len(tokenizer) and model.config.num_hidden_layers == 2
    assert tokenizer.chat_template == qwen3_training_chat_template
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    for token in SPECIAL_TOKENS:  # each one token, never split
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "List the folder."}],
        tools=TOOLS,
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        generated = model.generate(**prompt, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert generated.shape[1] == prompt["input_ids"].shape[1] + 4


def test_tiny_tokenizer_is_deterministic_and_knows_agent_text(tokenizer):
    assert tiny_tokenizer().backend_tokenizer.to_str() == tiny_tokenizer().backend_tokenizer.to_str()
    text = '<tool_call>\n{"name": "read", "arguments": {"path": "sales.csv"}}\n</tool_call>'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(text) / 2  # merges learnt from the corpus, not bytes
    assert tokenizer.decode(ids) == text


def test_masks_equal_the_reference_and_decode_to_the_assistant_turns(tokenizer):
    samples = varied_conversations()
    report = masks.check_masks(samples, tokenizer)
    assert report.as_dict() | {"tokens": 0, "masked_tokens": 0} == {
        "samples": 4,
        "agree": 4,
        "tokens": 0,
        "masked_tokens": 0,
        "failures": [],
        "ok": True,
    }
    assert 0 < report.masked_tokens < report.tokens


def test_what_is_masked_in_and_out(tokenizer):
    sample = varied_conversations()[1]  # system, tools, reasoning, two then three tool calls in a turn, tool results
    tokenized = masks.tokenize_sample(sample, tokenizer)
    assert tokenized["length"] == len(tokenized["input_ids"]) == len(tokenized["assistant_masks"])
    kept = [tokenizer.decode(run) for run in masks.masked_runs(tokenized)]
    assert len(kept) == 3  # one run per assistant turn
    assert kept[0].startswith("<think>\nThe file is small; read it first.\n</think>\n\nI will read the file")
    assert '{"name": "read", "arguments": {"path": "sales.csv"}}' in kept[0] and '"name": "ls"' in kept[0]
    assert kept[1].count("<tool_call>") == 3 and kept[1].endswith("</tool_call><|im_end|>\n")
    assert kept[2] == (
        "<think>\nChecked: both regions are there.\n</think>\n\nDone: totals.md holds north 5 and south 2.<|im_end|>\n"
    )
    left_out = tokenizer.decode([t for t, m in zip(tokenized["input_ids"], tokenized["assistant_masks"]) if not m])
    for text in (
        SYSTEM,
        "Sum the amounts",
        "north,4",
        "wrote 20 bytes",
        "2 totals.md",
        "# Tools",
        "<|im_start|>assistant",
    ):
        assert text in left_out and not any(text in k for k in kept), text
    # The reasoning of the last turn was in its content (<think>…</think>): rendered once, not twice.
    assert sum(k.count("<think>") for k in kept) == 3


def test_normalised_messages():
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "think",
            "tool_calls": [call("read", {"path": "a"}, "x"), call("exec", "not json {", "y")],
        },
        {"role": "tool", "tool_call_id": "x", "content": "A"},
    ]
    assert masks.chat_messages(messages) == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "think",
            "tool_calls": [
                {"type": "function", "function": {"name": "read", "arguments": {"path": "a"}}, "id": "x"},
                {"type": "function", "function": {"name": "exec", "arguments": "not json {"}, "id": "y"},
            ],
        },
        {"role": "tool", "content": "A", "tool_call_id": "x"},
    ]


def test_max_length_cuts_both_columns(tokenizer):
    tokenized = masks.tokenize_sample(varied_conversations()[1], tokenizer, max_length=50)
    assert tokenized["length"] == 50 == len(tokenized["input_ids"]) == len(tokenized["assistant_masks"])


def test_a_template_without_generation_markers_is_an_error_naming_the_fix(tokenizer):
    from trl.chat_template_utils import get_training_chat_template, qwen3_chat_template

    plain = tiny_tokenizer()
    plain.chat_template = qwen3_chat_template  # Qwen3's own template: no generation markers
    with pytest.raises(masks.MaskError, match=r"no \{% generation %\} markers.*get_training_chat_template"):
        masks.tokenize_sample(varied_conversations()[0], plain)
    with pytest.raises(masks.MaskError, match="generation"):
        masks.check_masks(varied_conversations(), plain)
    # The fix the error names works.
    plain.chat_template = get_training_chat_template(plain)
    assert masks.check_masks(varied_conversations(), plain).ok


def test_the_checker_catches_masks_that_are_off(tokenizer):
    # A template whose generation block also takes in the role header: masks no longer equal the reference.
    wrong = tiny_tokenizer()
    template = wrong.chat_template
    header = "{{- '<|im_start|>' + message.role + '\\n' }}\n        {%- generation %}"
    assert header in template
    wrong.chat_template = template.replace(header, "{%- generation %}{{- '<|im_start|>' + message.role + '\\n' }}")
    report = masks.check_masks(varied_conversations(), wrong)
    assert not report.ok and report.agree == 0
    assert all("masks differ from the reference" in f["reason"] for f in report.failures)


def test_a_conversation_the_reference_cannot_render_is_reported(tokenizer):
    opening = {
        "messages": [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi."}],
        "tools": [],
    }
    report = masks.check_masks([varied_conversations()[0], opening], tokenizer)
    assert (report.samples, report.agree, report.ok) == (2, 1, False)
    assert report.failures == [
        {
            "sample": 1,
            "reason": "the conversation starts with an assistant turn: there is no prompt to render before it",
        }
    ]
