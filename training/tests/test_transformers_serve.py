"""training.transformers_serve's change to `transformers serve`: an answer whose tool-call markup does not parse (a call
cut off by max_tokens, JSON the model got wrong) is the model's text with no tool call, not a 500 the proxy would
have to count as the server's failure. A well-formed call still becomes an OpenAI tool call."""

import importlib.util
import types

import pytest

from training import chat_template, transformers_serve
from training.tiny_model import tiny_tokenizer


@pytest.fixture(scope="module")
def backend():
    # Loaded by path, as the serving backend runs it (`python -P training/transformers_serve.py serve`).
    spec = importlib.util.spec_from_file_location("transformers_serve", transformers_serve.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tokenizer():
    tokenizer = tiny_tokenizer()
    tokenizer.add_tokens(["<|im_start|>"], special_tokens=True)  # ChatML's, which the template needs
    chat_template.apply(tokenizer)
    return tokenizer


def answer(tokenizer, text: str):
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    input_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    generated = tokenizer(text, add_special_tokens=False)["input_ids"]
    return generated, input_ids, tokenizer.decode(generated, skip_special_tokens=True)


def test_a_call_cut_off_by_max_tokens_is_the_models_text_not_a_server_error(backend, tokenizer):
    model = types.SimpleNamespace(config=types.SimpleNamespace(model_type="llama"))
    generated, input_ids, cleaned = answer(
        tokenizer, '<tool_call>\n{"name": "write", "arguments": {"path": "a.txt", "con'
    )
    from transformers.cli.serving import utils

    with pytest.raises(ValueError):  # what transformers serve does by itself: its 500
        utils.parse_assistant_message(tokenizer, model, generated, input_ids, cleaned_content=cleaned)
    parse = backend.tolerant(utils.parse_assistant_message)
    content, reasoning, calls = parse(tokenizer, model, generated, input_ids, cleaned_content=cleaned)
    # The text as the server returns it without a parser (its special tokens skipped), no tool call.
    assert (content, reasoning, calls) == (cleaned, None, None) and '{"name": "write"' in content

    whole = '<tool_call>\n{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}\n</tool_call><|im_end|>'
    generated, input_ids, cleaned = answer(tokenizer, whole)
    content, _, calls = parse(tokenizer, model, generated, input_ids, cleaned_content=cleaned)
    assert [(c.name, c.arguments) for c in calls] == [("write", '{"path": "a.txt", "content": "x"}')]


@pytest.mark.parametrize(
    "markup",
    ['"write"', '["write"]', '{"name": "write"}', '{"arguments": {}}', "42", '{"name": 3, "arguments": {}}'],
)
def test_json_that_is_no_call_is_the_models_text_not_a_server_error(backend, tokenizer, markup):
    model = types.SimpleNamespace(config=types.SimpleNamespace(model_type="llama"))
    generated, input_ids, cleaned = answer(tokenizer, f"<tool_call>\n{markup}\n</tool_call><|im_end|>")
    from transformers.cli.serving import utils

    parse = backend.tolerant(utils.parse_assistant_message)
    content, reasoning, calls = parse(tokenizer, model, generated, input_ids, cleaned_content=cleaned)
    assert (content, reasoning, calls) == (cleaned, None, None) and markup in content


def test_installed_in_both_chat_paths(backend):
    from transformers.cli.serving import chat_completion, response

    original = chat_completion.parse_assistant_message, response.parse_assistant_message
    try:
        installed = backend.install()
        assert chat_completion.parse_assistant_message is response.parse_assistant_message is installed
    finally:
        chat_completion.parse_assistant_message, response.parse_assistant_message = original
