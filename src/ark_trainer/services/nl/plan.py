"""A request → a complete, validated :class:`TrainConfig`, its ``train`` command line, and how it was read.

Used by ``ark-trainer plan`` and ``ark-trainer run`` (``app/commands/plan.py``). The rules in ``services/nl/parse.py``
read the request; with ``llm_base_url`` an OpenAI-compatible model fills the config instead
(``services/nl/llm.py``), and its answer passes through the same schema checks as a ``--config`` YAML file.
Explicit ``--model_path`` / ``--data_path`` / ``--output_dir`` always win.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.config import REQUIRED, TrainConfig, load_yaml_config, resolve_config, to_yaml
from ark_trainer.services.nl.parse import parse_request
from ark_trainer.stages.grpo.options import GRPOOptions
from ark_trainer.stages.registry import config_class

ALWAYS_SHOWN = ("strategy", "task_name", *REQUIRED)
HINTS = {
    "model_path": "name it in the request ('训练 ./my-model', 'model ./my-model') or pass --model_path",
    "data_path": (
        "name it in the request ('用 ./train.jsonl', 'data ./train.jsonl'), pass --data_path, or say "
        "'当前Agent' / 'the current agent' to train on its OpenClaw conversations"
    ),
}
MISSING = "<missing>"  # stands in for a required path in a plan that cannot run yet
DEFAULTS_NOTED = {"task_name": "task name", "max_train_steps": "step count", "batch_size": "batch size"}


@dataclass
class RequestPlan:
    cfg: TrainConfig
    assumptions: list[str]
    ignored: list[str]
    source: str  # "rules" or "llm:<model>"
    missing: list[str] = field(default_factory=list)  # "--flag: missing; how to supply it"
    collect_agent: str | None = None  # run collects this agent's conversations into cfg.data_path first

    @property
    def command(self) -> str:
        return train_command(self.cfg.flag_items())

    def as_json(self) -> dict[str, Any]:
        """The config keyed by the train flag names, then the command, assumptions, ignored words, source."""
        return {
            **self.cfg.flag_items(),
            "command": self.command,
            "assumptions": self.assumptions,
            "ignored": self.ignored,
            "missing": self.missing,
            "ready": not self.missing,
            "source": self.source,
        }

    def as_yaml(self) -> str:
        """The config as a run YAML (usable with ``train --config``), the rest as comments."""
        lines = [f"# ark-trainer plan ({self.source}); run it with:", f"#   {self.command}"]
        lines += [f"# MISSING {m}" for m in self.missing]
        lines += [f"# assumption: {a}" for a in self.assumptions]
        if self.ignored:
            lines.append(f"# ignored (not understood): {', '.join(self.ignored)}")
        return "\n".join(lines) + "\n" + to_yaml(self.cfg)


MAX_FOLDER_NAME = 80


def safe_folder_name(text: str) -> str:
    """One safe path component from user text (a task name read from a request).

    Letters of any script, digits, ``_``, ``-`` and inner dots are kept; separators, ``..``, control and
    other characters become ``_``; no leading dot or dash; at most 80 characters; never empty.
    """
    name = "".join(c if c.isalnum() or c in "_-." else "_" for c in unicodedata.normalize("NFC", text))
    name = re.sub(r"\.{2,}", "_", name).lstrip(".-_")[:MAX_FOLDER_NAME].rstrip(".")
    return name or TrainConfig.task_name


def _flag_value(value: Any) -> str:
    return str(value)  # bools print as True/False, as the reference writes them


def train_command(flags: Mapping[str, Any]) -> str:
    """The equivalent ``ark-trainer-inner train ...`` line of ``flags`` (a config's ``flag_items()``): the
    flags the reference template starts with (:data:`ALWAYS_SHOWN`, in its order), then every other
    non-default value in ``--help`` order."""
    parts = ["ark-trainer-inner", "train"]
    first = {name: i for i, name in enumerate(ALWAYS_SHOWN)}
    for f in sorted(fields(config_class()), key=lambda f: first.get(f.name, len(first))):
        if f.metadata.get("cli_only"):
            continue
        value = flags[f.name]
        if value is None or (value == f.default and f.name not in ALWAYS_SHOWN):
            continue
        parts += [f"--{f.name}", _flag_value(value)]
    return shlex.join(parts)


def _fit_group_size(flags: dict[str, Any], from_yaml: dict[str, Any], assumptions: list[str]) -> None:
    """A small batch gets a GRPO group size that divides it (GRPO needs batch × accumulation % group == 0)."""
    merged = {**from_yaml, **flags}
    if "num_generations" in merged or "batch_size" not in flags:
        return
    try:
        total = int(merged["batch_size"]) * int(merged.get("gradient_accumulation_steps") or 1)
    except (TypeError, ValueError):
        return  # resolve_config reports the bad value
    default = GRPOOptions.num_generations
    if total % default:
        group = next((g for g in range(default, 1, -1) if total % g == 0), default)
        flags["num_generations"] = group
        assumptions.append(f"batch {total} per step: --num_generations {group} (a GRPO group must divide it)")


def _llm_flags(
    request: str, parsed: dict[str, Any], base_url: str, model: str | None
) -> tuple[dict[str, Any], list[str]]:
    """The model's flags (untrusted: ``services/nl/llm.py`` drops what it may not set) plus the paths the request
    itself names where the answer has none; the assumptions say what was filled and what was dropped."""
    from ark_trainer.services.nl.llm import ask_llm, path_fields

    answer, dropped = ask_llm(base_url, model, request)
    assumptions = [f"filled by {model} at {base_url}: {', '.join(answer) or 'nothing'}"]
    assumptions += [f"dropped from {model}'s answer: {d}" for d in dropped]
    flags = dict(answer)
    for role in path_fields() - set(flags):  # the rule parser read these from the request's own words
        if role in parsed:
            flags[role] = parsed[role]
    return flags, assumptions


WRITTEN_FOLDERS = ("output_dir", "log_dir")  # the folders a run writes into


def outside_working_folder(path: str, flag: str = "--output_dir") -> list[str]:
    """A refusal for a system or home folder; a note for a folder outside the working folder."""
    from ark_trainer.core.folders import system_problem

    problem = system_problem(path, flag)
    if problem:
        raise UserError(f"request: {problem}")
    where, here = Path(path).expanduser().resolve(), Path.cwd().resolve()
    if where == here or here in where.parents:
        return []
    return [f"{flag} {path} is outside the working folder {here}: the run writes to {where}"]


def _run_reward(flags: dict[str, Any]):
    """The composite reward this run would use, or None while the data file is not readable."""
    data = flags.get("data_path")
    if not data or not Path(str(data)).is_file():
        return None
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward

    rows = load_jsonl(str(data), "--data_path")
    # weights={}: the spec's own weights; the request's objectives are mapped onto these names.
    # run_code=False: a plan names the graders; user code (python graders, module:function) runs only at
    # `run`, after the printed plan was confirmed
    return build_reward(flags, rows, "cpu", weights={}, guarded=False, run_code=False)


def plan_request(
    request: str,
    overrides: dict[str, Any] | None = None,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
) -> RequestPlan:
    """Read ``request`` and return a validated plan.

    A model or data the request does not give is taken from the agent it names (``services/nl/agent.py``), or
    marked missing with the flag or phrase that supplies it: the plan is still whole (``plan`` shows it;
    ``run`` refuses it). Bad values raise UserError.
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    from_yaml = load_yaml_config(config_class(), overrides["config"]) if overrides.get("config") else {}
    parsed = parse_request(request)
    reward = _run_reward({**from_yaml, **parsed.flags, **overrides})
    if reward is not None and parsed.objectives:  # map objectives onto the rewards this data really gets
        parsed = parse_request(request, reward.names)
    flags = dict(parsed.flags)
    assumptions, ignored, source = list(parsed.assumptions), list(parsed.ignored), "rules"
    if llm_base_url:
        flags, assumptions = _llm_flags(request, parsed.flags, llm_base_url, llm_model)
        source, ignored = f"llm:{llm_model}", []
    for name, value in overrides.items():
        if name in flags and flags[name] != value:
            assumptions.append(f"--{name} {value} given on the command line replaces {flags[name]!r}")
        flags[name] = value
    missing = [name for name in ("model_path", "data_path") if not (flags.get(name) or from_yaml.get(name))]
    if not (flags.get("output_dir") or from_yaml.get("output_dir")):
        flags["output_dir"] = f"runs/{safe_folder_name(str(flags.get('task_name') or TrainConfig.task_name))}"
        assumptions.append(f"no output folder named: --output_dir {flags['output_dir']}")
    for name in WRITTEN_FOLDERS:  # read from the request (or its model), not given as a flag
        if flags.get(name) and name not in overrides:
            assumptions += outside_working_folder(str(flags[name]), f"--{name}")
    for name, what in DEFAULTS_NOTED.items():
        if name not in flags and name not in from_yaml:
            assumptions.append(f"{what} not given: --{name} {getattr(config_class(), name)} (the default)")
    notes, agent = {name: f"missing; {HINTS[name]}" for name in missing}, None
    if notes and parsed.agent and not llm_base_url:
        from ark_trainer.services.nl.agent import fill_from_agent

        out_dir = str(flags.get("output_dir") or from_yaml.get("output_dir"))
        agent = fill_from_agent(parsed.agent, notes, flags, assumptions, out_dir)
    for name in notes:
        flags[name] = MISSING
    _fit_group_size(flags, from_yaml, assumptions)
    try:
        cfg = resolve_config(config_class(), flags)
    except UserError as exc:
        if not llm_base_url:
            raise
        raise UserError(*(f"--llm-model {llm_model}: answer rejected: {m}" for m in exc.messages)) from None
    reward = _run_reward(cfg.flag_items()) if llm_base_url or reward is None else reward
    reward = None if notes else reward
    if reward is not None:
        from ark_trainer.base.ranges import parse_weights
        from ark_trainer.rewards.builder import reweigh

        reweigh(reward.components, parse_weights(cfg.reward_weights))  # unknown names fail here, not mid-run
    from ark_trainer.stages.plan import spell_out_steps

    cfg = spell_out_steps(cfg)
    return RequestPlan(
        cfg, assumptions, ignored, source, [f"--{n}: {why}" for n, why in notes.items()], agent
    )
