"""The exact text a model is conditioned on: its chat template with the generation prompt, or plain text
for a model without one."""

from __future__ import annotations

from typing import Any


def is_conversational(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def model_prompt(messages: list[dict[str, str]], conversational: bool) -> Any:
    """The prompt as TRL should see it: the chat list, or plain text for a model without a chat template."""
    if conversational:
        return messages
    return "\n".join(m["content"] for m in messages) + "\n"


def render_prompt(tokenizer, messages: list[dict[str, str]], tools: list[dict] | None = None) -> str:
    """The exact text the model is conditioned on (chat template with the generation prompt; with the
    environment's tool schemas under ``--env``)."""
    if is_conversational(tokenizer):
        return tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=True
        )
    return model_prompt(messages, False)
