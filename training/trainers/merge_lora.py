"""Merge a LoRA checkpoint into its base model so that it can be served like a full one:
`python -m training.trainers.merge_lora ADAPTER OUT CONFIG_JSON`.

CONFIG_JSON holds what the run trained with ({"base_model_path", "yarn", "bf16", "cpu"}): the base is loaded by the
trainer's own `load_model` (YaRN rope scaling included), the adapter applied with peft and folded into the weights
(`merge_and_unload`), and the result saved with the checkpoint's tokenizer (the base's when the checkpoint has
none). It is written to a sibling folder and renamed to OUT when complete, so a folder at OUT is always a whole
model; a second merge racing this one keeps the first folder. No Django here, like the trainer.
"""

import json
import os
import shutil
import sys
from pathlib import Path


def merge(adapter: Path, out: Path, config: dict) -> Path:
    from peft import PeftModel
    from transformers import AutoTokenizer

    from .sft import load_model

    partial = out.with_name(f"{out.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model = PeftModel.from_pretrained(load_model(config), str(adapter), local_files_only=True)
    merged = model.merge_and_unload()
    merged.save_pretrained(partial)
    tokenizer_from = adapter if (adapter / "tokenizer_config.json").exists() else Path(config["base_model_path"])
    AutoTokenizer.from_pretrained(str(tokenizer_from), local_files_only=True).save_pretrained(partial)
    (partial / "merged_from.json").write_text(json.dumps({"adapter": str(adapter), **config}, indent=1))
    try:
        partial.rename(out)
    except OSError:  # another merge of the same checkpoint finished first: its folder is as good
        shutil.rmtree(partial, ignore_errors=True)
        if not out.is_dir():
            raise
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.splitlines()[1].strip(), file=sys.stderr)
        return 2
    adapter, out, config = Path(argv[0]), Path(argv[1]), json.loads(argv[2])
    if not (adapter / "adapter_config.json").exists():
        print(f"{adapter} holds no LoRA adapter (adapter_config.json)", file=sys.stderr)
        return 2
    print(json.dumps({"merged": str(merge(adapter, out, config))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
