#!/usr/bin/env python
"""The batched sampler's decode step with its growing KV cache against transformers' own DynamicCache, which
concatenates every row's keys and values at each step, in the same process on the same model and rows.

Both caches take the same left-padded prefill (`--rows` rows of `--prompt-tokens`, the first half of them padded by a
quarter), then `--steps` greedy decode steps, the first `--warmup` untimed. They must choose the same tokens.

Then the batch's churn, as in a served evaluation where agents finish and others start all the time: at each of
`--steps` events the oldest row leaves the batch, a new row (prefilled once before, untimed) joins it, and the batch
takes a decode step; the rows restacked straight into the growing layer's buffer (`restack`) against the tensors
built first by concatenation, which the next step copies into a buffer again (the sampler before restack). Both must
choose the same tokens.

The last line is one JSON object: {"model", "rows", "prompt_tokens", "steps", "dynamic_step_s", "growing_step_s",
"growing_over_dynamic" (the speed-up, above 1 is faster), "same_tokens", "churn_concatenated_s", "churn_restacked_s"
(seconds an event), "restacked_over_concatenated", "churn_same_tokens", "threads"}.

    .venv/bin/python bench/kv_cache_bench.py --model FOLDER [--rows 16] [--prompt-tokens 1000] [--steps 40]

FOLDER: a causal LM folder, e.g. `.venv/bin/python -m training.converters smollm2-135m-instruct /tmp/smol` or a
`base_models add` folder (CLAWGYM_TRAINING_DIR/base-models/smollm2-135m-instruct).
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training.batched_sampling import Batch, Row, growing_layer  # noqa: E402


def forward(model, ids, mask, positions, cache):
    return model(
        input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1
    )


def decode(model, ids, mask, *, growing: bool, steps: int, warmup: int) -> tuple[float, list]:
    """(seconds a timed step, the tokens chosen) for `steps` greedy steps after the prefill of `ids`."""
    import torch
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    if growing:
        cache.layer_class_to_replicate = growing_layer()
    chosen = []
    with torch.no_grad():
        out = forward(model, ids, mask, (mask.cumsum(1) - 1).clamp(min=0), cache)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        started = None
        for step in range(steps):
            if step == warmup:
                started = time.perf_counter()
            positions = mask.sum(1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(positions)], dim=1)
            out = forward(model, token, mask, positions, cache)
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            chosen.append(token.squeeze(1).tolist())
    return (time.perf_counter() - started) / (steps - warmup), chosen


def concatenated(layer, blocks, columns: int) -> None:
    """The sampler's join and drop before restack: the rows' tensors built by concatenation (left-padded), then copied
    into a buffer with room at the next update."""
    import torch

    def padded(tensor):
        missing = columns - tensor.size(2)
        if not missing:
            return tensor
        return torch.cat([tensor.new_zeros((*tensor.shape[:2], missing, tensor.size(3))), tensor], dim=2)

    layer.keys = torch.cat([padded(keys) for keys, _ in blocks])
    layer.values = torch.cat([padded(values) for _, values in blocks])


def churn(model, ids, mask, fresh, *, restack: bool, events: int, warmup: int) -> tuple[float, list]:
    """(seconds a timed event, the tokens chosen): `events` times the oldest row leaves, a row of `fresh` (its
    prefilled ids) joins, and the batch takes a greedy decode step."""
    import torch
    from transformers.cache_utils import DynamicCache

    layer_class = growing_layer()
    own = layer_class.restack
    if not restack:
        layer_class.restack = concatenated
    try:

        def prefilled(ids, mask):
            cache = DynamicCache()
            cache.layer_class_to_replicate = layer_class
            out = forward(model, ids, mask, (mask.cumsum(1) - 1).clamp(min=0), cache)
            rows = [Row(prompt_ids=[], max_tokens=1, temperature=0.0, top_p=1.0, seed=None) for _ in range(len(ids))]
            for row, token in zip(rows, out.logits[:, -1].argmax(-1).tolist()):
                row.token_ids.append(token)
            return Batch(rows=rows, mask=mask, cache=cache)

        with torch.no_grad():
            batch = prefilled(ids, mask)
            joining = [prefilled(fresh[i : i + 1], torch.ones_like(fresh[i : i + 1])) for i in range(events)]
            chosen, started = [], None
            for event in range(events):
                if event == warmup:
                    started = time.perf_counter()
                batch.rows[0].done.set()
                batch.drop_done()
                batch.join(joining[event])
                pending = torch.tensor([[row.token_ids[-1]] for row in batch.rows])
                positions = batch.mask.sum(1, keepdim=True)
                batch.mask = torch.cat([batch.mask, torch.ones_like(positions)], dim=1)
                out = forward(model, pending, batch.mask, positions, batch.cache)
                tokens = out.logits[:, -1].argmax(-1).tolist()
                for row, token in zip(batch.rows, tokens):
                    row.token_ids.append(token)
                chosen.append(tokens)
    finally:
        layer_class.restack = own
    return (time.perf_counter() - started) / (events - warmup), chosen


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a causal LM folder")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.prompt_tokens < 4 or not 0 <= args.warmup < args.steps:
        parser.error("--rows at least 1, --prompt-tokens at least 4, and --warmup below --steps")

    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, model.config.vocab_size, (args.rows, args.prompt_tokens), generator=generator)
    mask = torch.ones_like(ids)
    mask[: args.rows // 2, : args.prompt_tokens // 4] = 0  # left padding, as rows of several lengths have
    dynamic_s, dynamic = decode(model, ids, mask, growing=False, steps=args.steps, warmup=args.warmup)
    growing_s, growing = decode(model, ids, mask, growing=True, steps=args.steps, warmup=args.warmup)
    fresh = torch.randint(10, model.config.vocab_size, (args.steps, args.prompt_tokens // 2), generator=generator)
    churned = {
        restack: churn(model, ids, mask, fresh, restack=restack, events=args.steps, warmup=args.warmup)
        for restack in (False, True)
    }
    line = {
        "model": args.model,
        "rows": args.rows,
        "prompt_tokens": args.prompt_tokens,
        "steps": args.steps - args.warmup,
        "dynamic_step_s": round(dynamic_s, 4),
        "growing_step_s": round(growing_s, 4),
        "growing_over_dynamic": round(dynamic_s / growing_s, 3),
        "same_tokens": dynamic == growing,
        "churn_concatenated_s": round(churned[False][0], 4),
        "churn_restacked_s": round(churned[True][0], 4),
        "restacked_over_concatenated": round(churned[False][0] / churned[True][0], 3),
        "churn_same_tokens": churned[False][1] == churned[True][1],
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(line), flush=True)
    return line


if __name__ == "__main__":
    main()
