"""The serving policy: what of an OpenClaw request the model sees, chosen by the prompt shape it learnt.

A model is asked in OpenClaw what it was trained and evaluated on, so that it answers there as well as
in its evaluation. ``train`` records the prompt shape in the model folder (:data:`SHAPE_FILE`,
``ark_prompt_shape.json``), one of :data:`SHAPES`:

- ``bare``: the task prompts alone (the QC demo; most data sets). Served the conversation's turns only:
  OpenClaw's system prompt is replaced by the model's own training system prompt when its rows shared
  one, else cut to its first ``system_chars`` characters (default 0: none of it); the user's message is
  unwrapped (OpenClaw's ``[Tue 2026-12-01 20:01 UTC] `` prefix and its ``Runtime: agent=…`` paragraph
  go); OpenClaw's internal-context notes (``<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>``) go; no tools.
- ``tools``: bare task prompts with tool schemas (the agent demo): the same, with the tools as sent.
- ``openclaw-turns``: recorded OpenClaw turns without OpenClaw's system prompt (the live loop's rounds by
  default): the user's messages as OpenClaw wraps them; no system prompt (as ``bare``), no notes, no tools.
- ``openclaw``: recorded OpenClaw turns with the system prompt (``loop --keep_system_prompt``): the
  request as OpenClaw sends it.

Whatever is left is then fitted into the window (:mod:`ark_trainer.services.deploy.fit`). A model folder with no
such file (a base model deployed directly) is served ``openclaw`` when its window holds OpenClaw's prompt
(:data:`OPENCLAW_PROMPT_WINDOW`), else ``bare``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import read_json, write_json

SHAPES = ("bare", "tools", "openclaw-turns", "openclaw")
SHAPE_FILE = "ark_prompt_shape.json"
OPENCLAW_PROMPT_WINDOW = 32768  # OpenClaw's own runtime context for small local models (its docs)
INTERNAL_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
# OpenClaw wraps the user's message as "[Tue 2026-12-01 20:01 UTC] message\n\nRuntime: agent=main | …".
DATE_PREFIX = re.compile(r"^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? [^\]]{1,40}\] ")
RUNTIME_NOTE = re.compile(r"\n\nRuntime: agent=[^\n]*\s*$")
OPENCLAW_IDENTITY = "You are a personal assistant running inside OpenClaw."


@dataclass(frozen=True)
class PromptShape:
    """The prompt shape a model learnt: ``shape`` (one of :data:`SHAPES`) and its own system prompt."""

    shape: str
    system_prompt: str | None = None
    source: str = ""
    reply_tokens: int | None = None  # the answers' length it was trained and evaluated with

    def with_reply_tokens(self, n: int | None) -> PromptShape:
        return PromptShape(self.shape, self.system_prompt, self.source, n)

    def to_json(self) -> dict:
        return asdict(self)


def read_shape(model_dir: str | Path) -> PromptShape | None:
    path = Path(model_dir) / SHAPE_FILE
    if not path.is_file():
        return None
    data = read_json(path)
    if data.get("shape") not in SHAPES:
        return None
    n = data.get("reply_tokens")
    n = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
    return PromptShape(data["shape"], data.get("system_prompt"), str(data.get("source") or ""), n)


def write_shape(model_dir: str | Path, shape: PromptShape) -> None:
    write_json(Path(model_dir) / SHAPE_FILE, shape.to_json())


def is_openclaw_turn(messages: Iterable[dict]) -> bool:
    """A prompt recorded from OpenClaw: its system prompt, its message wrapping or its notes."""
    for m in messages:
        text = _text(m.get("content")) or ""
        if m.get("role") == "system" and OPENCLAW_IDENTITY in text:
            return True
        if m.get("role") == "user" and (DATE_PREFIX.match(text) or RUNTIME_NOTE.search(text)):
            return True
    return False


def shape_of_rows(rows: list[dict], with_tools: bool) -> PromptShape:
    """The shape of a run's training prompts: ``openclaw`` when most are recorded OpenClaw turns."""
    prompts = [r.get("prompt") or [] for r in rows]
    recorded = sum(is_openclaw_turn(p) for p in prompts)
    if prompts and recorded * 2 > len(prompts):
        with_system = sum(any(m.get("role") == "system" for m in p) for p in prompts) * 2 > len(prompts)
        what = f"{recorded}/{len(prompts)} training prompts are OpenClaw turns"
        if with_system:
            return PromptShape("openclaw", None, what + ", with its system prompt")
        return PromptShape("openclaw-turns", None, what + ", without its system prompt")
    systems = {p[0]["content"] for p in prompts if p and p[0].get("role") == "system"}
    everywhere = all(p and p[0].get("role") == "system" for p in prompts)
    shared = next(iter(systems)) if len(systems) == 1 and everywhere else None
    shape = "tools" if with_tools else "bare"
    what = "task prompts with tool schemas" if with_tools else "bare task prompts"
    return PromptShape(shape, shared, f"{len(prompts)} training prompts: {what}")


