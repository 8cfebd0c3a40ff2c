"""The live policy server: an OpenAI-compatible chat-completions server in the GRPO trainer's process (a thread) that
generates with the trainer's own live model, so the policy the rollouts sample is always the one being trained (no
weight sync). For small models on one machine and the CPU tests; on a GPU the policy is a vLLM server started with
weight transfer, synced by TRL before each rollout batch (README: RL runs). Requests are sampled together
(training.batched_sampling) by the trainer's main thread while it waits for the step's rollouts
(LivePolicy.sampling_while). The same server, on a fixed model taking each request's sampling, is the `batched`
serving backend (training.batched_server).

It answers what vLLM's OpenAI server answers for a training session's request (`return_token_ids`, `logprobs`):
`prompt_token_ids` (top level; on the first chunk when streaming), `choices[].token_ids` (per delta when streaming)
and `choices[].logprobs.content[].logprob`, the sampled tokens' log-probabilities after temperature scaling (vLLM's
`processed_logprobs`, which TRL's trainer computes the same way: logits / temperature, no top-k/top-p). The prompt
is the model's chat template over the request's messages and tools; `<tool_call>{json}</tool_call>` in the output
becomes OpenAI tool calls (Qwen3's format). The run's temperature is used
whatever the request says (GRPO's loss assumes the temperature it samples at); max_tokens is capped by the run's.

It answers only requests carrying its key (`Authorization: Bearer KEY`, the key the job derived for this attempt and
names on the run's policy endpoint), and reads a request body only when its Content-Length is within the limit (the
proxy's own, by default): a listening server on a gpu worker is otherwise anyone's model and anyone's memory.

The trainer's policy keeps its own tokens (`own_tokens`, token in, token out): an agent sends its history back as
parsed messages, and the chat template renders an earlier answer canonically, which is not always the tokens sampled
(a policy writing `<tool_call>\n {"name"` with a space gets `<tool_call>\n{"name"` back). Its next prompt would then
not extend the earlier prompt and answer, and each call would become a training sample of its own, each carrying the
whole prompt again (seen in the learning bench: three samples a rollout, three times the trainer's work a step). So
the prompt is built message by message: each assistant message of the history is looked up among the step's
answered calls by the exact prompt ids before it and by the message itself (a step's rollouts of one task often
share a prompt token for token, so the ids alone would hand one rollout a sibling's answer), and its sampled ids
are used, followed by the template's own text between that turn's end and the next assistant turn. At the first
message that matches nothing the whole prompt is rendered as usual.

Only the trainer and model-server subprocesses import this (torch is imported inside methods).
"""

