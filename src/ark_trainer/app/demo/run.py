"""``ark-trainer demo``: the whole pipeline on the embedded default, offline, on CPU.

``--task qc`` (the default) writes a synthetic customer-service QC data set (``OUT/data/train.jsonl``,
``OUT/data/eval.jsonl``), copies the tiny base model shipped with the package into ``OUT/base_model/`` (see
its ARK_DEMO_MODEL.md; another ``--seed``, ``--n_train`` or ``--lang`` makes one on the spot), then runs
RFT+GRPO with evaluation and report into ``OUT`` using the settings in ``presets/demo.yaml``.

``--base_model PATH`` runs the same data, graders, evaluation and report on a real model instead of the
toy (a Hugging Face folder, or what ``--model_path`` accepts: a ``.gguf`` file, ``ollama:NAME``), with the
settings of ``presets/demo_real.yaml`` (tuned for SmolLM2-135M-Instruct on 2 CPU cores) and, for what that
file leaves unset, the defaults chosen from the model (``core/auto_defaults.py``: completion length from the
answers' token lengths, LoRA only where full fine-tuning does not fit). The held-out set is
``REAL_N_EVAL`` dialogues and the training set ``REAL_N_TRAIN`` unless ``--n_eval``/``--n_train`` say
otherwise (more rows than the toy's 800: RFT trains on the rows whose candidate answer is right, about 30%).

``--lang en`` writes the QC data in English (``app/demo/data_en.py``) instead of Chinese (the default), for a
small English model such as SmolLM2 (``--base_model``); the toy model is then made from the English data,
with room for the English answers' longer completions (``TOY_EN_COMPLETION_LENGTH``).

``--task agent`` does the same for tool-using episodes: customer-service tasks (``app/demo/agent_data.py``) on a
synthetic order backend (``app/demo/agent_env.py``), a tiny base model that knows the tool-call format but chooses
tools poorly (``app/demo/agent_model.py``), then ``train --env ark_trainer.app.demo.agent_env:make_env`` with the
settings in ``presets/demo_agent.yaml``. ``--task agent --base_model PATH`` runs them on a real model instead
(``app/demo/agent_real.py``: its chat template, candidate episodes for RFT, ``presets/demo_agent_real.yaml``).
"""

from __future__ import annotations

import logging
from fractions import Fraction
from importlib import resources
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.stages.plan import share_of

log = logging.getLogger("ark_trainer")
REAL_N_EVAL = 100  # held-out dialogues of the demo on a real model (each costs a greedy answer per model)
REAL_N_TRAIN = 4000  # training dialogues: ~32% of them carry a candidate that is right (~1,300 RFT targets)
# The toy's completion budget on English data: its answers run up to 45 of its tokens (Chinese: 27; the
# preset's 40 is tuned for those).
TOY_EN_COMPLETION_LENGTH = 48


def demo_config_path(real: bool = False) -> Path:
    name = "demo_real.yaml" if real else "demo.yaml"
    return Path(str(resources.files("ark_trainer") / "presets" / name))


def preset_rft_share(preset: Path) -> Fraction:
    """RFT's share of the steps in a demo preset (its ``rft_steps / max_train_steps``): ``demo
    --max_train_steps N`` keeps it, so a shorter or longer demo is the same run scaled."""
    from ark_trainer.base.yamlsafe import read_yaml_file

    data = read_yaml_file(preset)
    return Fraction(int(data["rft_steps"]), int(data["max_train_steps"]))


def _check_base_model(spec: str) -> None:
    """``--base_model``: a folder or file that exists, or ``ollama:NAME`` (``train`` checks the rest)."""
    if not spec.startswith("ollama:") and not Path(spec).exists():
        raise UserError(
            f"--base_model: {spec!r} does not exist; give a Hugging Face model folder, a .gguf file or "
            "ollama:NAME"
        )


def shipped_base_model() -> Path | None:
    """The toy base model shipped with the package (``demo/base_model/``): what ``python -m
    ark_trainer.app.demo.model`` makes for the default demo (Chinese data, seed 0, 800 training dialogues), made
    once and kept, because its 200 warm-up steps follow another path on each CPU's float kernels (an AVX2
    machine made a base model with 4.6% compliance, an AVX-512 one 86%) and take 7 minutes on an AVX2 CPU.
    None where the package lacks it (a source tree without the files)."""
    folder = Path(str(resources.files("ark_trainer") / "app" / "demo" / "base_model"))
    return folder if (folder / "config.json").is_file() else None


