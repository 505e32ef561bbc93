"""``ark-trainer skill install [--workspace DIR] [--force]``: put the OpenClaw skill where OpenClaw looks.

The skill (``ark_trainer/services/openclaw/skill/SKILL.md``, AgentSkills format) goes to
``$OPENCLAW_STATE_DIR/skills/ark-trainer/`` (``~/.openclaw/skills`` by default: every agent sees it), or
to ``DIR/skills/ark-trainer/`` with ``--workspace`` (one agent's workspace). ``openclaw skills list``
then shows it ready once ``ark-trainer`` is on PATH (the skill's ``requires.bins``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, add_command_group, opt
from ark_trainer.base.errors import UserError


@dataclass
class SkillInstallOptions:
    workspace: str | None = opt(None, "an agent workspace (default: the shared skills folder)")
    force: bool = opt(False, "replace a SKILL.md that differs", switch=True)


def register(sub) -> None:
    actions = add_command_group(
        sub, "skill", help="the OpenClaw skill that teaches an agent to drive ark-trainer"
    )
    add_command(
        actions,
        "install",
        SkillInstallOptions,
        _cmd_install,
        help="copy SKILL.md where OpenClaw looks for skills",
    )


def skill_source() -> Path:
    return Path(__file__).resolve().parents[2] / "services" / "openclaw" / "skill" / "SKILL.md"


def install_skill(workspace: str | None = None, force: bool = False) -> Path:
    from ark_trainer.base.external.openclaw_cli import state_dir
    from ark_trainer.base.fileio import atomic_write_bytes

    root = Path(workspace) / "skills" if workspace else state_dir() / "skills"
    target = root / "ark-trainer" / "SKILL.md"
    data = skill_source().read_bytes()
    if target.is_file() and target.read_bytes() != data and not force:
        raise UserError(f"skill install: {target} exists and differs (edited?); pass --force to replace it")
    atomic_write_bytes(target, data)
    return target


def _cmd_install(args: SkillInstallOptions) -> int:
    target = install_skill(args.workspace, args.force)
    print(f"installed the ark-trainer skill: {target}")
    print("check it with: openclaw skills list   (needs ark-trainer on PATH to show as ready)")
    return 0