import collections
import hmac
import json
import os
import re
import socketserver
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STREAM_TOKENS_PER_CHUNK = 8
ANSWERED_KEPT = 4096  # a step's answered calls kept for own_tokens (64 rollouts × 64 calls)
DEFAULT_MAX_BODY_BYTES = 33 * 1024 * 1024  # the proxy's 32 MiB and room for the fields it adds
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def compared(message: dict) -> str:
    """An assistant message as two are compared: its content and its tool calls' names and arguments (an OpenAI
    call's arguments are a JSON string, read back; the ids are left out)."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        calls.append([function.get("name"), arguments])
    return json.dumps([message.get("content") or "", calls], sort_keys=True)


def to_message(text: str) -> dict:
    """The assistant message of a completion: `<tool_call>{"name", "arguments"}</tool_call>` blocks become OpenAI
    tool calls (every one of them: parallel calls are kept), the rest is the content."""
    calls = []
    for i, match in enumerate(TOOL_CALL.finditer(text)):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}_{i}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
    message = {"role": "assistant", "content": TOOL_CALL.sub("", text).strip() if calls else text}
    if calls:
        message["tool_calls"] = calls
    return message


class LivePolicy:
    """Generation with a model that is being trained (`model_getter()` returns it at each step), or with a served
    one: requests from any thread are sampled together by a BatchedSampler (training.batched_sampling), whose
    batch runs in the thread that calls `run()`: the trainer's main thread while it waits for a step's rollouts, the
    batched server's main thread for good.

    `temperature` is the run's (GRPO's loss assumes the temperature it samples at: a request's is ignored), or None
    for a served model, which takes the request's temperature, top_p and seed, and `defaults` (temperature, top_p)
    where the request says none. `parse` turns a sampled answer into the assistant message (default: to_message).
    `own_tokens`: the history's answers as they were sampled (the module's docstring)."""

    def __init__(
        self,
        model_getter,
        tokenizer,
        *,
        temperature: float | None,
        max_tokens: int,
        max_context: int,
        max_batch: int = 16,
        prefix_bytes: int | None = None,
        defaults: dict | None = None,
        parse=None,
        own_tokens: bool = False,
    ):
        from training.batched_sampling import PREFIX_CACHE_BYTES, BatchedSampler

        self.tokenizer = tokenizer
        self.temperature = None if temperature is None else float(temperature)
        self.defaults = {"temperature": 1.0, "top_p": 1.0, **(defaults or {})}  # what a request does not say
        # parse(out, body) -> the assistant message; the default reads `<tool_call>` blocks (to_message)
        self.parse = parse or (lambda out, body: to_message(out["text"]))
        self.max_tokens = int(max_tokens)
        self.max_context = int(max_context)
        eos, pad = getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)
        self.sampler = BatchedSampler(
            model_getter,
            eos_ids=[] if eos is None else eos,
            pad_id=pad if pad is not None else (eos or 0),  # a padded column is masked out: any id does
            max_batch=max_batch,
            prefix_bytes=PREFIX_CACHE_BYTES if prefix_bytes is None else prefix_bytes,
        )
        self.requests = 0
        self.own_tokens = own_tokens
        # The step's answered calls: {prompt ids: [(the answer's message as compared, its sampled ids)]}, oldest first.
        self._answered: collections.OrderedDict = collections.OrderedDict()
        self._answered_lock = threading.Lock()
        self.own_prompts = 0  # prompts built with the history's sampled answers

    def run(self, until=None) -> None:
        """Sample the requests in this thread until `until()` is true (None: until stop())."""
        self.sampler.run(until)

    def stop(self) -> None:
        self.sampler.stop()

    def sampling_while(self, work):
        """work() in a helper thread while this thread samples the requests it causes (an RL step's rollouts call
        this policy); work's result, or its exception raised here."""
        result: dict = {}

        def target():
            try:
                result["value"] = work()
            except BaseException as exc:  # handed to the caller's thread
                result["error"] = exc

        self.sampler.forget_prefixes()  # the weights changed since the last step: the stored caches no longer hold
        with self._answered_lock:
            self._answered.clear()  # a step's rollouts are new conversations
        thread = threading.Thread(target=target, name="policy-work", daemon=True)
        thread.start()
        self.run(until=lambda: not thread.is_alive())
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["value"]

    def generate(self, body: dict) -> dict:
        """{"prompt_ids", "token_ids", "logprobs", "text", "finished"} for one chat request (blocks until a thread
        running `run()` has sampled it)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        tools = body.get("tools") or None
        prompt_ids = self.own_prompt(messages, tools) if self.own_tokens else None
        if prompt_ids is not None:
            self.own_prompts += 1
        else:  # rendered whole only where the history's answers are not this policy's own
            prompt_ids = self.tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            if isinstance(prompt_ids, dict):  # some tokenizers answer a BatchEncoding whatever return_dict says
                prompt_ids = prompt_ids["input_ids"]
            prompt_ids = list(prompt_ids)
        asked = body.get("max_completion_tokens") or body.get("max_tokens") or self.max_tokens
        limit = min(int(asked), self.max_tokens, self.max_context - len(prompt_ids))
        if limit < 1:
            raise ValueError(
                f"the prompt ({len(prompt_ids)} tokens) leaves no room in the context of {self.max_context}"
            )
        if self.temperature is not None:
            temperature, top_p, seed = self.temperature, 1.0, None
        else:
            temperature = _number(body.get("temperature"), self.defaults["temperature"])
            top_p = _number(body.get("top_p"), self.defaults["top_p"])
            seed = body.get("seed") if isinstance(body.get("seed"), int) else None
        out = self.sampler.sample(prompt_ids, max_tokens=limit, temperature=temperature, top_p=top_p, seed=seed)
        self.requests += 1
        token_ids, logprobs = out["token_ids"], out["logprobs"]
        text = self.tokenizer.decode(token_ids, skip_special_tokens=False)
        for special in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            if special:
                text = text.split(special)[0]
        if self.own_tokens and token_ids and token_ids[-1] in self.sampler.eos_ids:
            self._remember(prompt_ids, compared(self.parse({**out, "text": text}, body)), token_ids)
        return {
            "prompt_ids": prompt_ids,
            "token_ids": token_ids,
            "logprobs": logprobs,
            "text": text,
            "finished": out["finished"],
        }

    def _remember(self, prompt_ids: list[int], message: str, answer: list[int]) -> None:
        with self._answered_lock:
            key = tuple(prompt_ids)
            self._answered.setdefault(key, []).append((message, list(answer)))
            self._answered.move_to_end(key)
            while len(self._answered) > ANSWERED_KEPT:
                self._answered.popitem(last=False)

    def _answer_for(self, prompt_ids: list[int], message: str) -> list[int] | None:
        with self._answered_lock:
            answers = self._answered.get(tuple(prompt_ids)) or []
            return next((list(ids) for said, ids in reversed(answers) if said == message), None)

    def own_prompt(self, messages: list, tools) -> list[int] | None:
        """The prompt with every assistant message of the history as this policy sampled it, or None (no assistant
        message, or one that is not an answer of this step to the same prompt)."""
        turns = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
        end_text = self.tokenizer.eos_token
        if not turns or not end_text:
            return None

        def text(upto: int, generation: bool) -> str:
            return self.tokenizer.apply_chat_template(
                messages[:upto], tools=tools, add_generation_prompt=generation, tokenize=False
            )

        def ids_of(part: str) -> list[int]:
            return list(self.tokenizer.encode(part, add_special_tokens=False))

        ids = ids_of(text(turns[0], True))
        for n, turn in enumerate(turns):
            answer = self._answer_for(ids, compared(messages[turn]))
            if answer is None:
                return None
            through = text(turn + 1, False)  # ... this answer as the template writes it, and its turn's end
            after = text(turns[n + 1] if n + 1 < len(turns) else len(messages), True)
            end = through.rfind(end_text)
            if end < 0 or not after.startswith(through):
                return None
            # The sampled answer ends with the end of turn; then what the template writes after it (a newline, the
            # tool results, the next turn's header): text that starts after a special token encodes alike alone.
            ids = ids + answer + ids_of(through[end + len(end_text) :] + after[len(through) :])
        return ids

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], skip_special_tokens=False)


def _number(value, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def completion(policy: LivePolicy, body: dict, out: dict, model_name: str) -> dict:
    """The non-streaming chat.completion, with vLLM's token fields."""
    message = policy.parse(out, body)
    reason = "tool_calls" if message.get("tool_calls") else ("stop" if out["finished"] else "length")
    choice = {"index": 0, "message": message, "finish_reason": reason, "token_ids": out["token_ids"]}
    if body.get("logprobs"):
        choice["logprobs"] = {
            "content": [
                {"token": policy.token_text(t), "logprob": lp} for t, lp in zip(out["token_ids"], out["logprobs"])
            ]
        }
    prompt, generated = len(out["prompt_ids"]), len(out["token_ids"])
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "prompt_token_ids": out["prompt_ids"],
        "choices": [choice],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated},
    }


