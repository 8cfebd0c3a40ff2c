"""The messages and recorded calls of one small tool-calling conversation, shared by the trajectory tests."""

import copy
import json

# OpenClaw's real system prompt talks about heartbeats: it must never be taken for one.
SYSTEM = {
    "role": "system",
    "content": "You are a personal assistant.\nHeartbeats: if nothing needs attention, reply HEARTBEAT_OK.",
}


TASK = {"role": "user", "content": "Write hello.txt containing 'hi', then check it."}


HEARTBEAT = {
    "role": "user",
    "content": "Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK.",
}


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("read", "write", "exec")
]


def tool_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant(content=None, *calls):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def chat_call(messages, reply, *, usage=(100, 10), tools=TOOLS, total=True):
    usage_body = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    if total:
        usage_body["total_tokens"] = usage[0] + usage[1]
    return {
        "request": {"model": "scripted", "messages": copy.deepcopy(messages), "tools": tools, "stream": True},
        "response": {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": copy.deepcopy(reply), "finish_reason": "stop"}],
            "usage": usage_body,
        },
    }


A1 = assistant("I'll write it.", tool_call("call_1", "write", {"path": "hello.txt", "content": "hi"}))


T1 = tool("call_1", "Wrote 2 bytes to hello.txt")


A2 = assistant(None, tool_call("call_2", "exec", {"command": "cat hello.txt"}))


T2 = tool("call_2", "hi")


A3 = assistant("Done: hello.txt contains 'hi'.")
