"""Which folders a command may write into: a new one, an empty one, or one of ours; never a user's files.

Every command that writes a folder (``train``/``run``/``demo --output_dir``, ``rm train --output_dir``,
``loop --output_dir``) asks :func:`check_folder` before it writes anything, and :func:`claim_folder` when it
creates the folder. A folder is *ours* when it holds the marker ``.ark-trainer.json`` (written at creation,
naming the kind of folder) or, for folders made by earlier versions, the files that kind always has (a run:
``run.yaml`` holding train flags, with ``plan.json`` or ``events.jsonl``; another tool's ``run.yaml`` does not
count). Anything else that is not empty is refused in one line naming what is there:
``--overwrite_output_dir`` replaces a run of ours, never a folder of other files. A ``.lock`` or a marker
file counts as ours only when it reads as ours (a user's own ``.lock`` makes a folder used, not empty).

``/``, the home folder and system folders (``/etc``, ``/usr``, ``/bin``, ``/var``, …) are refused outright,
and so are the shared temporary folders themselves (``/tmp``, ``/var/tmp``; a folder of its own under them is
fine).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import file_kind, read_json, read_text_bounded
from ark_trainer.core.runfolder import EVENTS, PLAN, RUN_CONFIG

MARKER = ".ark-trainer.json"
OWN_FILES = (MARKER, ".lock")  # the marker and the run lock (runtime/runlock.py) do not make a folder "used"
# system trees: refused with everything under them (the temporary folders under /var excepted)
SYSTEM_TREES: tuple[str, ...] = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_TREES += ("/proc", "/sbin", "/sys", "/usr", "/var", "/run", "/snap")
SYSTEM_ALLOWED = ("/var/tmp", "/var/folders", "/private/var/folders")  # macOS keeps temp folders there
# top-level and shared folders: refused themselves (a folder of its own under them is fine)
TOP_FOLDERS: tuple[str, ...] = ("/", "/home", "/root", "/opt", "/srv", "/mnt", "/media", "/tmp", "/Users")
TOP_FOLDERS += ("/Volumes", "/var/tmp", "/private", "/private/tmp", "/private/var/tmp")
# keys every run.yaml of ours has had: another tool's run.yaml (a Kubernetes pod, a CI job) has none of them
RUN_YAML_KEYS = ("model_path", "data_path", "output_dir", "task_name", "strategy", "max_train_steps")
SHOWN = 5  # entries named in a refusal


def _legacy_run(folder: Path) -> bool:
    if (folder / "base_model" / "ARK_DEMO_MODEL.md").is_file():  # an earlier demo stopped before its train
        return True
    if (
        folder / "data" / "openclaw_conversations.jsonl"
    ).is_file():  # an earlier `run` collected, then stopped
        return True
    return _our_run_yaml(folder / RUN_CONFIG) and any((folder / n).is_file() for n in (PLAN, EVENTS))


def _our_run_yaml(path: Path, flags: Collection[str] = ()) -> bool:
    """``run.yaml`` as a run of ours writes it: a mapping of train flags (a few kB): the run's core keys, or
    only flags (``flags``: every ``train`` flag, the stages' too; the shared ones where not given)."""
    from ark_trainer.base.errors import UserError
    from ark_trainer.base.fileio import read_text_bounded
    from ark_trainer.base.yamlsafe import MAX_BYTES, safe_load

    try:
        if not path.is_file():
            return False
        data = safe_load(read_text_bounded(path, MAX_BYTES), str(path))
    except (OSError, UnicodeDecodeError, UserError):
        return False
    if not isinstance(data, dict) or not data:
        return False
    from ark_trainer.core.config import TrainConfig

    known = set(flags) or set(TrainConfig.__dataclass_fields__)
    return any(key in data for key in RUN_YAML_KEYS) or all(key in known for key in data)


def holds_our_run_config(folder: Path, flags: Collection[str] = ()) -> bool:
    """Whether ``folder`` is marked a run of ours or its ``run.yaml`` is one of ours (``report`` rewrites
    report.md only there); ``flags``: every ``train`` flag (``stages/registry.config_class``)."""
    return marker_kind(folder) == "run" or _our_run_yaml(folder / RUN_CONFIG, flags)


def _legacy_reward_model(folder: Path) -> bool:
    return (folder / "rm_metrics.json").is_file() and (folder / "config.json").is_file()


def _legacy_loop(folder: Path) -> bool:
    return (folder / "state.json").is_file() and (folder / "rounds").is_dir()


KINDS: dict[str, tuple[str, Callable[[Path], bool]]] = {  # kind → (what it looks like, older folders of it)
    "run": ("run.yaml with plan.json or events.jsonl", _legacy_run),
    "reward model": ("rm_metrics.json with config.json", _legacy_reward_model),
    "loop": ("state.json with rounds/", _legacy_loop),
}


def _resolved(path: str | Path) -> Path:
    return Path(os.path.abspath(Path(path).expanduser().resolve()))


def _inside(path: Path, tree: str) -> bool:
    return path == Path(tree) or Path(tree) in path.parents


def system_problem(path: str | Path, flag: str) -> str | None:
    """Why ``path`` may never hold a run (``/``, the home folder, a system folder), or None."""
    where = _resolved(path)
    shown = repr(str(path)) if str(where) == str(path) else f"{str(path)!r} ({where})"
    system = f"{flag}: {shown} is a system folder; give a folder of its own, e.g. ./runs/NAME"
    if str(where) in TOP_FOLDERS:
        return system
    if any(_inside(where, t) for t in SYSTEM_ALLOWED):
        return None
    if any(_inside(where, t) for t in SYSTEM_TREES):
        return system
    if where == _resolved(Path.home()):
        return f"{flag}: {shown} is your home folder; give a folder of its own, e.g. ~/runs/NAME"
    return None


def system_file_problem(path: str | Path, flag: str) -> str | None:
    """Why the file ``path`` may not be written (it resolves into a system tree such as ``/etc``), or None.

    Unlike a run folder, a file may sit directly in a shared or top folder (``/tmp/x.jsonl``, ``~/x.jsonl``):
    it holds nothing else of the user's, and :func:`check_output_file` never replaces another kind of file.
    """
    where = _resolved(path)  # the file itself resolved: a symlink into /etc counts as /etc
    if any(_inside(where, t) for t in SYSTEM_ALLOWED):
        return None
    tree = next((t for t in SYSTEM_TREES if _inside(where, t)), None)
    if tree is None:
        return None
    shown = repr(str(path)) if str(where) == str(path) else f"{str(path)!r} ({where})"
    return f"{flag}: {shown} is in {tree}, a system folder; give a file path of your own, e.g. ./{where.name}"


def marker_kind(folder: Path) -> str | None:
    """The kind the folder's marker names, or None without a readable marker."""
    try:
        data = read_json(folder / MARKER, 4096)
    except (OSError, ValueError, RecursionError):
        return None
    return data.get("kind") if isinstance(data, dict) and data.get("by") == "ark-trainer" else None


def _own_file(path: Path) -> bool:
    """The marker or the run lock as we write them (a user's own ``.lock`` or ``.ark-trainer.json`` is not)."""
    if path.name == MARKER:
        return marker_kind(path.parent) is not None
    try:
        text = read_text_bounded(path, 4096)
        data = json.loads(text) if text.strip() else {"pid": None}  # empty: a lock taken, not yet written
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(data, dict) and "pid" in data


def owned(folder: Path, kind: str) -> bool:
    """Whether ``folder`` is an ark-trainer folder of ``kind`` (its marker, or an older one's files)."""
    return marker_kind(folder) == kind or KINDS[kind][1](folder)


def _listing(entries: list[Path]) -> str:
    names = sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def check_folder(path: str | Path, flag: str, kind: str = "run") -> None:
    """Refuse, in one line, a folder this command must not write into; writes nothing.

    Fine: a path that does not exist yet (under a writable folder), an empty folder, a folder of ours of
    ``kind``. Refused: a file, a system or home folder, a folder of other files, one of ours of another kind.
    """
    problem = system_problem(path, flag)
    if problem:
        raise UserError(problem)
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UserError(f"{flag}: {str(path)!r} is a file, not a folder; give a folder path")
    if out.is_dir():
        _check_contents(out, flag, kind)
    _check_writable(out, path, flag)


def _check_contents(out: Path, flag: str, kind: str) -> None:
    try:
        entries = [e for e in out.iterdir() if not (e.name in OWN_FILES and e.is_file() and _own_file(e))]
    except OSError as exc:
        raise UserError(
            f"{flag}: cannot read {str(out)!r} ({exc.strerror or exc}); pick another folder"
        ) from None
    if not entries or owned(out, kind):
        return
    other = marker_kind(out) or next((k for k, (_, old) in KINDS.items() if k != kind and old(out)), None)
    if other:
        raise UserError(
            f"{flag}: {str(out)!r} holds an ark-trainer {other}, not a {kind}; give an empty or new folder"
        )
    raise UserError(
        f"{flag}: {str(out)!r} holds {_listing(entries)} and no ark-trainer {kind} (no {MARKER} or "
        f"{KINDS[kind][0]}); give an empty or new folder (--overwrite_output_dir replaces only a {kind} of ours)"
    )


def _check_writable(out: Path, path: str | Path, flag: str) -> None:
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(
            f"{flag}: {str(parent)!r} is a file, so {str(path)!r} cannot be created; pick another path"
        )
    try:
        with tempfile.TemporaryFile(dir=parent, prefix=".ark-write-test"):
            pass
    except OSError as exc:
        raise UserError(
            f"{flag}: cannot write in {str(parent)!r} ({exc.strerror or exc}); pick a writable folder"
        ) from None


def claim_folder(path: str | Path, kind: str = "run") -> Path:
    """Create ``path`` (and its parents) if needed and mark it ours; call after :func:`check_folder`."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    if marker_kind(out) != kind:
        from ark_trainer.base.fileio import write_json

        write_json(
            out / MARKER, {"by": "ark-trainer", "kind": kind, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        )
    return out


def check_output_file(path: str | Path, flag: str) -> None:
    """A JSONL file a command may (over)write: not a folder, not in a system tree, not another kind of file.

    An existing file is replaced only when it reads as JSONL (its first line a JSON object), so ``-o
    notes.md`` or ``-o ~/.bashrc`` is refused rather than overwritten.
    """
    out = Path(path)
    problem = system_file_problem(out, flag)
    if problem:
        raise UserError(problem)
    if out.is_dir():
        raise UserError(
            f"{flag}: {str(path)!r} is a folder; give a file path, e.g. {str(out / 'data.jsonl')!r}"
        )
    if out.exists() and not out.is_file():
        raise UserError(
            f"{flag}: {str(path)!r} is {file_kind(out.stat().st_mode)}, not a file; give a new file name"
        )
    if out.is_file() and out.stat().st_size:
        try:
            with out.open(encoding="utf-8") as fh:  # a regular file: opening it does not block
                first = fh.readline(1_000_000)
            ok = isinstance(json.loads(first), dict)
        except (OSError, ValueError, RecursionError):
            ok = False
        if not ok:
            raise UserError(
                f"{flag}: {str(path)!r} exists and is not a JSONL file; it is not overwritten: give a new file name"
            )
    _check_writable(out.parent if str(out.parent) else Path("."), out.parent, flag)