def chunks(policy: LivePolicy, body: dict, out: dict, model_name: str):
    """The streamed answer as vLLM shapes it: a first chunk with the role and prompt_token_ids, content deltas each
    carrying their token_ids (and logprobs when asked), tool calls in one delta, the finish reason, usage if asked."""
    whole = completion(policy, body, out, model_name)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": model_name}
    message, reason = whole["choices"][0]["message"], whole["choices"][0]["finish_reason"]
    yield {
        **base,
        "prompt_token_ids": out["prompt_ids"],
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
    }
    ids, lps = out["token_ids"], out["logprobs"]
    # The text is split over the token chunks evenly (their concatenation is exactly the message's content); each
    # chunk carries its own token ids, which is what a recorder assembles.
    parts = max(1, -(-len(ids) // STREAM_TOKENS_PER_CHUNK))
    text = "" if message.get("tool_calls") else message["content"]
    size = -(-len(text) // parts) if text else 0
    for n, start in enumerate(range(0, max(len(ids), 1), STREAM_TOKENS_PER_CHUNK)):
        piece = ids[start : start + STREAM_TOKENS_PER_CHUNK]
        delta = {"content": text[n * size : (n + 1) * size]} if text else {}
        choice = {"index": 0, "delta": delta, "finish_reason": None, "token_ids": piece}
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": policy.token_text(t), "logprob": lp}
                    for t, lp in zip(piece, lps[start : start + len(piece)])
                ]
            }
        yield {**base, "choices": [choice]}
    final = {}
    if message.get("tool_calls"):
        final = {
            "content": message["content"] or None,
            "tool_calls": [{**call, "index": i} for i, call in enumerate(message["tool_calls"])],
        }
    yield {**base, "choices": [{"index": 0, "delta": final, "finish_reason": reason, "token_ids": []}]}
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": whole["usage"]}


def handler(policy: LivePolicy, model_name: str, api_key: str, max_body_bytes: int):
    expected = f"Bearer {api_key}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            sys.stderr.write(f"policy server: {fmt % args}\n")

        def _send(self, status: int, body: dict | None = None, raw: bytes | None = None, kind="application/json"):
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, status: int, message: str):
            self.close_connection = True  # the body (if any) is left unread: this connection carries nothing more
            self._send(status, {"error": {"message": message, "type": "invalid_request", "code": status}})

        def _authorized(self) -> bool:
            given = (self.headers.get("Authorization") or "").encode("utf-8", "surrogateescape")
            if hmac.compare_digest(given, expected):
                return True
            self._refuse(401, "this server answers only requests carrying its key")
            return False

        def _body(self) -> dict | None:
            """The request's JSON, or None once refused: no length, a bad one or one over the limit (411/400/413)
            before a byte is read; chunked bodies are not taken."""
            length = self.headers.get("Content-Length")
            if self.headers.get("Transfer-Encoding") or length is None:
                self._refuse(411, "send the body with a Content-Length")
                return None
            if not (length.isascii() and length.isdigit()):  # "²".isdigit() too, which int() refuses
                self._refuse(400, "a bad Content-Length")
                return None
            if int(length) > max_body_bytes:
                self._refuse(413, f"request bodies here are at most {max_body_bytes} bytes")
                return None
            try:
                body = json.loads(self.rfile.read(int(length)) or b"{}")
            except ValueError as exc:
                self._refuse(400, f"the body is not JSON: {exc}")
                return None
            if not isinstance(body, dict):
                self._refuse(400, "the body is not a JSON object")
                return None
            return body

        def do_GET(self):
            if not self._authorized():
                return
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(
                    200, {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "clawgym"}]}
                )
            elif self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            if not self._authorized():
                return
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._refuse(404, f"no route {self.path}")
                return
            body = self._body()
            if body is None:
                return
            try:
                out = policy.generate(body)
            except Exception as exc:  # a bad request or a generate error: the client sees why
                self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}", "type": "invalid_request"}})
                return
            # The answer is built whole before anything is sent: one that cannot be built (the parser failing on what
            # the model wrote) is a 500 that says why, not a dropped connection the front can only call a protocol
            # error.
            try:
                if body.get("stream"):
                    answer = list(chunks(policy, body, out, model_name))
                else:
                    answer = completion(policy, body, out, model_name)
            except Exception as exc:
                message = f"the answer could not be built: {type(exc).__name__}: {exc}"
                self._send(500, {"error": {"message": message, "type": "server_error"}})
                return
            if not body.get("stream"):
                self._send(200, answer)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in answer:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    """The HTTP server on a Unix socket (the batched backend behind its front): no port at all."""

    daemon_threads = True


