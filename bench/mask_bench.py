#!/usr/bin/env python
"""Loss-mask benchmark: the one-pass masks (the chat template's generation markers) against the per-prefix re-render
method the paper's trainer used, on long synthetic agent trajectories.

Each trajectory is realistic multi-turn tool calling (13 assistant turns by default, 1-3 tool calls a turn, tool
results of file-sized text, some reasoning), tokenized with the tiny tokenizer (training.tiny_model: trained here,
nothing downloaded). Both methods run over every sample; they must give the same input ids and masks. The last line
is one JSON object: {"samples", "turns", "tokens_mean", "masked_share", "fast_s", "reference_s", "speedup", "agree",
"disagreeing", "peak_rss_mb"}; progress goes to stderr every 50 samples.

    .venv/bin/python bench/mask_bench.py [--n 1000] [--turns 13] [--file-lines 20] [--seed 0]

Memory stays flat: one sample is built, tokenized both ways and dropped before the next (peak_rss_mb reports it).
"""

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training.masks import reference_masks, tokenize_sample  # noqa: E402
from training.tiny_model import TOOLS, tiny_tokenizer  # noqa: E402
from training_jobs.testing import long_trajectory  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", "--samples", dest="samples", type=int, default=1000, help="trajectories")
    parser.add_argument("--turns", type=int, default=13, help="assistant turns per trajectory (the paper's mean)")
    parser.add_argument("--file-lines", type=int, default=20, help="lines of text in each tool result")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    tokenizer = tiny_tokenizer()
    rng = random.Random(args.seed)
    fast_s = reference_s = 0.0
    tokens = masked = disagreeing = 0
    # One sample at a time, both methods timed on it: 1,000 long samples' ids would not fit in memory twice.
    for n in range(1, args.samples + 1):
        sample = {"messages": long_trajectory(rng, args.turns, args.file_lines), "tools": TOOLS}
        started = time.perf_counter()
        fast = tokenize_sample(sample, tokenizer)
        between = time.perf_counter()
        reference = reference_masks(sample, tokenizer)
        fast_s, reference_s = fast_s + between - started, reference_s + time.perf_counter() - between
        disagreeing += fast != reference
        tokens, masked = tokens + fast["length"], masked + sum(fast["assistant_masks"])
        if n % 50 == 0:
            print(
                f"{n}/{args.samples} samples: one pass {fast_s:.1f} s, re-render {reference_s:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    report = {
        "samples": args.samples,
        "turns": args.turns,
        "tokens_mean": round(tokens / max(args.samples, 1), 1),
        "masked_share": round(masked / max(tokens, 1), 4),
        "fast_s": round(fast_s, 3),
        "reference_s": round(reference_s, 3),
        "speedup": round(reference_s / fast_s, 2) if fast_s else None,
        "agree": disagreeing == 0,
        "disagreeing": disagreeing,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),  # Linux: KiB
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["agree"] else 1)
