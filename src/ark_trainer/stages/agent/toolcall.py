"""The one tool-call text format ark-trainer reads and writes: Qwen2.5/Hermes ``<tool_call>`` blocks.

A model calls a tool by writing, inside its assistant turn::

    <tool_call>
    {"name": "lookup_order", "arguments": {"order_id": "A1234"}}
    </tool_call>

This is the format of Qwen2.5/Qwen3 chat templates (and TRL's ``qwen3_template`` response parser), so a real
Qwen model, the demo's tiny models, the model server's OpenAI ``tool_calls`` and TRL's GRPO tool loop all
agree on it. Tool results come back as ``tool`` messages, which the template renders as
``<tool_response>`` blocks in a user turn (as Qwen's does).

``AGENT_CHAT_TEMPLATE`` is a compact training variant of Qwen2.5's template for tiny models: no default
system prompt, each tool shown as one line ``- name(arg, ...): description`` instead of its whole JSON
schema, and ``{% generation %}`` markers around assistant output so that TRL's ``assistant_only_loss`` puts
the loss on the assistant turns only. ``AGENT_CHAT_TEMPLATE_WITH_HINT`` is the same template with two lines
in the system turn saying how to call a tool (``TOOL_FORMAT_HINT``): for a pretrained ChatML model whose own
template renders no tools (SmolLM2's), which has never been told the format (``ark-trainer demo --task agent
--base_model``).

Reading and writing the blocks themselves (``parse_tool_calls``, ``format_tool_calls``) is
:mod:`ark_trainer.base.chat.toolcall`'s, on the base floor, for the data, reward and serving code below the agent.
"""

from __future__ import annotations

import json
from typing import Any

# The system turn's tool list: one line per tool, ``- name(arg, ...): description``.
_TOOL_LINES = (
    "{{- 'Tools:' -}}"
    "{%- for tool in tools -%}"
    "{%- set f = tool.function if tool.function is defined else tool -%}"
    "{{- '\\n- ' + f.name + '(' -}}"
    "{%- if f.parameters is defined and f.parameters.properties is defined -%}"
    "{{- f.parameters.properties | list | join(', ') -}}"
    "{%- endif -%}"
    "{{- ')' -}}{%- if f.description -%}{{- ': ' + f.description -}}{%- endif -%}"
    "{%- endfor -%}"
)
# What a pretrained model that never saw the format needs to read once (Qwen2.5's template says as much, longer).
TOOL_FORMAT_HINT = (
    "\n\nTo call a tool, write <tool_call>\n"
    '{"name": NAME, "arguments": {ARGUMENT: VALUE}}\n'
    "</tool_call>; its result comes back in <tool_response></tool_response>."
)


def agent_chat_template(hint: str = "") -> str:
    """The agent template; ``hint`` is text appended to the tool list in the system turn."""
    return (
        "{%- if tools -%}"
        "{{- '<|im_start|>system\\n' -}}"
        "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n\\n' -}}{%- endif -%}"
        + _TOOL_LINES
        + ("{{- " + _jinja_string(hint) + " -}}" if hint else "")
        + "{{- '<|im_end|>\\n' -}}"
        + _TURNS
    )


def _jinja_string(text: str) -> str:
    """``text`` as a Jinja string literal."""
    return json.dumps(text)


_TURNS = (
    "{%- elif messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{% generation %}"
    "{%- if message.content -%}{{- message.content -}}{%- endif -%}"
    "{%- if message.tool_calls -%}"
    "{%- for tool_call in message.tool_calls -%}"
    "{%- set call = tool_call.function if tool_call.function is defined else tool_call -%}"
    "{%- if message.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    '{{- \'<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' -}}'
    "{%- if call.arguments is string -%}{{- call.arguments -}}{%- else -%}{{- call.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>' -}}"
    "{% endgeneration %}"
    "{{- '\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

AGENT_CHAT_TEMPLATE = agent_chat_template()
# For a pretrained model whose own template renders no tools: the same turns, and the format said once.
AGENT_CHAT_TEMPLATE_WITH_HINT = agent_chat_template(TOOL_FORMAT_HINT)


def attach_response_parser(tokenizer: Any) -> Any:
    """Give ``tokenizer`` TRL's Qwen3 response parser (``<tool_call>`` JSON blocks), for TRL's GRPO tool loop.

    TRL recognises known chat templates only; ours (and any ChatML template using this format) gets the same
    parser explicitly. A tokenizer that already has one keeps it.
    """
    from trl.chat_template_utils import qwen3_template

    if getattr(tokenizer, "response_template", None) is None:
        tokenizer.response_template = qwen3_template
    return tokenizer