def made(build):
    """``build`` saying first that it makes the base model on the spot (it takes minutes on a slow CPU)."""

    def announced(base: Path, *args, **kwargs):
        log.info("demo base model: making it in %s (a tokenizer, then the 'demo warm-up' steps)", base)
        return build(base, *args, **kwargs)

    return announced


def copy_base_model(shipped: Path, target: Path) -> Path:
    """The shipped toy base model copied into ``OUT/base_model`` (the run's own copy, as a built one is)."""
    import shutil

    log.info(
        "demo base model: the one shipped in %s (rebuild it with python -m ark_trainer.app.demo.model)",
        shipped,
    )
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(shipped, target)
    return target


MAX_DEMO_ROWS = 100_000  # dialogues generated in memory before training starts


def _check_demo_args(out: Path, overwrite: bool, seed: int = 0, **sizes: int | None) -> None:
    from ark_trainer.base.ranges import COUNT, Range, range_problems
    from ark_trainer.core.config import RANGES
    from ark_trainer.core.folders import check_folder

    rows = Range(1, MAX_DEMO_ROWS)
    bounds = {"n_train": rows, "n_eval": rows, "max_train_steps": COUNT, "seed": RANGES["seed"]}
    for name, value in {**sizes, "seed": seed}.items():  # checked first: nothing is written before
        if value is not None and value < 1 and name != "seed":
            raise UserError(f"--{name}: must be ≥ 1, got {value}")
        if problems := range_problems({name: value}, {name: bounds[name]}):
            raise UserError(*problems)
    check_folder(out, "--output_dir")  # new, empty or a run of ours: never a folder of other files
    if RunFolder(out).config_path.exists() and not overwrite:
        raise UserError(
            f"--output_dir: {out} already holds a run; pick a new folder or pass --overwrite_output_dir True"
        )


def _demo_inputs(
    out: Path, write_data, build_model, *, seed: int, overwrite: bool, sizes: dict, build: bool = True
) -> tuple:
    """What both demos do before training: logging, their data written to ``OUT/data``, and their base model
    built in ``OUT/base_model`` (kept when already there, unless ``overwrite``); returns (train, eval, base)."""
    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.core.folders import claim_folder
    from ark_trainer.core.runtime.monitor import setup_logging

    claim_folder(out)  # the data and base model written next are a run's: train continues in this folder
    setup_logging(out / "logs")
    train_path, eval_path = write_data(
        out / "data", seed=seed, **{k: v for k, v in sizes.items() if v is not None}
    )
    log.info("demo data: %s, %s", train_path, eval_path)
    base = out / "base_model"
    if build and (not (base / "config.json").is_file() or overwrite):
        build_model(base, read_jsonl(train_path), eval_path)
    return train_path, eval_path, base


def run_demo(
    out: Path,
    *,
    seed: int = 0,
    n_train: int | None = None,
    n_eval: int | None = None,
    max_train_steps: int | None = None,
    overwrite: bool = False,
    base_model: str | None = None,
    lang: str = "zh",
) -> Path:
    """The QC demo: on the toy model it builds, or on ``base_model`` (a real model: its own preset); its
    data in ``lang`` (``zh``, the default, or ``en``)."""
    from ark_trainer.app.demo.data import phrasebook, write_demo_data
    from ark_trainer.app.demo.model import build_base_model
    from ark_trainer.core.config import resolve_config
    from ark_trainer.services.train import run_train
    from ark_trainer.stages.registry import config_class

    _check_demo_args(out, overwrite, seed, n_train=n_train, n_eval=n_eval, max_train_steps=max_train_steps)
    phrasebook(lang)  # an unknown language fails here, before anything is written
    real = base_model is not None
    if base_model is not None:
        _check_base_model(base_model)
        n_eval = REAL_N_EVAL if n_eval is None else n_eval
        n_train = REAL_N_TRAIN if n_train is None else n_train
    shipped = shipped_base_model() if (lang, seed, n_train) == ("zh", 0, None) else None
    train_path, eval_path, base = _demo_inputs(
        out,
        lambda data_dir, **sizes: write_demo_data(data_dir, lang=lang, **sizes),
        lambda base, train, _eval_path: (
            copy_base_model(shipped, base) if shipped else made(build_base_model)(base, train, seed=seed)
        ),
        seed=seed,
        overwrite=overwrite,
        sizes={"n_train": n_train, "n_eval": n_eval},
        build=not real,
    )
    flags = {
        "config": str(demo_config_path(real)),
        "model_path": base_model if base_model is not None else str(base),
        "data_path": str(train_path),
        "eval_dataset": str(eval_path),
        "output_dir": str(out),
        "seed": seed,
        "overwrite_output_dir": overwrite,
    }
    if lang == "en" and not real:
        flags["max_completion_length"] = TOY_EN_COMPLETION_LENGTH
    if max_train_steps is not None:
        share = preset_rft_share(demo_config_path(real))
        flags.update(max_train_steps=max_train_steps, rft_steps=share_of(max_train_steps, share))
    return run_train(resolve_config(config_class(), flags))


