"""The KV cache bench on the tiny model (the timing is the bench's to run, outside CI): both caches decode the same
tokens, the batch's churn chooses the same tokens restacked or concatenated, and the line has its keys."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kv_cache_bench  # noqa: E402


def test_both_caches_choose_the_same_tokens(tiny_model_path, capsys):
    line = kv_cache_bench.main(
        ["--model", str(tiny_model_path), "--rows", "3", "--prompt-tokens", "12", "--steps", "6", "--warmup", "1"]
    )
    assert line["same_tokens"] is True and line["steps"] == 5 and line["rows"] == 3
    assert line["dynamic_step_s"] > 0 and line["growing_step_s"] > 0
    assert line["churn_same_tokens"] is True and line["churn_concatenated_s"] > 0 and line["churn_restacked_s"] > 0
    assert capsys.readouterr().out.strip().endswith("}")
