#!/usr/bin/env python
"""The batched sampler's decode step with its growing KV cache against transformers' own DynamicCache, which
concatenates every row's keys and values at each step, in the same process on the same model and rows.

Both caches take the same left-padded prefill (`--rows` rows of `--prompt-tokens`, the first half of them padded by a
quarter), then `--steps` greedy decode steps, the first `--warmup` untimed. They must choose the same tokens. The last
line is one JSON object: {"model", "rows", "prompt_tokens", "steps", "dynamic_step_s", "growing_step_s",
"growing_over_dynamic" (the speed-up, above 1 is faster), "same_tokens", "threads"}.

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

from training.batched_sampling import growing_layer  # noqa: E402


def decode(model, ids, mask, *, growing: bool, steps: int, warmup: int) -> tuple[float, list]:
    """(seconds a timed step, the tokens chosen) for `steps` greedy steps after the prefill of `ids`."""
    import torch
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    if growing:
        cache.layer_class_to_replicate = growing_layer()
    chosen = []
    with torch.no_grad():
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=(mask.cumsum(1) - 1).clamp(min=0),
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        started = None
        for step in range(steps):
            if step == warmup:
                started = time.perf_counter()
            positions = mask.sum(1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(positions)], dim=1)
            out = model(
                input_ids=token,
                attention_mask=mask,
                position_ids=positions,
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            chosen.append(token.squeeze(1).tolist())
    return (time.perf_counter() - started) / (steps - warmup), chosen


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
    line = {
        "model": args.model,
        "rows": args.rows,
        "prompt_tokens": args.prompt_tokens,
        "steps": args.steps - args.warmup,
        "dynamic_step_s": round(dynamic_s, 4),
        "growing_step_s": round(growing_s, 4),
        "growing_over_dynamic": round(dynamic_s / growing_s, 3),
        "same_tokens": dynamic == growing,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(line), flush=True)
    return line


if __name__ == "__main__":
    main()
