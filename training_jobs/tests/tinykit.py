"""A tiny Qwen3 model and tokenizer for the run tests: T1's training_jobs.tiny when it is there, else one built here
(a Qwen3Config of a few thousand parameters, a byte-level BPE trained on a few sentences, TRL's Qwen3 training chat
template with its generation markers). Built once per test session."""

from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]  # fmt: skip


def build_tiny_model(out: Path) -> Path:
    try:
        from training_jobs.tiny import tiny_model
    except ImportError:
        tiny_model = None
    if tiny_model is not None:
        result = tiny_model(out)
        return Path(result["path"] if isinstance(result, dict) else result or out)
    return _own_tiny_model(out)


def _own_tiny_model(out: Path) -> Path:
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from training_jobs.tests.datakit import TOOLS, conversation

    out.mkdir(parents=True, exist_ok=True)
    corpus = [str(m.get("content", "")) for m in conversation("t", calls=3)] + [str(TOOLS)] * 3
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tokenizer.train_from_iterator(corpus, trainer)
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen3_training.jinja").read_text()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=template)  # fmt: skip
    fast.save_pretrained(out)
    config = Qwen3Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=2048,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=True)
    Qwen3ForCausalLM(config).save_pretrained(out)
    return out
