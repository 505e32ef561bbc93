"""``ark-trainer skill install [--workspace DIR] [--force]``: put the OpenClaw skill where OpenClaw looks.

The skill (``ark_trainer/openclaw/skill/SKILL.md``, AgentSkills format) goes to
``$OPENCLAW_STATE_DIR/skills/ark-trainer/`` (``~/.openclaw/skills`` by default: every agent sees it), or
to ``DIR/skills/ark-trainer/`` with ``--workspace`` (one agent's workspace). ``openclaw skills list``
then shows it ready once ``ark-trainer`` is on PATH (the skill's ``requires.bins``).
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("skill", help="the OpenClaw skill that teaches an agent to drive ark-trainer")
    actions = p.add_subparsers(dest="skill_command", metavar="ACTION")
    install = actions.add_parser("install", help="copy SKILL.md where OpenClaw looks for skills")
    install.add_argument(
        "--workspace", default=None, help="an agent workspace (default: the shared skills folder)"
    )
    install.add_argument("--force", action="store_true", help="replace a SKILL.md that differs")
    install.set_defaults(func=_cmd_install)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def skill_source() -> Path:
    return Path(__file__).resolve().parents[1] / "openclaw" / "skill" / "SKILL.md"


def install_skill(workspace: str | None = None, force: bool = False) -> Path:
    from ark_trainer.fileio import atomic_write_bytes
    from ark_trainer.openclaw.cli import state_dir

    root = Path(workspace) / "skills" if workspace else state_dir() / "skills"
    target = root / "ark-trainer" / "SKILL.md"
    data = skill_source().read_bytes()
    if target.is_file() and target.read_bytes() != data and not force:
        raise UserError(f"skill install: {target} exists and differs (edited?); pass --force to replace it")
    atomic_write_bytes(target, data)
    return target


def _cmd_install(args) -> int:
    target = install_skill(args.workspace, args.force)
    print(f"installed the ark-trainer skill: {target}")
    print("check it with: openclaw skills list   (needs ark-trainer on PATH to show as ready)")
    return 0