def shape_for(model_dir: str | Path, window: int, override: str = "auto") -> PromptShape:
    """The shape to serve ``model_dir`` in: ``override`` unless ``auto``, else recorded, else by window."""
    recorded = read_shape(model_dir)
    if override != "auto":
        return PromptShape(override, recorded.system_prompt if recorded else None, "--prompt_shape",
                           recorded.reply_tokens if recorded else None)  # fmt: skip
    if recorded is not None:
        return recorded
    if window >= OPENCLAW_PROMPT_WINDOW:
        return PromptShape(
            "openclaw", None, f"no {SHAPE_FILE}; a {window}-token window holds OpenClaw's prompt"
        )
    return PromptShape(
        "bare", None, f"no {SHAPE_FILE}; a {window}-token window is too small for OpenClaw's prompt"
    )


def row_system_prompt(prompt: list[dict]) -> str | None:
    """A row's own system prompt (its first message, where that is a system turn), else None."""
    first = prompt[0] if prompt else None
    return _text(first.get("content")) if isinstance(first, dict) and first.get("role") == "system" else None


def system_prompt_seen(shape: PromptShape, prompts: list[list[dict]]) -> dict[str, Any]:
    """What a model served in ``shape`` sees through OpenClaw of the rows' own system prompts (``prompts``:
    the rows' prompts as evaluated bare): ``rows`` that carry one, ``kept`` (the server shows the very same
    text in OpenClaw's system prompt's place) and a ``note`` for people. OpenClaw sends its own system
    prompt, never the row's: a ``bare``/``tools`` model is shown its training system prompt instead where
    its rows shared one (so a row with that one loses nothing); otherwise the rows' system prompt is lost,
    and the note says why."""
    systems = [row_system_prompt(p) for p in prompts]
    carried = [s for s in systems if s is not None]
    if not carried:
        return {"rows": 0, "kept": 0, "note": "the rows carry no system prompt: none to lose"}
    shown = shape.system_prompt if shape.shape != "openclaw" else None  # as apply_policy shows it
    kept = sum(s == shown for s in carried)
    n = len(carried)
    if kept == n:
        note = (
            f"the rows' system prompt is shown in OpenClaw's system prompt's place on all {n} rows (the "
            "model's training system prompt, recorded in its folder)"
        )
        return {"rows": n, "kept": kept, "note": note}
    if shape.shape == "openclaw":
        why = "served in shape openclaw: OpenClaw's own system prompt instead"
    elif shape.shape == "openclaw-turns":
        why = "served in shape openclaw-turns: no system prompt"
    elif shape.system_prompt is None:
        why = (
            f"served in shape {shape.shape} with no system prompt: the model folder records no training "
            f"system prompt ({shape.source or 'no ' + SHAPE_FILE}; a base model, or training rows whose "
            "system prompts differ)"
        )
    else:
        why = "these rows' system prompt differs from the one the model was trained with, which is shown"
    return {
        "rows": n,
        "kept": kept,
        "note": f"the rows' system prompt is lost on {n - kept} of {n} rows: {why}",
    }


def reply_budget(model_dir: str | Path, window: int, data_tokens: int | None = None) -> int:
    """The reply's tokens the server gives and the provider entry advertises (``maxTokens``): the answers'
    length the model was trained and evaluated with (``--max_completion_length``, recorded by ``train``),
    else ``data_tokens`` (the answers' length of the data it will be trained on: the live loop's), else
    the length ``train`` and ``eval`` give a model whose data holds no answer (``LENGTH_FALLBACK``), never
    more than half the window. A base model served with a share of its window rambled to the cap: SmolLM2
    wrote 512 tokens to a QC question whose answer takes 60, and the agent timed out."""
    from ark_trainer.core.auto_defaults import LENGTH_FALLBACK

    recorded = read_shape(model_dir)
    n = recorded.reply_tokens if recorded and recorded.reply_tokens else data_tokens or LENGTH_FALLBACK
    return max(16, min(n, max(16, window // 2)))  # OpenClaw refuses a budget under 16 tokens


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(str(p) for p in parts if p is not None)
    return None


def unwrap_request(text: str) -> str:
    """The user's own words from OpenClaw's wrapping (the date prefix, the runtime paragraph)."""
    return RUNTIME_NOTE.sub("", DATE_PREFIX.sub("", text, count=1))


def apply_policy(
    messages: list[dict], tools: list | None, shape: PromptShape, system_chars: int = 0
) -> tuple[list[dict], list | None]:
    """What the model is shown of a request, by ``shape`` (the module's rules); the input is not changed."""
    if shape.shape == "openclaw":
        return messages, tools
    kept: list[dict] = []
    system_parts = [m for m in messages if m.get("role") in ("system", "developer")]
    if shape.system_prompt:
        kept.append({"role": "system", "content": shape.system_prompt})
    elif system_parts and system_chars > 0:
        head = (_text(system_parts[0].get("content")) or "")[:system_chars]
        if head.strip():
            kept.append({"role": "system", "content": head})
    for m in messages:
        role, text = m.get("role"), _text(m.get("content"))
        if role in ("system", "developer"):
            continue
        if role == "user" and text is not None:
            if text.lstrip().startswith(INTERNAL_CONTEXT):
                continue
            m = {**m, "content": text if shape.shape == "openclaw-turns" else unwrap_request(text)}
        kept.append(m)
    return kept, (tools if shape.shape == "tools" else None)
