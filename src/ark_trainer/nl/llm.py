"""``--llm-base-url URL --llm-model NAME``: let an OpenAI-compatible model fill the run config.

One ``POST URL/chat/completions`` (stdlib ``urllib``, no SDK), temperature 0, asking for a single JSON
object whose keys are ``train`` flag names. The answer is not trusted: it must be a JSON object, every key
must be a config field, every value must convert to the field's type, and the merged config then passes
``config.validate`` like any flag or YAML value. Anything else is a one-line error naming the model and the
field. An API key, when the server needs one, is read from ``ARK_LLM_API_KEY`` (or ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import fields
from typing import Any

from ark_trainer.config import TrainConfig, coerce, field_types
from ark_trainer.errors import UserError

TIMEOUT_S = 60


def schema_text() -> str:
    """The config schema as the model sees it: one line per field (name, type, default, help)."""
    types = field_types()
    lines = []
    for f in fields(TrainConfig):
        if f.metadata.get("cli_only"):
            continue
        lines.append(
            f"- {f.name} ({types[f.name].__name__}, default {f.default!r}): {f.metadata.get('help', '')}"
        )
    return "\n".join(lines)


def system_prompt() -> str:
    from ark_trainer.strategies import AUTO, strategy_table

    return (
        "You turn a request for training an OpenClaw agent into the settings of `ark-trainer-inner train`. "
        "Answer with ONE JSON object and nothing else. Its keys must be from this list; leave out keys the "
        f"request does not imply (their defaults apply). strategy is one of {', '.join([*strategy_table(), AUTO])}.\n"
        + schema_text()
    )


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("ARK_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise UserError(f"--llm-base-url: {url} answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"--llm-base-url: cannot reach {url}: {reason}") from None
    except ValueError:
        raise UserError(f"--llm-base-url: {url} did not answer with JSON") from None


def extract_object(content: str, where: str) -> dict[str, Any]:
    """The JSON object in the model's message (a ```json fence around it is allowed)."""
    text = content.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    if fence:
        text = fence.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError:
        raise UserError(f"{where}: the answer is not a JSON object: {content[:120]!r}") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a JSON object of train flags, got {type(data).__name__}")
    return data


def check_answer(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Every key a config field, every value of the field's type; all problems at once."""
    known = {f.name for f in fields(TrainConfig) if not f.metadata.get("cli_only")}
    problems, out = [], {}
    for key, value in data.items():
        if key not in known:
            problems.append(
                f"{where}: {key}: not a config field (the train flags, see ark-trainer train --help)"
            )
            continue
        try:
            out[key] = coerce(key, value, f"{where}: {key}")
        except UserError as exc:
            problems += exc.messages
    if problems:
        raise UserError(*problems)
    return out


def ask_llm(base_url: str, model: str | None, request: str) -> dict[str, Any]:
    """Ask the model for the config of ``request``; returns checked flags (not yet validated as a whole)."""
    if not model:
        raise UserError("--llm-model: required with --llm-base-url (the model name the server serves)")
    url = base_url.rstrip("/") + "/chat/completions"
    reply = _post(
        url,
        {
            "model": model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system_prompt()},
                {"role": "user", "content": request},
            ],
        },
    )
    where = f"--llm-model {model}"
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise UserError(
            f"--llm-base-url: {url}: not an OpenAI chat completion (no choices[0].message)"
        ) from None
    return check_answer(extract_object(str(content), where), where)
