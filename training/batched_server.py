"""The `batched` serving backend: a model folder served as an OpenAI-compatible chat endpoint by ClawGym's own server
(training.rl.policy_server's routes and answers, on a fixed model taking each request's sampling), its requests
sampled together (training.batched_sampling) by the process's main thread.

    CLAWGYM_POLICY_KEY=KEY python -m training.batched_server FOLDER --name NAME (--uds SOCKET | --port PORT) \
        [--host 127.0.0.1] [--max-batch 16] [--max-tokens 4096]

Why a server of our own on CPU: `transformers serve --continuous-batching` gave SmolLM2-135M 32.6 tokens/s over 8
streams on this 2-core machine (its paged cache is costly on CPU, and it generates in a second thread, which runs
at about 60% of the main thread's speed here); this one samples 8 streams at about 65 tokens/s and 16 at 80
(bench/serve_bench.py measures both side by side). It renders prompts with the folder's own chat template (the one
datasets and training use) and parses answers as transformers serve does (the tokenizer's response template: content,
reasoning_content, tool calls); markup that does not parse stays the model's text (never a 500, which the proxy would
count as the server's failure). A request that names no temperature gets the model's generation config, as there. It answers vLLM's token fields
(prompt_token_ids, token_ids; logprobs when asked). A streamed answer comes in one burst once the call is sampled
(its first token arrives with its last), which agents and the proxy take like any stream.

Run by training_jobs.serving behind its authenticating front on a Unix socket (--uds: no port), the front passing the
server's key on; the key reaches this process in CLAWGYM_POLICY_KEY (taken out of the environment at start), and is
checked again here. No Django here.
"""

import argparse
import os
import signal
import sys
import uuid


def load(folder: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.batched_sampling import BatchedSampler

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype)
    if torch.cuda.is_available():
        model = model.to("cuda")
    model.eval()
    BatchedSampler.check_model(model)
    return model, tokenizer


def response_parser(model, tokenizer):
    """parse(out, body) -> the assistant message as transformers serve makes it: the tokenizer's response template
    (or transformers' fallback for the model type) splits content, reasoning and tool calls; markup that does not
    parse is the model's text (serve_backend.tolerant, as for transformers serve); no template, the plain text."""
    from transformers.cli.serving.utils import parse_assistant_message

    from training.transformers_serve import tolerant

    parse = tolerant(parse_assistant_message)

    def parsed(out: dict, body: dict) -> dict:
        cleaned = tokenizer.decode(out["token_ids"], skip_special_tokens=True)
        content, reasoning, calls = parse(
            tokenizer, model, out["token_ids"], out["prompt_ids"], cleaned_content=cleaned, tools=body.get("tools")
        )
        message = {"role": "assistant", "content": content}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(calls)
            ]
        return message

    return parsed


def default_sampling(model) -> dict:
    """What a request that names no temperature or top_p gets: the model's generation config, as transformers serve
    reads it (greedy unless it samples; a converted or trained ClawGym model says nothing, so greedy)."""
    config = model.generation_config
    if not getattr(config, "do_sample", False):
        return {"temperature": 0.0, "top_p": 1.0}
    return {"temperature": float(config.temperature or 1.0), "top_p": float(config.top_p or 1.0)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a model folder (safetensors, config, tokenizer with its chat template)")
    parser.add_argument("--name", required=True, help="the model name the server answers under")
    parser.add_argument("--host", default="127.0.0.1")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="serve on host:port")
    where.add_argument("--uds", help="serve on this Unix socket, and on no port")
    parser.add_argument("--max-batch", type=int, default=16, help="rows sampled together")
    parser.add_argument("--max-tokens", type=int, default=4096, help="the most tokens one call may sample")
    parser.add_argument("--max-body-bytes", type=int, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    key = os.environ.pop("CLAWGYM_POLICY_KEY", "")
    if not key:
        parser.error("no key in CLAWGYM_POLICY_KEY")

    from training.rl.policy_server import DEFAULT_MAX_BODY_BYTES, LivePolicy, PolicyServer

    model, tokenizer = load(args.folder)
    policy = LivePolicy(
        lambda: model,
        tokenizer,
        temperature=None,
        max_tokens=args.max_tokens,
        max_context=int(getattr(model.config, "max_position_embeddings", 0) or 8192),
        max_batch=args.max_batch,
        defaults=default_sampling(model),
        parse=response_parser(model, tokenizer),
    )
    server = PolicyServer(
        policy,
        api_key=key,
        host=args.host,
        port=args.port,
        model_name=args.name,
        max_body_bytes=args.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
        socket_path=args.uds,
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: policy.stop())
    print(f"serving {args.folder} as {args.name} on {server.start()}", flush=True)
    try:
        policy.run()  # in the main thread, until a signal stops it
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
