"""The batched sampler (training.batched_sampling) on the tiny model: rows that join a running batch at different times
sample what `generate` samples alone (greedy), a seeded row draws the same tokens whoever shares its batch, logprobs are
the model's own at the row's temperature, a call that continues an earlier one reuses its cache and still samples what
`generate` does, the cache grows in place and holds what concatenation holds, top-p keeps the nucleus, a failing model
fails the rows in flight and the sampler goes on, stop fails what waits, and a cache it cannot merge is refused at
start."""

import threading
import time

import pytest

from training.batched_sampling import SPARE_COLUMNS, BatchedSampler, PrefixCache, SamplingError, growing_layer


@pytest.fixture(scope="module")
def tiny(tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, local_files_only=True)
    model.eval()
    return model, tokenizer


def prompt(tokenizer, i: int) -> list[int]:
    messages = [
        {"role": "system", "content": "You are an agent. " * (1 + 3 * i)},
        {"role": "user", "content": f"Read sales-{i}.csv and sum it."},
    ]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))


def sampler_for(model, tokenizer, **kwargs) -> BatchedSampler:
    return BatchedSampler(lambda: model, eos_ids=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kwargs)


def drive(sampler: BatchedSampler, *calls):
    """Each call (a function of no arguments) in a thread of its own, started in order 0.05 s apart, while this
    thread runs the batch; their results."""
    results: list = [None] * len(calls)

    def start():
        threads = []
        for i, call in enumerate(calls):
            thread = threading.Thread(target=lambda i=i, call=call: results.__setitem__(i, call()))
            thread.start()
            threads.append(thread)
            time.sleep(0.05)
        for thread in threads:
            thread.join()

    starter = threading.Thread(target=start)
    starter.start()
    sampler.run(until=lambda: not starter.is_alive())
    starter.join()
    return results


