"""The live policy server on a tiny Qwen3: vLLM's token fields (prompt_token_ids, choices[].token_ids,
logprobs.content[].logprob) streamed and not, the logprobs equal to the model's own (a forward pass at the run's
temperature), the prompt the model's chat template with the request's tools, tool calls parsed, limits, errors."""

import json
import urllib.error
import urllib.request

import pytest

from training_jobs.rl.policy_server import LivePolicy, PolicyServer, to_message
from training_jobs.tests.tinykit import build_tiny_model
from training_jobs.tiny import TOOLS

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("policy") / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model.train()  # as in the trainer: the server generates in eval mode and puts it back
    server = PolicyServer(
        LivePolicy(lambda: model, tokenizer, temperature=TEMPERATURE, max_tokens=12, max_context=4096)
    )
    url = server.start()
    yield url, model, tokenizer
    server.stop()


def post(url: str, body: dict):
    request = urllib.request.Request(f"{url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def model_logprobs(model, prompt_ids, token_ids):
    import torch

    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1] / TEMPERATURE
    return torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids) :, None])[:, 0].tolist()


MESSAGES = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Read sales.csv"}]


def test_a_completion_answers_vllm_token_fields_with_the_models_logprobs(served):
    url, model, tokenizer = served
    reply = json.loads(post(url, {"model": "policy", "messages": MESSAGES, "tools": TOOLS, "logprobs": True,
                                  "temperature": 0.0, "max_tokens": 1000}))  # fmt: skip
    choice = reply["choices"][0]
    expected_prompt = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=True,
                                                    return_dict=False)  # fmt: skip
    assert reply["prompt_token_ids"] == list(expected_prompt)
    assert 1 <= len(choice["token_ids"]) <= 12  # the run's max_tokens caps the request's
    logprobs = [entry["logprob"] for entry in choice["logprobs"]["content"]]
    assert len(logprobs) == len(choice["token_ids"])
    # Sampled at the run's temperature (0.7) whatever the request says, and the logprobs are the model's there.
    assert logprobs == pytest.approx(model_logprobs(model, reply["prompt_token_ids"], choice["token_ids"]), abs=1e-4)
    assert reply["usage"] == {"prompt_tokens": len(expected_prompt), "completion_tokens": len(choice["token_ids"]),
                              "total_tokens": len(expected_prompt) + len(choice["token_ids"])}  # fmt: skip
    assert choice["finish_reason"] in ("stop", "length", "tool_calls") and model.training  # put back in train mode
    without = json.loads(post(url, {"messages": MESSAGES}))["choices"][0]
    assert "logprobs" not in without and without["token_ids"]  # logprobs only when asked


def test_a_stream_carries_prompt_ids_first_and_token_ids_per_delta(served):
    url, model, _ = served
    raw = post(url, {"messages": MESSAGES, "stream": True, "logprobs": True, "stream_options": {"include_usage": True}})
    events = [line[len("data: ") :] for line in raw.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "prompt_token_ids" in chunks[0] and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    token_ids = [t for c in chunks if c["choices"] for t in c["choices"][0].get("token_ids", [])]
    logprobs = [e["logprob"] for c in chunks if c["choices"] and "logprobs" in c["choices"][0]
                for e in c["choices"][0]["logprobs"]["content"]]  # fmt: skip
    assert len(token_ids) == len(logprobs) >= 1
    assert logprobs == pytest.approx(model_logprobs(model, chunks[0]["prompt_token_ids"], token_ids), abs=1e-4)
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and chunks[-1]["usage"]["completion_tokens"] == len(token_ids)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text or any("tool_calls" in c["choices"][0]["delta"] for c in chunks if c["choices"])


def test_tool_calls_are_parsed_every_one_of_them():
    text = ('Let me look.<tool_call>\n{"name": "read", "arguments": {"path": "a.csv"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>')  # fmt: skip
    message = to_message(text)
    assert message["content"] == "Let me look."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("read", {"path": "a.csv"}),
        ("ls", {"path": "."}),
    ]
    assert to_message("<tool_call>{not json}</tool_call>") == {
        "role": "assistant",
        "content": "<tool_call>{not json}</tool_call>",
    }


def test_bad_requests_say_why(served):
    url, _, _ = served
    with pytest.raises(urllib.error.HTTPError) as error:
        post(url, {"messages": []})
    assert error.value.code == 400 and "messages must be a non-empty list" in error.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as error:
        post(url, {"messages": [{"role": "user", "content": "word " * 3000}]})
    assert error.value.code == 400 and "leaves no room" in error.value.read().decode()
    models = json.load(urllib.request.urlopen(f"{url}/models"))
    assert models["data"][0]["id"] == "policy"
