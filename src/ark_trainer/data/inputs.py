"""Every input of a ``train`` run checked in one pass: output folder, model (folder, GGUF, Ollama), data files.

The docs promise every problem at once: a bad flag must not hide a missing model folder, nor a
missing model folder a broken data file. :func:`gather` runs each check, collects every one-line
problem, and raises them together (exit 2) before anything is written. The data files are read through
the loader's own entry point (``data.loader.load_jsonl``), so its checks are the ones reported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json


def check_output_dir(path: str, flag: str = "--output_dir", kind: str = "run") -> None:
    """A folder we may create and write in: new, empty or a run of ours (``core/folders.py``)."""
    from ark_trainer.core.folders import check_folder

    check_folder(path, flag, kind)


def check_log_dir(path: str | None) -> None:
    """``--log_dir``: the text log and TensorBoard events go there; never a system or home folder."""
    from ark_trainer.core.folders import system_problem

    problem = system_problem(path, "--log_dir") if path else None
    if problem:
        raise UserError(problem)


def remote_code_class(model_dir: Path) -> str | None:
    """What in ``model_dir`` would need the folder's own Python code (``auto_map``), or None."""
    for name in ("config.json", "tokenizer_config.json"):
        path = model_dir / name
        try:
            data = read_json(path) if path.is_file() else {}
        except (OSError, ValueError, RecursionError):
            continue  # the model check reports an unreadable config.json
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        if auto_map:
            first = next(iter(auto_map.values())) if isinstance(auto_map, dict) else auto_map
            return f"{name} auto_map → {first}"
    return None


def check_no_remote_code(path: str, trust_remote_code: bool, flag: str = "--model_path") -> None:
    """Refuse a model that only loads by running its own code, unless ``--trust_remote_code True``."""
    needs = remote_code_class(Path(path))
    if needs and not trust_remote_code:
        raise UserError(
            f"{flag}: {path!r} needs its own Python code to load ({needs}), which is never run by default; "
            "pass --trust_remote_code True if you trust that code, or use a model with a built-in architecture"
        )


def collect(checks: list[Callable[[], Any]]) -> tuple[list[Any], list[str]]:
    """Run every check; (results, every problem's lines). A check that fails gives None as its result."""
    results, problems = [], []
    for check in checks:
        try:
            results.append(check())
        except UserError as exc:
            results.append(None)
            problems += exc.messages
    return results, problems


def model_checks(model_path: str | None, trust_remote_code: bool) -> list[Callable[[], Any]]:
    """The model named by ``--model_path`` (an HF folder, a ``.gguf`` file, ``ollama:NAME``), checked with
    nothing written: the first check returns its :class:`~ark_trainer.core.models.source.ResolvedModel`."""
    from ark_trainer.core.models.source import check_model

    if not model_path:
        return []
    return [
        lambda: check_model(model_path, flag="--model_path", trust_remote_code=trust_remote_code),
        lambda: check_no_remote_code(model_path, trust_remote_code),
    ]


def raw_input_problems(flags: dict[str, Any]) -> list[str]:
    """The folder and file problems of a command line whose flags were refused (so no config exists)."""
    from ark_trainer.core.config import parse_bool
    from ark_trainer.data.loader import load_jsonl, resolve_eval_path

    flags = {**_raw_yaml(flags.get("config")), **flags}  # --config gives the paths a command line leaves out

    def text(name: str) -> str | None:
        value = flags.get(name)
        return None if value is None or str(value).strip().lower() in ("", "none", "null") else str(value)

    try:
        trust = parse_bool(flags.get("trust_remote_code", False), "--trust_remote_code")
    except UserError:
        trust = False
    out, model, data, eval_set = (text(n) for n in ("output_dir", "model_path", "data_path", "eval_dataset"))
    checks: list[Callable[[], Any]] = [lambda: check_output_dir(out)] if out else []
    checks.append(lambda: check_log_dir(text("log_dir")))
    checks += model_checks(model, trust)
    if data:
        checks.append(lambda: load_jsonl(data, "--data_path"))
    if eval_set:
        checks.append(lambda: load_jsonl(resolve_eval_path(eval_set), "--eval_dataset"))
    return collect(checks)[1]


def _raw_yaml(path: Any) -> dict[str, Any]:
    """The keys of a ``--config`` file as written (its own problems are reported by the config loader)."""
    from ark_trainer.base.yamlsafe import read_yaml_file

    try:
        data = read_yaml_file(str(path)) if path else {}
    except UserError:
        return {}
    return data if isinstance(data, dict) else {}
