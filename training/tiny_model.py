"""A tiny Qwen3-architecture model and its tokenizer, built in-process: the training path on a laptop or in CI, with
nothing downloaded.

The tokenizer is a byte-level BPE trained here (`tokenizers`) on a small built-in corpus of agent conversations, with
Qwen3's special tokens, wrapped as a `PreTrainedTokenizerFast` whose chat template is TRL's bundled Qwen3 training
template (it renders tools and tool calls and carries the `{% generation %}` markers that assistant masks need).
The model is a randomly initialised `Qwen3ForCausalLM` of about 100K parameters. Both are seeded: the same seed
gives the same files.

torch, transformers and TRL are imported inside `tiny_model` only (the web process never imports them).
"""

import json
from pathlib import Path

# Qwen3's: eos is the end of a turn, the pad token is <|endoftext|>; tool calls, tool results and reasoning have
# their own tokens, so a turn's boundaries never fall inside a BPE token.
PAD = "<|endoftext|>"
EOS = "<|im_end|>"
SPECIAL_TOKENS = [
    PAD,
    "<|im_start|>",
    EOS,
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
VOCAB_SIZE = 1024  # BPE merges over the corpus; the model's vocabulary is the tokenizer's length
MODEL_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file of the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a file (replaces it).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit",
            "description": "Replace text in a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "exec",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List a folder.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
]


def tiny_model(out, *, seed: int = 0) -> Path:
    """Build the tiny model and tokenizer into the folder `out` (created); returns its path."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(out)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **MODEL_CONFIG,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out


def tiny_tokenizer():
    """The byte-level BPE trained on `corpus()`, with Qwen3's special tokens and TRL's Qwen3 training template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=EOS,
        pad_token=PAD,
        chat_template=training_chat_template(),
        model_max_length=MODEL_CONFIG["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (PAD, EOS)],
    )


def training_chat_template() -> str:
    """TRL's bundled Qwen3 training template: prefix-preserving, reasoning always rendered, generation markers."""
    from trl.chat_template_utils import qwen3_training_chat_template

    return qwen3_training_chat_template


def corpus() -> list[str]:
    """What the tokenizer learns its merges from: a few agent conversations in the shapes the chat template renders
    (role words, the tools header, tool-call JSON, tool results, file-ish text and code)."""
    files = {
        "sales.csv": "region,amount,date\nnorth,4,2026-01-03\nsouth,2,2026-01-04\nnorth,1,2026-02-11\n",
        "totals.md": "# Totals\n\n| region | amount |\n| --- | --- |\n| north | 5 |\n| south | 2 |\n",
        "notes/todo.txt": "- fix the parser\n- write the report\n- send it to the team before Friday\n",
        "src/app.py": "import json\n\n\ndef main(path):\n    with open(path) as fh:\n        data = json.load(fh)\n"
        "    return sum(item['amount'] for item in data)\n\n\nif __name__ == '__main__':\n    print(main('data.json'))\n",
        "config.yaml": "name: report\nversion: 2\nsteps:\n  - read\n  - summarise\n  - write\n",
    }
    texts = [
        "You are a careful agent working in a local workspace. Use the tools to read, edit and run files.",
        "Thinking about the task: first I read the file, then I compute the result and write it out.",
        "The command failed with exit code 1: No such file or directory. Let me list the folder first.",
        "Done. I wrote the summary to totals.md and checked it with cat.",
    ]
    for tool in TOOLS:
        texts.append(json.dumps(tool))
    for path, content in files.items():
        for name, arguments, result in (
            ("read", {"path": path}, content),
            ("write", {"path": path, "content": content}, f"wrote {len(content)} bytes to {path}"),
            ("exec", {"command": f"cat {path} | wc -l"}, f"{content.count(chr(10))}\n"),
            ("ls", {"path": str(Path(path).parent)}, "\n".join(files)),
        ):
            texts.append(f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call>')
            texts.append(f"<tool_response>\n{result}\n</tool_response>")
        texts.append(
            f"<|im_start|>system\n{texts[0]}<|im_end|>\n<|im_start|>user\nPlease look at {path} and tell me "
            "what it holds.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )
    header = (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
        "function signatures within <tools></tools> XML tags:\n<tools>\n</tools>\n\nFor each function call, "
        "return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    )
    return [header, *texts] * 3
