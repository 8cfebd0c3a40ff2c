"""The live policy server on a tiny Qwen3: vLLM's token fields (prompt_token_ids, choices[].token_ids,
logprobs.content[].logprob) streamed and not, the logprobs equal to the model's own (a forward pass at the run's
temperature), the prompt the model's chat template with the request's tools, tool calls parsed, limits, errors; only
requests carrying its key answered, and bodies bounded before they are read."""

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from training.rl.policy_server import LivePolicy, PolicyServer, compared, to_message
from training.tiny_model import TOOLS, tiny_model
from training_jobs.testing import sampling

TEMPERATURE = 0.7
KEY = "cgk_test-policy-key"
MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model(tmp_path_factory.mktemp("policy") / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    model.train()  # as in the trainer: the server generates in eval mode and puts it back
    server = PolicyServer(
        LivePolicy(lambda: model, tokenizer, temperature=TEMPERATURE, max_tokens=12, max_context=4096),
        api_key=KEY,
        max_body_bytes=MAX_BODY,
    )
    url = server.start()
    with sampling(server.policy):
        yield url, model, tokenizer
    server.stop()


def post(url: str, body: dict, key: str = KEY):
    request = urllib.request.Request(
        f"{url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
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
    reply = json.loads(
        post(
            url,
            {
                "model": "policy",
                "messages": MESSAGES,
                "tools": TOOLS,
                "logprobs": True,
                "temperature": 0.0,
                "max_tokens": 1000,
            },
        )
    )
    choice = reply["choices"][0]
    expected_prompt = tokenizer.apply_chat_template(
        MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert reply["prompt_token_ids"] == list(expected_prompt)
    assert 1 <= len(choice["token_ids"]) <= 12  # the run's max_tokens caps the request's
    logprobs = [entry["logprob"] for entry in choice["logprobs"]["content"]]
    assert len(logprobs) == len(choice["token_ids"])
    # Sampled at the run's temperature (0.7) whatever the request says, and the logprobs are the model's there.
    assert logprobs == pytest.approx(model_logprobs(model, reply["prompt_token_ids"], choice["token_ids"]), abs=1e-4)
    assert reply["usage"] == {
        "prompt_tokens": len(expected_prompt),
        "completion_tokens": len(choice["token_ids"]),
        "total_tokens": len(expected_prompt) + len(choice["token_ids"]),
    }
    assert choice["finish_reason"] in ("stop", "length", "tool_calls") and model.training  # put back in train mode
    without = json.loads(post(url, {"messages": MESSAGES}))["choices"][0]
    assert "logprobs" not in without and without["token_ids"]  # logprobs only when asked


def test_a_stream_carries_prompt_ids_first_and_token_ids_per_delta(served):
    url, model, tokenizer = served
    raw = post(url, {"messages": MESSAGES, "stream": True, "logprobs": True, "stream_options": {"include_usage": True}})
    events = [line[len("data: ") :] for line in raw.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "prompt_token_ids" in chunks[0] and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    token_ids = [t for c in chunks if c["choices"] for t in c["choices"][0].get("token_ids", [])]
    logprobs = [
        e["logprob"]
        for c in chunks
        if c["choices"] and "logprobs" in c["choices"][0]
        for e in c["choices"][0]["logprobs"]["content"]
    ]
    assert len(token_ids) == len(logprobs) >= 1
    assert logprobs == pytest.approx(model_logprobs(model, chunks[0]["prompt_token_ids"], token_ids), abs=1e-4)
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and chunks[-1]["usage"]["completion_tokens"] == len(token_ids)
    # The deltas' text is the message of the streamed tokens (up to the end of turn), whatever was sampled: a
    # sample of the end of turn alone streams no text at all.
    said = tokenizer.decode(token_ids, skip_special_tokens=False)
    for special in (tokenizer.eos_token, tokenizer.pad_token):
        said = said.split(special)[0] if special else said
    expected = to_message(said)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls = [call for c in chunks if c["choices"] for call in c["choices"][0]["delta"].get("tool_calls", [])]
    assert text == ("" if "tool_calls" in expected else expected["content"])
    assert [call["function"] for call in calls] == [call["function"] for call in expected.get("tool_calls", [])]


def test_tool_calls_are_parsed_every_one_of_them():
    text = (
        'Let me look.<tool_call>\n{"name": "read", "arguments": {"path": "a.csv"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
    )
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
    models = json.load(
        urllib.request.urlopen(urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"}))
    )
    assert models["data"][0]["id"] == "policy"


def test_an_answer_that_cannot_be_built_is_a_500_that_says_why(served):
    _, model, tokenizer = served

    def broken(out, body):
        raise TypeError("string indices must be integers, not 'str'")  # transformers' parser on a string "call"

    server = PolicyServer(
        LivePolicy(lambda: model, tokenizer, temperature=TEMPERATURE, max_tokens=4, max_context=4096, parse=broken),
        api_key=KEY,
    )
    url = server.start()
    try:
        with sampling(server.policy):
            for stream in (False, True):
                with pytest.raises(urllib.error.HTTPError) as error:
                    post(url, {"messages": [{"role": "user", "content": "hi"}], "stream": stream})
                said = json.loads(error.value.read().decode())["error"]["message"]
                assert error.value.code == 500, stream
                assert said == "the answer could not be built: TypeError: string indices must be integers, not 'str'"
    finally:
        server.stop()


def raw_request(url: str, method: str, path: str, headers: dict, body: bytes = b"") -> tuple[int, dict]:
    """One request on a connection of its own, with exactly these headers (no Content-Length added)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_it_answers_only_its_key_and_reads_only_bounded_bodies(served):
    url, _, _ = served
    body = json.dumps({"messages": MESSAGES}).encode()
    plain = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    for key in ("", "Bearer wrong", f"Bearer {KEY}x", KEY):  # none, another, a longer one, no scheme
        headers = {**plain, "Authorization": key} if key else plain
        assert raw_request(url, "POST", "/v1/chat/completions", headers, body)[0] == 401
        bare = {k: v for k, v in headers.items() if k != "Content-Length"}
        assert raw_request(url, "GET", "/v1/models", bare)[0] == 401
        # What transformers serve answered anyone (issue 34, item 4): nothing here without the key either.
        for method, path in (("POST", "/load_model"), ("POST", "/reset"), ("GET", "/health")):
            assert raw_request(url, method, path, bare)[0] == 401
    authorized = {"Authorization": f"Bearer {KEY}"}
    assert raw_request(url, "GET", "/health", authorized)[0] == 200

    # A declared length past the limit is refused at once, before the server waits for a byte of it (a server that
    # reads what Content-Length says would sit here, holding a thread, until the client's timeout).
    started = time.monotonic()
    status, answer = raw_request(url, "POST", "/v1/chat/completions", {**authorized, "Content-Length": str(10**12)})
    assert status == 413 and str(MAX_BODY) in answer["error"]["message"] and time.monotonic() - started < 5
    big = json.dumps({"messages": [{"role": "user", "content": "x" * MAX_BODY}]}).encode()
    assert (
        raw_request(url, "POST", "/v1/chat/completions", {**authorized, "Content-Length": str(len(big))}, big)[0] == 413
    )
    assert raw_request(url, "POST", "/v1/chat/completions", authorized)[0] == 411  # no length: not read
    assert raw_request(url, "POST", "/v1/chat/completions", {**authorized, "Content-Length": "-1"})[0] == 400
    assert raw_request(url, "POST", "/v1/chat/completions", {**authorized, "Content-Length": "\u00b2"})[0] == 400
    # And the server still answers a request within the limit, with its key.
    assert json.loads(post(url, {"messages": MESSAGES}))["choices"][0]["token_ids"]


def test_a_server_without_a_key_does_not_start():
    with pytest.raises(ValueError, match="needs a key"):
        PolicyServer(LivePolicy(lambda: None, None, temperature=1.0, max_tokens=1, max_context=8), api_key="")


@pytest.mark.django_db
def test_the_policy_endpoint_names_the_live_servers_own_key_or_the_vllm_policys():
    from llm.models import served_key
    from training_jobs.kinds import TrainingRunError, parse_overrides
    from training_jobs.kinds.rl import build_rl_config
    from training_jobs.models import TrainingRun
    from training_jobs.rl.batches import policy_endpoint, policy_key_env

    live = TrainingRun.objects.create(
        kind="rl", base_model_path="/m", config=build_rl_config("tiny-cpu"), cpu=True, attempt=2
    )
    endpoint = policy_endpoint(live, "http://127.0.0.1:5/v1")
    assert endpoint.api_key_env == policy_key_env(live) == f"CLAWGYM_KEY_SERVED_RL{live.pk}_A2"
    assert endpoint.api_key() == served_key(endpoint.api_key_env)  # what the job gives the trainer's server
    live.attempt = 3  # a resumed attempt: a server of its own, a key of its own
    assert policy_endpoint(live, "http://127.0.0.1:6/v1").api_key() != endpoint.api_key()

    # A vLLM policy started by hand: its key variable is fenced like any endpoint's (and never a served one's name).
    edits = ["policy.api_key_env=CLAWGYM_KEY_RL_POLICY", "policy.endpoint_url=http://gpu1:8001"]
    config = build_rl_config("paper", parse_overrides(edits))
    vllm = TrainingRun.objects.create(kind="rl", base_model_path="/m", config=config, attempt=1)
    assert policy_endpoint(vllm, "http://gpu1:8001/v1").api_key_env == "CLAWGYM_KEY_RL_POLICY"
    for bad, says in [("SECRET_KEY", "may not hold an API key"), ("CLAWGYM_KEY_SERVED_S1", "servers ClawGym starts")]:
        with pytest.raises(TrainingRunError, match=says):
            build_rl_config("paper", parse_overrides([f"policy.api_key_env={bad}"]))
    with pytest.raises(TrainingRunError, match="http"):
        build_rl_config("paper", parse_overrides(["policy.endpoint_url=gpu1:8001"]))


def test_the_trainers_policy_prompts_with_the_answers_it_sampled_each_rollout_its_own(served):
    """Token in, token out: a policy that writes `<tool_call>\\n {"name"` (a space the template does not write) gets
    its calls back as parsed messages; its next prompts hold every earlier answer as sampled, then the template's
    own tool results, so that a rollout's calls chain into one sample. A sibling rollout with the same first prompt
    but another answer gets its own answer, never the first one's; a history that is not this step's answers is
    rendered as usual, and so is every prompt of a policy without own_tokens (the served backend's)."""
    _, _, tokenizer = served
    from training_jobs.testing import scripted_model

    end = tokenizer.eos_token_id

    def render(messages):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)

    def answer(name, arguments):
        text = f'<tool_call>\n {{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call>'
        return tokenizer.encode(text, add_special_tokens=False) + [end]

    def said(name, arguments, tool_result):
        call = {"id": "x", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        return [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "content": tool_result}]

    first = [{"role": "user", "content": "Copy a.txt to b.txt"}]
    read_a, read_c = answer("read", {"path": "a.txt"}), answer("read", {"path": "c.txt"})
    write_b = answer("write", {"path": "b.txt", "content": "one"})
    second = first + said("read", {"path": "a.txt"}, "one")
    third = second + said("write", {"path": "b.txt", "content": "one"}, "wrote 3 bytes")
    sibling = first + said("read", {"path": "c.txt"}, "two")
    between = "\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"

    prompts = {}
    for own in (True, False):
        model = scripted_model([read_a, read_c, write_b, [end], [end]], vocabulary=len(tokenizer))
        policy = LivePolicy(
            lambda model=model: model,
            tokenizer,
            temperature=1.0,
            max_tokens=64,
            max_context=4096,
            prefix_bytes=0,
            own_tokens=own,
        )
        with sampling(policy):
            outs = [policy.generate({"messages": m}) for m in (first, first, second, third, sibling)]
        assert [o["token_ids"] for o in outs[:3]] == [read_a, read_c, write_b]
        prompts[own] = [o["prompt_ids"] for o in outs]
        if own:
            assert policy.own_prompts == 3

    start = render(first)
    kept_second, kept_third, kept_sibling = prompts[True][2:]
    assert kept_second[: len(start + read_a)] == start + read_a != render(second)[: len(start + read_a)]
    assert tokenizer.decode(kept_second[len(start + read_a) :]) == between.format("one")
    assert kept_third[: len(kept_second + write_b)] == kept_second + write_b  # the chain holds over both answers
    assert tokenizer.decode(kept_third[len(kept_second + write_b) :]) == between.format("wrote 3 bytes")
    assert kept_sibling[: len(start + read_c)] == start + read_c  # its own answer, not the first rollout's
    assert tokenizer.decode(kept_sibling[len(start + read_c) :]) == between.format("two")
    assert prompts[False][2:] == [render(second), render(third), render(sibling)]

    policy = LivePolicy(lambda: None, tokenizer, temperature=1.0, max_tokens=8, max_context=4096, own_tokens=True)
    policy._remember(start, compared(to_message(tokenizer.decode(read_a[:-1]))), read_a)
    assert policy.own_prompt(second, None) == kept_second
    edited = first + said("read", {"path": "A.TXT"}, "one")  # not what was answered
    assert policy.own_prompt(edited, None) is None
    assert policy.own_prompt(first, None) is None  # no answer in the history: rendered as usual
