"""Test support: vLLM's token fields for the scripted upstream (llm.testing), from a toy chat template.

`toy_render` is a chat template and `toy_tokenize` a tokenizer (one token per UTF-8 byte, plus a few special tokens),
prefix-preserving as a training template is: a call's prompt is the previous call's prompt and completion followed
by the new messages, so exact-token chaining can be tested on real recorded calls. Each sampled token's logprob is
`toy_logprob(token_id, position)`, so a test can check that logprobs stay aligned with their tokens. The answers are
shaped as vLLM's OpenAI server gives them with `return_token_ids` and `logprobs`: `prompt_token_ids` (top level, or
the first chunk), `choices[0].token_ids` (per delta chunk; the end-of-turn token on the finish chunk), and
`choices[0].logprobs.content[].logprob`.
"""

import json

TOY_SPECIALS = {"<|im_start|>": 256, "<|im_end|>": 257, "<tool_call>": 258, "</tool_call>": 259}
TOY_EOS = TOY_SPECIALS["<|im_end|>"]
_TOY_SPECIAL_NAMES = {v: k for k, v in TOY_SPECIALS.items()}


def toy_tokenize(text: str) -> list[int]:
    """The special tokens their ids, every other character its UTF-8 bytes (so pieces tokenize to their whole)."""
    ids, rest = [], text
    while rest:
        starts = [(rest.find(name), name) for name in TOY_SPECIALS if name in rest]
        if not starts:
            ids += list(rest.encode())
            break
        at, name = min(starts)
        ids += list(rest[:at].encode()) + [TOY_SPECIALS[name]]
        rest = rest[at + len(name) :]
    return ids


def toy_detokenize(ids: list[int]) -> str:
    out, run = [], bytearray()
    for token in ids:
        if token in _TOY_SPECIAL_NAMES:
            out.append(run.decode(errors="replace") + _TOY_SPECIAL_NAMES[token])
            run = bytearray()
        else:
            run.append(token)
    return "".join(out) + run.decode(errors="replace")


def toy_logprob(token_id: int, position: int) -> float:
    """The logprob the toy policy gave its `position`-th sampled token of a call."""
    return -((token_id * 7 + position) % 13 + 1) / 8


def _toy_text(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def toy_assistant(content, tool_calls) -> str:
    """An assistant turn as the toy template renders it (and as the toy policy samples it, before its <|im_end|>)."""
    calls = "".join(
        f"<tool_call>{(c.get('function') or c).get('name', '')} {(c.get('function') or c).get('arguments', '')}"
        "</tool_call>"
        for c in tool_calls or []
    )
    return _toy_text(content) + calls


def toy_render(messages: list[dict], tools: list | None = None, add_generation_prompt: bool = False) -> str:
    parts = []
    if tools:
        names = ",".join((t.get("function") or t).get("name", "") for t in tools)
        parts.append(f"<|im_start|>system\ntools: {names}<|im_end|>\n")
    for message in messages:
        role = message.get("role", "user")
        if role == "assistant":
            body = toy_assistant(message.get("content"), message.get("tool_calls"))
        elif role == "tool":
            body = f"result {message.get('tool_call_id', '')}: {_toy_text(message.get('content'))}"
        else:
            body = _toy_text(message.get("content"))
        parts.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def toy_prompt_ids(request: dict) -> list[int]:
    return toy_tokenize(toy_render(request.get("messages") or [], request.get("tools"), add_generation_prompt=True))


def _toy_logprobs(ids: list[int], start: int) -> dict:
    return {
        "content": [
            {
                "token": toy_detokenize([t]),
                "logprob": toy_logprob(t, start + n),
                "bytes": list(toy_detokenize([t]).encode()),
                "top_logprobs": [],
            }
            for n, t in enumerate(ids)
        ]
    }


def vllm_tokens_whole(payload: dict, reply, request: dict) -> dict:
    """A whole chat answer with vLLM's token fields (as asked for), its usage counted in those tokens."""
    prompt = toy_prompt_ids(request)
    completion = toy_tokenize(toy_assistant(reply.content, reply.tool_calls)) + [TOY_EOS]
    choice = payload["choices"][0]
    choice["token_ids"] = completion
    choice["logprobs"] = _toy_logprobs(completion, 0) if request.get("logprobs") else None
    payload["usage"] = {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(completion),
        "total_tokens": len(prompt) + len(completion),
    }
    return {**payload, "prompt_token_ids": prompt}


def _chunk_token_text(chunk: dict, open_calls: set) -> str:
    """The text a chat chunk's delta stands for in the toy template (a tool call's head and tail are its tokens)."""
    delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
    text = delta.get("content") or ""
    for fragment in delta.get("tool_calls") or []:
        function = fragment.get("function") or {}
        if fragment.get("id"):
            text += ("</tool_call>" if open_calls else "") + f"<tool_call>{function.get('name', '')} "
            open_calls.add(fragment["index"])
        text += function.get("arguments") or ""
    return text


def vllm_tokens_chunks(chunks: list[dict], reply, request: dict) -> list[dict]:
    """The chat chunks of a stream with vLLM's token fields: prompt ids on the first, each delta's tokens on it, the
    closing tags and <|im_end|> on the finish chunk."""
    out, open_calls, position = [], set(), 0
    for n, chunk in enumerate(chunks):
        chunk = json.loads(json.dumps(chunk))
        if not chunk.get("choices"):  # the usage chunk
            prompt = len(toy_prompt_ids(request))
            chunk["usage"] = {"prompt_tokens": prompt, "completion_tokens": position, "total_tokens": prompt + position}
            out.append(chunk)
            continue
        choice = chunk["choices"][0]
        if n == 0:
            chunk["prompt_token_ids"] = toy_prompt_ids(request)
            ids = []
        elif choice.get("finish_reason"):
            ids = toy_tokenize("</tool_call>" if open_calls else "") + [TOY_EOS]
        else:
            ids = toy_tokenize(_chunk_token_text(chunk, open_calls))
        choice["token_ids"] = ids
        choice["logprobs"] = _toy_logprobs(ids, position) if request.get("logprobs") and ids else None
        position += len(ids)
        out.append(chunk)
    return out
