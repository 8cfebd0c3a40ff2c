"""A small OpenAI-compatible chat-completions server around transformers' generate, for serving a checkpoint where
there is no GPU: `python -m training_jobs.serving_cpu PATH --served-model-name NAME --port P [--host H]`.

Why not `transformers serve`: in transformers 5.24 it needs FastAPI (the `transformers[serving]` extra), which is
not among the pinned training dependencies here; this server needs only the standard library and what training
already installs. It answers GET /v1/models, GET /health and POST /v1/chat/completions (non-streaming, or one SSE
chunk plus [DONE] when asked to stream), renders the model's own chat template with the request's tools, and turns
`<tool_call>{json}</tool_call>` in the output into OpenAI tool calls (Qwen3's format). No torch at module import
is needed by the web process: only this subprocess imports it.
"""

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
MAX_NEW_TOKENS = 256


class Model:
    def __init__(self, path: str):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        self.model.eval()
        self.lock = threading.Lock()  # one generate at a time: a CPU server for tests and laptops

    def chat(self, body: dict) -> dict:
        messages = body.get("messages") or []
        tools = body.get("tools") or None
        ids = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True, return_tensors="pt")  # fmt: skip
        limit = min(int(body.get("max_tokens") or body.get("max_completion_tokens") or MAX_NEW_TOKENS), MAX_NEW_TOKENS)
        temperature = float(body.get("temperature") if body.get("temperature") is not None else 0.0)
        with self.lock, self.torch.no_grad():
            output = self.model.generate(
                **ids, max_new_tokens=limit, do_sample=temperature > 0, temperature=temperature or None,
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.tokenizer.eos_token_id,
            )  # fmt: skip
        new = output[0][ids["input_ids"].shape[1] :]
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        for special in ("<|im_end|>", "<|endoftext|>"):
            text = text.split(special)[0]
        finished = bool(len(new)) and int(new[-1]) == self.tokenizer.eos_token_id
        message, reason = to_message(text), "stop" if finished else "length"
        if message.get("tool_calls"):
            reason = "tool_calls"
        prompt, completion = int(ids["input_ids"].shape[1]), int(len(new))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", ""), "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }  # fmt: skip


def to_message(text: str) -> dict:
    calls = []
    for i, match in enumerate(TOOL_CALL.finditer(text)):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments", {})
            calls.append({"id": f"call_{i}", "type": "function", "function": {
                "name": call["name"], "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}})  # fmt: skip
    content = TOOL_CALL.sub("", text).strip() if calls else text
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def handler(model: Model, name: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

        def _send(self, status: int, body: dict | None = None, raw: bytes | None = None, kind="application/json"):
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "clawgym"}]})
            elif self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                reply = model.chat(body)
            except Exception as exc:  # a bad request or a generate error: the client sees why
                self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request"}})
                return
            if body.get("stream"):
                choice = reply["choices"][0]
                chunk = {**reply, "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": choice["message"], "finish_reason": choice["finish_reason"]}]}
                data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                self._send(200, raw=data, kind="text/event-stream")
            else:
                self._send(200, reply)

    return Handler


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m training_jobs.serving_cpu")
    parser.add_argument("path")
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    model = Model(args.path)
    server = ThreadingHTTPServer((args.host, args.port), handler(model, args.served_model_name))
    sys.stderr.write(f"serving {args.path} as {args.served_model_name} on http://{args.host}:{args.port}/v1\n")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
