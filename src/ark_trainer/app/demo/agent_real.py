"""The agent demo on a real model: ``ark-trainer demo --task agent --base_model PATH``.

The toy agent demo builds its own model, which learnt the tool-call format in its warm-up. A real chat model
brings its own chat template, and the episode loop reads one format only, the ``<tool_call>`` blocks of
``stages/agent/toolcall.py``. So before training, :func:`prepare_model` decides which template the run uses:

- the model's own, when it renders tools, ``<tool_call>`` calls and tool results (Qwen2.5's and Qwen3's do)
  and RFT can mask its assistant turns (``{% generation %}`` markers, or TRL's training variant of it);
- otherwise, for a ChatML model (``<|im_start|>``/``<|im_end|>``, ``<|im_end|>`` ending a turn: SmolLM2),
  the project's ``AGENT_CHAT_TEMPLATE_WITH_HINT``: the toy's agent template plus two lines in the system turn
  saying how to call a tool. It is written into the tokenizer of ``OUT/base_model`` (a GGUF or Ollama model's
  conversion there; for a Hugging Face folder a copy of its tokenizer beside links to its weights, so the
  user's folder is never written), said in the log and in ``OUT/base_model/ARK_CHAT_TEMPLATE.md``, and
  kept by every model the run saves;
- any other model is refused in one line naming ``--base_model``: its turns would be wrapped in tokens it
  does not know.

``train --model_path`` with ``--env`` does none of this: it refuses a template without tools and says how to
set one (``stages/agent/env.py: check_tokenizer``).

The training tasks carry ``REAL_CANDIDATES`` candidate episodes each, played by the demo's careless scripted
agent (``agent_data.with_candidates``: about 40% of them solve their task); RFT replays them in the
environment and trains on each task's solved one, because a small real model that has never seen the format
solves nothing itself (SmolLM2-135M-Instruct: 0 of 48 episodes sampled at temperature 1 solved their task). Then GRPO over
whole episodes, with ``presets/demo_agent_real.yaml``.
"""

from __future__ import annotations

import logging
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError

log = logging.getLogger("ark_trainer")
REAL_N_TRAIN = 200  # training tasks (about 80% of them have a solved candidate episode)
REAL_N_EVAL = 60  # held-out tasks: each model plays each once, greedy
REAL_CANDIDATES = 4  # candidate episodes of the careless agent per training task
TEMPLATE_NOTE = "ARK_CHAT_TEMPLATE.md"
CHATML = ("<|im_start|>", "<|im_end|>")
MODEL_FILES = ("config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json")


def config_path() -> Path:
    return Path(str(resources.files("ark_trainer") / "presets" / "demo_agent_real.yaml"))


def renders_tool_calls(tokenizer: Any) -> bool:
    """Does the tokenizer's template show tools, ``<tool_call>`` calls and tool results?"""
    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        return False
    call = {"type": "function", "function": {"name": "ark_probe", "arguments": {"x": "1"}}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "ark_probe", "content": "ark-result"},
    ]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that raises on this shape cannot serve the episode loop
        return False
    return "<tool_call>" in text and "ark_probe" in text and "ark-result" in text


def maskable(tokenizer: Any) -> bool:
    """Can RFT put the loss on the assistant turns only (``stages/agent/rft.py: tokenized_episodes``)?"""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if has_generation_markers(tokenizer.chat_template):
        return True
    try:
        return bool(get_training_chat_template(tokenizer))
    except Exception:  # noqa: BLE001 - TRL knows a few templates only
        return False


def is_chatml(tokenizer: Any) -> bool:
    """ChatML's two tokens are single tokens of the vocabulary, and ``<|im_end|>`` ends generation."""
    vocab = tokenizer.get_vocab()
    return all(t in vocab for t in CHATML) and tokenizer.eos_token == CHATML[1]


def template_choice(tokenizer: Any, spec: str) -> str | None:
    """``None``: keep the model's own template; else the template to give it. Refuses any other model."""
    from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE_WITH_HINT

    if getattr(tokenizer, "chat_template", None) and renders_tool_calls(tokenizer) and maskable(tokenizer):
        return None
    if is_chatml(tokenizer):
        return AGENT_CHAT_TEMPLATE_WITH_HINT
    raise UserError(
        f"--base_model: {spec}: its chat template shows no <tool_call> tool calls and the model is not a ChatML "
        "one (<|im_start|>, <|im_end|> as end of turn) that the project's agent template could be given; use a "
        "model whose template renders tools in that format (e.g. Qwen2.5-Instruct)"
    )


def prepare_model(spec: str, out: Path) -> str:
    """The ``--model_path`` the agent demo trains with ``spec``: ``spec`` itself when its template serves
    (a GGUF's conversion in ``OUT/base_model`` is then reused by ``train``), else a folder whose tokenizer has
    the project's agent template."""
    from ark_trainer.core.models.loading import load_tokenizer
    from ark_trainer.core.models.source import check_model, convert

    source = check_model(spec, flag="--base_model")
    base = out / "base_model"
    folder = convert(source, base).path  # an HF folder passes through unchanged
    tokenizer = load_tokenizer(folder)
    template = template_choice(tokenizer, spec)
    if template is None:
        log.info("agent demo: %s keeps its own chat template (it renders tools and <tool_call> calls)", spec)
        return spec
    if source.kind == "hf":
        _link_model(folder, base)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(base)
    why = (
        "its own chat template renders no tools, tool calls or tool results (the episode loop needs "
        "<tool_call> blocks), so this run gives it ark-trainer's agent template "
        "(ark_trainer.stages.agent.toolcall.AGENT_CHAT_TEMPLATE_WITH_HINT), kept by every model the run saves"
    )
    (base / TEMPLATE_NOTE).write_text(f"# Chat template\n\n{spec}: {why}.\n", encoding="utf-8")
    log.info("agent demo: %s: %s (%s)", spec, why, base / TEMPLATE_NOTE)
    return spec if source.kind != "hf" else str(base)


def _link_model(folder: Path, base: Path) -> None:
    """``base``: links to ``folder``'s config and weights (the tokenizer is saved there next)."""
    if base.exists():
        shutil.rmtree(base)  # an earlier attempt's (the run folder is ours: checked by the demo)
    base.mkdir(parents=True)
    for pattern in MODEL_FILES:
        for f in folder.glob(pattern):
            (base / f.name).symlink_to(f.resolve())
