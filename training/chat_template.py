"""ClawGym's tool-calling chat template for models whose own template has none (SmolLM2's renders role and content
only): ChatML with the Qwen/Hermes tool shape the tiny model uses (`<tools>` in the system turn,
`<tool_call>{"name", "arguments"}</tool_call>` in the assistant's, `<tool_response>` blocks in a user turn) and
`{% generation %}` markers around what the model writes, so assistant masks come from one render (masks.py).

A converter saves it into the model folder's tokenizer, with the response template `transformers serve` parses tool
calls back with (`tokenizer.response_template`: its built-in fallbacks are keyed by model type and know no Llama
model). Every path then reads it from the folder and nothing else: building and exporting datasets
(masks.tokenize_sample), training (the trainers' tokenizer), serving (transformers serve renders the request with it
and parses the answer; vLLM parses `<tool_call>` with its hermes parser) and recording RL tokens (the policy server
renders prompts with it, the sample builder re-tokenizes with it).

Two choices keep the renders equal wherever they are made:
- an assistant turn with tool calls renders its calls only: transformers serve drops the content of such a message
  when it renders history (it may hold raw call markup), so rendering it here would make the training sample differ
  from the prompt the server builds for the next call;
- an assistant's text is rendered trimmed: SmolLM2's BPE merges the generation prompt's newline with a leading space
  ("\n "), so a turn starting with whitespace would tokenize otherwise in the whole conversation than after the
  prompt the model saw;
- reasoning is not rendered (SmolLM2 does not reason; a `reasoning_content` from another model is dropped everywhere
  alike).
The template is prefix-preserving: a conversation's render starts with the render of each of its prefixes.
"""

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # SmolLM2's own default

TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)

CHAT_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set system = messages[0].content or '' %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system = '" + DEFAULT_SYSTEM + "' %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}"
    "{{- " + repr(TOOLS_HEADER) + " }}"  # Python's literal is a Jinja literal (escapes included)
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- " + repr(TOOLS_FOOTER) + " }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{%- if message.tool_calls %}"
    "{%- for call in message.tool_calls %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{%- if not loop.first %}{{- '\\n' }}{%- endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + fn.name + \'", "arguments": \' }}'
    "{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- else %}{{- (message.content or '') | trim }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"  # the newline inside, as TRL's training templates: the per-prefix reference agrees
    "{%- endgeneration %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + (message.content or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# transformers serve's declarative response parser (cli/serving/utils.py's Qwen2/3 entry without reasoning): what
# follows the generation prompt is content, and each <tool_call>{json}</tool_call> an OpenAI tool call.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", "content": "text"},
    },
}

PAD = "<|endoftext|>"  # SmolLM2's tokenizer pads with its end of turn; padding with it would hide real ends
EOS = "<|im_end|>"


def apply(tokenizer) -> None:
    """Give a ChatML tokenizer ClawGym's template, the response parser and distinct end-of-turn and pad tokens."""
    vocabulary = tokenizer.get_vocab()
    for token in (PAD, EOS, "<|im_start|>"):
        if token not in vocabulary:
            raise ValueError(f"the tokenizer has no {token} token: ClawGym's template is ChatML")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    tokenizer.eos_token = EOS
    tokenizer.pad_token = PAD