AGENT_ENV = "ark_trainer.app.demo.agent_env:make_env"
AGENT_MAX_TURNS = 4


def agent_mcp_env() -> dict:
    """``env:`` of the agent demo over MCP: its backend as a stdio MCP server (``app/demo/agent_mcp_server.py``)."""
    import sys

    import ark_trainer

    package_root = str(Path(ark_trainer.__file__).resolve().parent.parent)  # the server imports this copy
    command = {"command": sys.executable, "args": ["-m", "ark_trainer.app.demo.agent_mcp_server"]}
    return {"mcp_servers": {"shop": {**command, "env": {"PYTHONPATH": package_root}}}}


def agent_config_path() -> Path:
    return Path(str(resources.files("ark_trainer") / "presets" / "demo_agent.yaml"))


def agent_train_flags(
    out: Path,
    base: Path | str,
    train_path: Path,
    eval_path: Path,
    seed: int,
    overwrite: bool,
    tools: str = "python",
    config: Path | None = None,
) -> dict:
    """The ``train`` flags of the agent demo: its preset, its environment, its data and base model."""
    return {
        "config": str(config or agent_config_path()),
        "env": agent_mcp_env() if tools == "mcp" else AGENT_ENV,
        "max_turns": AGENT_MAX_TURNS,
        "model_path": str(base),
        "data_path": str(train_path),
        "eval_dataset": str(eval_path),
        "output_dir": str(out),
        "seed": seed,
        "overwrite_output_dir": overwrite,
    }


def train_agent(flags: dict) -> Path:
    """Run ``train`` over episodes of the agent demo's environment (the one place the agent demo trains)."""
    from ark_trainer.core.config import resolve_config
    from ark_trainer.services.train import run_train
    from ark_trainer.stages.registry import config_class

    return run_train(resolve_config(config_class(), flags))


def run_agent_demo(
    out: Path,
    *,
    seed: int = 0,
    n_train: int | None = None,
    n_eval: int | None = None,
    max_train_steps: int | None = None,
    overwrite: bool = False,
    model_kwargs: dict | None = None,
    tools: str = "python",
    base_model: str | None = None,
) -> Path:
    """Tasks, base model, then RFT+GRPO over episodes of the demo's environment (``tools``: python or mcp).

    With ``base_model`` (a real model: ``app/demo/agent_real.py``) no toy is built: the training tasks carry
    candidate episodes, the model gets a template that renders tool calls if its own does not, and the
    settings are ``presets/demo_agent_real.yaml``'s."""
    from ark_trainer.app.demo import agent_real
    from ark_trainer.app.demo.agent_data import write_agent_data
    from ark_trainer.app.demo.agent_model import build_agent_model
    from ark_trainer.base.fileio import read_jsonl

    _check_demo_args(out, overwrite, seed, n_train=n_train, n_eval=n_eval, max_train_steps=max_train_steps)
    real = base_model is not None
    if base_model is not None:
        _check_base_model(base_model)
        n_train = agent_real.REAL_N_TRAIN if n_train is None else n_train
        n_eval = agent_real.REAL_N_EVAL if n_eval is None else n_eval
    candidates = agent_real.REAL_CANDIDATES if real else 0
    train_path, eval_path, base = _demo_inputs(
        out,
        lambda data_dir, **sizes: write_agent_data(data_dir, n_candidates=candidates, **sizes),
        lambda base, train, eval_path: made(build_agent_model)(
            base, train, seed=seed, held_out=read_jsonl(eval_path), **(model_kwargs or {})
        ),
        seed=seed,
        overwrite=overwrite,
        sizes={"n_train": n_train, "n_eval": n_eval},
        build=not real,
    )
    model: Path | str = base if base_model is None else agent_real.prepare_model(base_model, out)
    config = agent_real.config_path() if real else None
    flags = agent_train_flags(out, model, train_path, eval_path, seed, overwrite, tools, config)
    if max_train_steps is not None:
        share = preset_rft_share(config or agent_config_path())
        flags.update(max_train_steps=max_train_steps, rft_steps=share_of(max_train_steps, share))
    return train_agent(flags)
