"""``--llm-base-url URL --llm-model NAME``: let an OpenAI-compatible model fill the run config.

One ``POST URL/chat/completions`` (stdlib ``urllib``, no SDK), temperature 0, asking for a single JSON
object whose keys are ``train`` flag names. The answer is untrusted (a prompt-injected request can make the
model say anything): it must be a JSON object, every key must be a config field, every value must convert to
the field's type, and the merged config then passes ``config.validate`` like any flag or YAML value.
Beyond that, the model may fill only the fields the rule parser fills (:func:`allowed_fields`: strategy,
steps, batch, rates, switches, the task name, reward weights and the paths a request names), and a path
only when the request itself names it: ``trust_remote_code``, ``reward_config`` (code-running graders),
``env`` (an environment's code) or a folder the request never mentions are dropped, each named in the
plan's assumptions. Anything else is a one-line error naming the model and the field. An API key, when
the server needs one, is read from ``ARK_LLM_API_KEY`` (or ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
from dataclasses import fields
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.flags import help_of
from ark_trainer.core.config import coerce, field_types
from ark_trainer.stages.registry import config_class

TIMEOUT_S = 60  # one answer, from connecting to its last byte
MAX_ANSWER_BYTES = 1_000_000


def allowed_fields() -> set[str]:
    """The fields a planning model may fill: those the rule parser (``services/nl/parse.py``) fills, no others."""
    from ark_trainer.services.nl.parse import NUMBER_RULES, SWITCHES
    from ark_trainer.services.nl.paths import PATH_ROLES

    return {
        "strategy", "task_name", "reward_weights",
        *(flag for flag, _ in NUMBER_RULES), *(flag for _, flag, _ in SWITCHES), *(role for _, role in PATH_ROLES),
    }  # fmt: skip


def path_fields() -> set[str]:
    from ark_trainer.services.nl.paths import PATH_ROLES

    return {role for _, role in PATH_ROLES}


def schema_text() -> str:
    """The config schema as the model sees it: one line per field (name, type, default, help)."""
    types, allowed = field_types(config_class()), allowed_fields()
    lines = []
    for f in fields(config_class()):
        if f.metadata.get("cli_only") or f.name not in allowed:
            continue
        lines.append(f"- {f.name} ({types[f.name].__name__}, default {f.default!r}): {help_of(f)}")
    return "\n".join(lines)


def system_prompt() -> str:
    from ark_trainer.base.strategies import AUTO, strategy_table

    return (
        "You turn a request for training an OpenClaw agent into the settings of `ark-trainer-inner train`. "
        "Answer with ONE JSON object and nothing else. Its keys must be from this list; leave out keys the "
        "request does not imply (their defaults apply); a path only when the request names it. "
        f"strategy is one of {', '.join([*strategy_table(), AUTO])}.\n" + schema_text()
    )


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    from ark_trainer.base.httpclient import AnswerTooLarge, post_json

    headers = {"Content-Type": "application/json"}
    key = os.environ.get("ARK_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        return post_json(url, body, headers, TIMEOUT_S, MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as exc:
        raise UserError(f"--llm-base-url: {url} answered HTTP {exc.code} {exc.reason}") from None
    except AnswerTooLarge:
        raise UserError(f"--llm-base-url: {url} answered more than {MAX_ANSWER_BYTES} bytes") from None
    except TimeoutError:
        raise UserError(f"--llm-base-url: {url} gave no complete answer within {TIMEOUT_S}s") from None
    except (urllib.error.URLError, OSError) as exc:
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
    except (ValueError, RecursionError):
        raise UserError(f"{where}: the answer is not a JSON object: {content[:120]!r}") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a JSON object of train flags, got {type(data).__name__}")
    return data


def check_answer(data: dict[str, Any], where: str, request: str = "") -> tuple[dict[str, Any], list[str]]:
    """(flags, dropped): every key a config field, every value of the field's type (all problems at once);
    fields a request may not set, and paths the request does not name, are dropped and said why."""
    known = {f.name for f in fields(config_class()) if not f.metadata.get("cli_only")}
    allowed, paths = allowed_fields(), path_fields()
    problems, out, dropped = [], {}, []
    for key, value in data.items():
        if key not in known:
            problems.append(
                f"{where}: {key}: not a config field (the train flags, see ark-trainer train --help)"
            )
            continue
        try:
            value = coerce(config_class(), key, value, f"{where}: {key}")
        except UserError as exc:
            problems += exc.messages
            continue
        if key not in allowed:
            dropped.append(
                f"{key}={value!r} (a planning model may not set it; pass it yourself if you mean it)"
            )
        elif key in paths and value is not None and not named_in(str(value), request):
            dropped.append(f"{key}={value!r} (the request names no such path)")
        else:
            out[key] = value
    if problems:
        raise UserError(*problems)
    return out, dropped


def named_in(path: str, request: str) -> bool:
    """Whether ``request`` names ``path``: written out in it, or a path it writes that resolves the same."""
    from ark_trainer.services.nl.parse import parse_request

    if path and path in re.split(r"[\s\"'“”「」‘’，。；：,;]+", request):  # written out, as a word of its own
        return True
    try:
        named = parse_request(request).flags
    except UserError:
        return False
    target = Path(path).expanduser().resolve()
    roles = path_fields()
    return any(Path(str(v)).expanduser().resolve() == target for k, v in named.items() if k in roles)


def ask_llm(base_url: str, model: str | None, request: str) -> tuple[dict[str, Any], list[str]]:
    """Ask the model for the config of ``request``; returns (checked flags, what was dropped and why).

    The flags are not yet validated as a whole; nothing of the answer is run or loaded here.
    """
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
    return check_answer(extract_object(str(content), where), where, request)