def greedy(model, tokenizer, ids: list[int], n: int) -> list[int]:
    import torch

    out = model.generate(
        input_ids=torch.tensor([ids]), max_new_tokens=n, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    return out[0, len(ids) :].tolist()


def test_rows_joining_a_running_batch_sample_what_generate_samples_alone(tiny):
    model, tokenizer = tiny
    prompts = [prompt(tokenizer, i) for i in range(4)]  # of different lengths: left padding differs by row
    results: list = [None] * len(prompts)
    threads: list[threading.Thread] = []

    def start(i: int) -> None:
        thread = threading.Thread(
            target=lambda: results.__setitem__(i, sampler.sample(prompts[i], max_tokens=24, temperature=0))
        )
        thread.start()
        threads.append(thread)
        while len(sampler.waiting) < 1:  # queued before the batch takes its next step
            time.sleep(0.001)

    iterations = {"n": 0}

    def getter():
        # Rows 1, 2 and 3 ask while row 0 (and then the others) are in flight: they join at steps 3, 5 and 9.
        iterations["n"] += 1
        if iterations["n"] in (3, 5, 9):
            start((3, 5, 9).index(iterations["n"]) + 1)
        return model

    sampler = BatchedSampler(getter, eos_ids=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, prefix_bytes=0)
    start(0)
    sampler.run(until=lambda: all(r is not None for r in results))
    for thread in threads:
        thread.join()
    for ids, result in zip(prompts, results):
        expected = greedy(model, tokenizer, ids, 24)
        assert result["token_ids"] == expected[: len(result["token_ids"])]
        assert result["finished"] == (result["token_ids"][-1] == tokenizer.eos_token_id)
        assert len(result["token_ids"]) == 24 or result["finished"]
    assert sampler.rows_stepped > sampler.steps  # rows were stepped together


def test_a_seeded_row_draws_the_same_tokens_alone_or_beside_others(tiny):
    model, tokenizer = tiny
    sampler = sampler_for(model, tokenizer, prefix_bytes=0)
    ids = prompt(tokenizer, 1)
    [alone] = drive(sampler, lambda: sampler.sample(ids, max_tokens=20, temperature=1.0, seed=7))
    beside = drive(
        sampler,
        lambda: sampler.sample(prompt(tokenizer, 3), max_tokens=30, temperature=1.0),
        lambda: sampler.sample(ids, max_tokens=20, temperature=1.0, seed=7),
        lambda: sampler.sample(prompt(tokenizer, 0), max_tokens=5, temperature=1.0),
    )
    assert beside[1]["token_ids"] == alone["token_ids"]
    [other] = drive(sampler, lambda: sampler.sample(ids, max_tokens=20, temperature=1.0, seed=8))
    assert other["token_ids"] != alone["token_ids"]  # the seed is what made them equal


def test_logprobs_are_the_models_own_at_the_rows_temperature(tiny):
    import torch

    model, tokenizer = tiny
    sampler = sampler_for(model, tokenizer)
    ids = prompt(tokenizer, 2)
    [result] = drive(sampler, lambda: sampler.sample(ids, max_tokens=12, temperature=0.7, seed=3))
    tokens = result["token_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids + tokens])).logits[0, len(ids) - 1 : -1] / 0.7
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()
    assert result["logprobs"] == pytest.approx(expected, abs=1e-4)


def test_a_call_continuing_an_earlier_one_reuses_its_cache_and_samples_the_same(tiny):
    model, tokenizer = tiny
    sampler = sampler_for(model, tokenizer)
    first = prompt(tokenizer, 2)
    [answer] = drive(sampler, lambda: sampler.sample(first, max_tokens=16, temperature=0))
    turn = tokenizer.encode("\n<|im_start|>user\nNow write totals.md.<|im_end|>\n<|im_start|>assistant\n")
    following = first + answer["token_ids"] + turn
    before = sampler.reused_tokens
    [result] = drive(sampler, lambda: sampler.sample(following, max_tokens=16, temperature=0))
    reused = sampler.reused_tokens - before
    # Everything the first row fed (its prompt and all but its last token) came from its cache.
    assert reused == len(first) + len(answer["token_ids"]) - 1
    assert result["token_ids"] == greedy(model, tokenizer, following, 16)[: len(result["token_ids"])]
    sampler.forget_prefixes()
    drive(sampler, lambda: sampler.sample(following, max_tokens=2, temperature=0))
    assert sampler.reused_tokens - before == reused  # forgotten: computed again


def test_the_prefix_cache_keeps_to_its_bytes_and_prefers_the_longest_match():
    import torch

    def layers(columns):
        return [(torch.zeros(1, 1, columns, 2), torch.zeros(1, 1, columns, 2))]

    cache = PrefixCache(max_bytes=2 * 2 * 10 * 2 * 4)  # two entries of 10 columns
    cache.store([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], layers(10))
    cache.store([1, 2, 3, 9, 9, 9, 9, 9, 9, 9], layers(10))
    assert cache.longest([1, 2, 3, 4, 5, 0]) == (5, cache.entries[-1][1])
    assert cache.longest([1, 2, 3, 4, 5])[0] == 4  # the prompt's last token is always computed
    cache.store([5, 5, 5, 5, 5, 5, 5, 5, 5, 5], layers(10))  # over the bound: the least recently used goes
    assert len(cache.entries) == 2 and cache.bytes == 2 * 2 * 10 * 2 * 4
    assert cache.longest([1, 2, 3, 9, 9, 0])[0] == 3  # [1, 2, 3, 9, …] went: only [1, 2, 3, 4, …]'s opening is left
    assert cache.longest([5, 5, 0])[0] == 2
    # An agent's next call extends its earlier one: the earlier entry goes, the longer serves both.
    cache.store([5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7], layers(12)[:1])
    assert [5] * 10 not in [ids for ids, _, _ in cache.entries] and cache.entries[-1][0][-2:] == [7, 7]
    assert cache.bytes == sum(size for _, _, size in cache.entries) <= cache.max_bytes


def test_the_cache_grows_in_place_and_holds_what_concatenation_holds():
    import torch

    layer = growing_layer()()
    parts = [torch.randn(3, 2, columns, 4) for columns in (5, 1, 1, SPARE_COLUMNS)]
    keys, _ = layer.update(parts[0], -parts[0])
    room = keys.data_ptr()
    for part in parts[1:3]:
        keys, values = layer.update(part, -part)
        assert keys.data_ptr() == room  # a decode step's column written into the spare room, nothing copied
    assert torch.equal(keys, torch.cat(parts[:3], dim=2)) and torch.equal(values, -keys)
    keys, _ = layer.update(parts[3], -parts[3])  # past the room: copied once into a larger buffer
    assert keys.data_ptr() != room and torch.equal(keys, torch.cat(parts, dim=2))
    # Whoever replaces the keys (a batch dropping a finished row) leaves the buffer: the next update starts anew.
    layer.keys, layer.values = keys[1:].clone(), -keys[1:].clone()
    last = torch.randn(2, 2, 1, 4)
    keys, values = layer.update(last, -last)
    assert torch.equal(keys, torch.cat([torch.cat(parts, dim=2)[1:], last], dim=2)) and torch.equal(values, -keys)
    assert layer.get_seq_length() == 5 + 2 + SPARE_COLUMNS + 1


def test_rows_restacked_into_the_buffer_grow_in_place_from_the_next_step():
    import torch

    layer = growing_layer()()
    running, joining = torch.randn(2, 2, 6, 4), torch.randn(3, 2, 4, 4)
    layer.update(running, -running)
    # Rows joining: both blocks aligned right in 6 columns, the shorter padded with zeros on its left.
    layer.restack([(layer.keys, layer.values), (joining, -joining)], 6)
    padded = torch.cat([torch.zeros(3, 2, 2, 4), joining], dim=2)
    assert torch.equal(layer.keys, torch.cat([running, padded])) and torch.equal(layer.values, -layer.keys)
    room = layer.keys.data_ptr()
    step = torch.randn(5, 2, 1, 4)
    keys, _ = layer.update(step, -step)
    assert keys.data_ptr() == room  # the restacked buffer had room: the step's column written in place
    # Rows 1, 3 and 4 finished: rows 0 and 2 kept, each a run of its own, the first column cut.
    before = keys.clone()
    layer.restack([(keys[0:1, :, 1:], -keys[0:1, :, 1:]), (keys[2:3, :, 1:], -keys[2:3, :, 1:])], 6)
    assert torch.equal(layer.keys, before[[0, 2], :, 1:]) and torch.equal(layer.values, -layer.keys)
    room = layer.keys.data_ptr()
    keys, _ = layer.update(step[:2], -step[:2])
    assert keys.data_ptr() == room and torch.equal(keys[:, :, -1:], step[:2])


def test_top_p_keeps_only_the_nucleus(tiny):
    import torch

    model, tokenizer = tiny
    sampler = sampler_for(model, tokenizer, prefix_bytes=0)
    ids = prompt(tokenizer, 0)
    with torch.no_grad():
        best = int(model(torch.tensor([ids])).logits[0, -1].argmax())
    results = drive(
        sampler, *[lambda s=s: sampler.sample(ids, max_tokens=1, temperature=1.0, top_p=1e-6, seed=s) for s in range(5)]
    )
    assert [r["token_ids"] for r in results] == [[best]] * 5
    assert all(r["logprobs"][0] == pytest.approx(0.0) for r in results)  # the nucleus of one token holds it all


def test_a_failing_model_fails_the_rows_in_flight_and_the_sampler_goes_on(tiny):
    model, tokenizer = tiny
    broken = {"on": True}

    def getter():
        if broken["on"]:
            raise RuntimeError("the model is gone")
        return model

    sampler = BatchedSampler(getter, eos_ids=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    ids = prompt(tokenizer, 0)

    def attempt():
        try:
            return sampler.sample(ids, max_tokens=3, temperature=0)
        except SamplingError as exc:
            return exc

    [failed] = drive(sampler, attempt)
    assert isinstance(failed, SamplingError) and "the model is gone" in str(failed)
    broken["on"] = False
    [result] = drive(sampler, attempt)
    assert result["token_ids"] == greedy(model, tokenizer, ids, 3)[: len(result["token_ids"])]


def test_stop_fails_what_waits_and_later_calls():
    sampler = BatchedSampler(lambda: None, eos_ids=0, pad_id=0)
    outcome = {}

    def waiting():
        try:
            sampler.sample([1, 2], max_tokens=1, temperature=0)
        except SamplingError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=waiting)
    thread.start()
    while not sampler.waiting:
        time.sleep(0.01)
    sampler.stop()
    thread.join(5)
    assert "stopped" in outcome["error"]
    with pytest.raises(SamplingError, match="stopped"):
        sampler.sample([1], max_tokens=1, temperature=0)
    with pytest.raises(SamplingError, match="empty"):
        BatchedSampler(lambda: None, eos_ids=0, pad_id=0).sample([], max_tokens=1, temperature=0)


def test_a_model_whose_cache_cannot_be_merged_is_refused():
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        sliding_window=8,
    )
    with pytest.raises(SamplingError, match="full-attention"):
        BatchedSampler.check_model(MistralForCausalLM(config))
