""" "The current agent" of a request, read from OpenClaw's state: its model and its conversations.

``对当前客服质检Agent执行RFT+GRPO训练`` names no model and no data. The agent's config says which model it
uses now (its own ``model`` in ``agents.list`` / ``agents.entries``, else ``agents.defaults.model``;
a string or ``{primary: …}``). When ark-trainer deployed that model (the registry of deployments under
OpenClaw's state folder, :mod:`ark_trainer.services.openclaw.deploy`), its local folder ``OUT/model`` is the base
model; a model a local server runs (Ollama, or another OpenAI-compatible server on this machine) is
found in Ollama's store and trained from its GGUF file (:mod:`ark_trainer.services.nl.local_model`), or the plan
says plainly why it cannot be; any other model (a hosted API) cannot be trained here, and the plan says so. The agent's
conversations become the data: ``run`` collects them (``data collect``: scrubbed) into the run folder
before training; ``plan`` only says where they will go. Collected rows carry no labels, so the rewards
are the label-free ``conversations`` preset (compliance and satisfaction rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_text_bounded
from ark_trainer.services.nl.local_model import LocalModel, local_model

DEFAULT_AGENT = "main"  # OpenClaw's agent when agents.list names no default
DATA_NAME = "openclaw_conversations.jsonl"


@dataclass
class AgentState:
    agent_id: str
    config: str  # the OpenClaw config file read (or why none)
    model_ref: str | None  # provider/model the agent uses now
    model_from: str  # the config key it came from
    model_dir: str | None  # the local folder when ark-trainer deployed that model
    deployment: str | None  # the deployment's run folder
    local: LocalModel | None = (
        None  # a model a local server (Ollama, llama.cpp, ...) runs: its file, or why not
    )


def _load_config() -> tuple[dict, str]:
    from ark_trainer.base.external import openclaw_cli as cli

    path, _ = cli.config_path()
    if not path.is_file():
        return {}, f"{path} (absent)"
    import json5

    try:
        data = json5.loads(read_text_bounded(path))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: not readable as OpenClaw's config ({exc}); fix it or pass --model_path"
        ) from exc
    return (data if isinstance(data, dict) else {}), str(path)


def _model_of(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dict) and isinstance(value.get("primary"), str):
        return value["primary"]
    return None


def _agent_entry(agents: dict, wanted: str) -> tuple[str, dict]:
    """The agent's id and its own config entry (``{}`` when it has none)."""
    listed = [a for a in agents.get("list") or [] if isinstance(a, dict) and a.get("id")]
    entries = got if isinstance(got := agents.get("entries"), dict) else {}
    if wanted == "current":
        default = next((a for a in listed if a.get("default")), None)
        wanted = default["id"] if default else DEFAULT_AGENT
    own = next((a for a in listed if a["id"] == wanted), None) or entries.get(wanted) or {}
    return wanted, own if isinstance(own, dict) else {}


def _deployed_folder(model_ref: str) -> tuple[str | None, str | None]:
    """``OUT/model`` of the newest complete deployment serving ``model_ref``, with OUT."""
    from ark_trainer.services.openclaw.deploy import _load_registry

    for record in reversed(_load_registry()):
        if record.get("model_ref") == model_ref and record.get("state", "deployed") == "deployed":
            folder = Path(record["out"]) / "model"
            if (folder / "config.json").is_file():
                return str(folder), record["out"]
    return None, None


def agent_state(wanted: str) -> AgentState:
    """What OpenClaw's state says about the agent ``wanted`` ("current" or an id)."""
    config, where = _load_config()
    agents = got if isinstance(got := config.get("agents"), dict) else {}
    agent_id, own = _agent_entry(agents, wanted)
    model_ref, model_from = _model_of(own.get("model")), f"agent {agent_id}'s model"
    if model_ref is None:
        model_ref = _model_of((agents.get("defaults") or {}).get("model"))
        model_from = "agents.defaults.model.primary"
    folder, out = _deployed_folder(model_ref) if model_ref else (None, None)
    local = local_model(config, model_ref) if model_ref and not folder else None
    return AgentState(agent_id, where, model_ref, model_from, folder, out, local)


def fill_from_agent(
    wanted: str, notes: dict[str, str], flags: dict[str, Any], assumptions: list[str], out_dir: str
) -> str | None:
    """Fill the missing ``model_path``/``data_path`` (keys of ``notes``) from the agent's state.

    Each value found is removed from ``notes`` and said as an assumption with its source; a model that
    cannot be found gets a note naming the model the agent uses. Returns the agent id whose
    conversations ``run`` must collect, or None.
    """
    state = agent_state(wanted)
    name = f"agent {state.agent_id}" + (" (the current agent)" if wanted == "current" else "")
    if "model_path" in notes:
        if state.model_dir:
            flags["model_path"] = state.model_dir
            del notes["model_path"]
            assumptions.append(
                f"model: {name} uses {state.model_ref} ({state.model_from} in {state.config}), which "
                f"`ark-trainer deploy` served from {state.deployment}: --model_path {state.model_dir}"
            )
        elif state.local and state.local.spec:
            flags["model_path"] = state.local.spec
            del notes["model_path"]
            assumptions.append(
                f"model: {name} uses {state.model_ref} ({state.model_from} in {state.config}), {state.local.says}"
            )
        elif state.local:
            notes["model_path"] = (
                f"{name} uses {state.model_ref} ({state.model_from} in {state.config}), {state.local.says}"
            )
        elif state.model_ref:
            notes["model_path"] = (
                f"{name} uses {state.model_ref} ({state.model_from} in {state.config}), not a model "
                "ark-trainer deployed; a local checkpoint is needed: pass --model_path or say '训练 ./my-model'"
            )
        else:
            notes["model_path"] = (
                f"{name} has no model in {state.config}; pass --model_path or say '训练 ./my-model'"
            )
    collect = None
    if "data_path" in notes:
        flags["data_path"] = str(Path(out_dir) / "data" / DATA_NAME)
        del notes["data_path"]
        collect = state.agent_id
        assumptions.append(
            f"data: {name}'s OpenClaw conversations, collected when the run starts (`ark-trainer data "
            f"collect --openclaw --agent {state.agent_id}`, scrubbed) into --data_path {flags['data_path']}"
        )
        if not flags.get("reward_config"):
            from ark_trainer.rewards.composite import preset_path

            flags["reward_config"] = str(preset_path("conversations"))
            assumptions.append(
                "rewards: conversations carry no labels, so the label-free conversations preset "
                "(qc_compliance, qc_satisfaction rules): --reward_config " + flags["reward_config"]
            )
    return collect
