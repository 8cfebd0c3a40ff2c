"""`transformers serve`, with two changes: an answer whose tool-call markup does not parse is the model's text, and
`--uds SOCKET` serves on a Unix socket instead of a port.

transformers serve parses `<tool_call>{json}</tool_call>` with the response template (chat_template.py) and answers
500 when the JSON does not parse (a call cut off by max_tokens, or JSON the model got wrong) or is not a call (a
string, a list, an object without a name or arguments: seen from SmolLM2-135M in the learning bench). The proxy must
count a 500 as the server's failure (retried as infrastructure, never scored), so the model's own mistake would be
retried until the rollout failed as infrastructure and left the mean. Here such an answer is returned as what the model
wrote, with no tool call, as vLLM's hermes parser does: the agent reads text, and the checker scores the outcome.

transformers serve listens on a TCP port (--host, --port) and answers anyone who reaches it, `POST /load_model` (any
local folder) and `POST /reset` included. Behind ClawGym's front it takes `--uds SOCKET` (taken out of the arguments
before transformers reads them): uvicorn binds that Unix socket, in a folder only the worker's user may open, and no
port, so nothing but its front reaches it.

Run by path with -P (the launcher, serving.start_command), so that nothing of ClawGym is on sys.path: this module
imports only transformers.
"""

import logging
import sys

log = logging.getLogger("clawgym.serve_backend")


def tolerant(parse):
    """transformers serve's parse_assistant_message, answering what the model wrote where its markup fails."""

    def tolerant_parse(processor, model, generated_ids, input_ids, cleaned_content: str = "", tools=None):
        try:
            content, reasoning, calls = parse(
                processor, model, generated_ids, input_ids, cleaned_content=cleaned_content, tools=tools
            )
        # json.JSONDecodeError and the parser's own "could not parse" are ValueErrors; JSON that parses but is no call
        # (`<tool_call>"write"</tool_call>`, an object without "name" or "arguments") fails as the parser indexes it.
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("the answer's tool-call markup does not parse; returned as text: %s", str(exc)[:300])
            return cleaned_content, None, None
        if any(not isinstance(call.name, str) or not call.name for call in calls or ()):
            log.warning("the answer's tool call has no name; returned as text")
            return cleaned_content, None, None
        return content, reasoning, calls

    return tolerant_parse


def bind_to_socket(argv: list[str]) -> list[str]:
    """`argv` without `--uds SOCKET`; when it was there, every uvicorn server of this process binds SOCKET and no
    host or port (transformers serve builds its uvicorn.Config with --host and --port, and has no socket option)."""
    if "--uds" not in argv:
        return argv
    at = argv.index("--uds")
    if at + 1 >= len(argv):
        raise SystemExit("--uds needs a socket path")
    path = argv[at + 1]
    import uvicorn

    class UnixSocketConfig(uvicorn.Config):
        def __init__(self, app, *args, **kwargs):
            kwargs.pop("host", None)
            kwargs.pop("port", None)
            super().__init__(app, *args, uds=path, **kwargs)

    uvicorn.Config = UnixSocketConfig
    return argv[:at] + argv[at + 2 :]


def install():
    """The tolerant parse in both chat paths (the web process never imports this module's transformers: only the
    server subprocess calls it)."""
    from transformers.cli.serving import chat_completion, response, utils

    tolerant_parse = tolerant(utils.parse_assistant_message)
    chat_completion.parse_assistant_message = tolerant_parse  # the non-streaming chat completions path
    response.parse_assistant_message = tolerant_parse  # the Responses API's
    return tolerant_parse


if __name__ == "__main__":
    install()
    arguments = bind_to_socket(sys.argv[1:])
    from transformers.cli.transformers import main

    sys.argv = ["transformers", *arguments]
    sys.exit(main())