class PolicyServer:
    """The server on a thread: start() binds (port 0: a free one) and returns the OpenAI base URL (…/v1). It answers
    only requests carrying `api_key` (required), with bodies of at most `max_body_bytes`. With `socket_path` it
    listens on that Unix socket instead of host:port (the batched backend, whose front alone reaches it)."""

    def __init__(
        self,
        policy: LivePolicy,
        *,
        api_key: str,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "policy",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        socket_path: str | None = None,
    ):
        if not api_key:
            raise ValueError("the policy server needs a key (CLAWGYM_POLICY_KEY, given by the run's job)")
        self.policy = policy
        self.model_name = model_name
        requests = handler(policy, model_name, api_key, int(max_body_bytes))
        self.socket_path = socket_path
        if socket_path:
            self.httpd = _UnixHTTPServer(socket_path, requests)
        else:
            self.httpd = ThreadingHTTPServer((host, port), requests)
            self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="policy-server", daemon=True)

    @property
    def base_url(self) -> str:
        if self.socket_path:
            return f"unix:{self.socket_path}"
        host, port = self.httpd.server_address[:2]
        if host in ("0.0.0.0", ""):  # bound to every interface: the proxy on another host reaches it by name
            import socket

            host = socket.getfqdn()
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        self.thread.start()
        return self.base_url

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.socket_path:
            try:
                os.unlink(self.socket_path)
            except OSError:
                pass
