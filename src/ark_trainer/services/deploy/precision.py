"""The precision a model is served in: the one its evaluation computed in.

``train`` evaluates each model in its run's precision (``Runtime.dtype``: bf16 where ``--mixed_precision
auto`` picks bf16 autocast on a CPU that computes bf16 natively, fp16 or bf16 under autocast on a GPU) and
records that dtype in the model folder (:data:`PRECISION_FILE`, ``ark_precision.json``), as it records the
prompt shape (:mod:`ark_trainer.services.deploy.policy`). The model server loads the model in the recorded dtype, so
the answers served are the answers evaluated: a model evaluated in bf16 but served from its fp32 weights
answered 4 of 5 held-out prompts differently. A folder with no record (a base model deployed directly) is
served in its weights' own dtype, as ``transformers serve`` does by default.
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.base.fileio import read_json, write_json

PRECISION_FILE = "ark_precision.json"
DTYPES = ("float32", "bfloat16", "float16")
AUTO = "auto"  # the recorded dtype, else the weights' own


def dtype_name(dtype: object) -> str:
    """``torch.bfloat16`` → ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def dtype_of_precision(precision: object) -> str | None:
    """The dtype a run evaluated in, from its precision's name (``plan.json``: ``fp32``, ``bf16 autocast,
    fp32 weights``, ``bf16 weights``, ``fp16 autocast, fp32 weights``): evaluation loads the weights in the
    autocast dtype. None for a name it does not know."""
    text = str(precision or "")
    if text.startswith("fp16"):
        return "float16"
    if text.startswith("bf16"):
        return "bfloat16"
    return "float32" if text == "fp32" else None


def write_precision(model_dir: str | Path, dtype: object, precision: str) -> None:
    """Record the dtype the model was evaluated in (``precision``: the run's, e.g. ``bf16 autocast, fp32
    weights``, for people)."""
    write_json(
        Path(model_dir) / PRECISION_FILE,
        {"dtype": dtype_name(dtype), "precision": precision, "source": "train's evaluation of this model"},
    )


def recorded_dtype(model_dir: str | Path) -> str | None:
    path = Path(model_dir) / PRECISION_FILE
    if not path.is_file():
        return None
    try:
        dtype = read_json(path).get("dtype")
    except (OSError, ValueError, AttributeError):
        return None
    return dtype if dtype in DTYPES else None


def serving_dtype(model_dir: str | Path, override: str = AUTO) -> tuple[str, str]:
    """(the dtype to load ``model_dir`` in, why): ``override`` unless ``auto``, else the recorded one, else
    ``auto`` (the weights' own)."""
    if override != AUTO:
        return override, "--dtype"
    recorded = recorded_dtype(model_dir)
    if recorded is not None:
        return recorded, f"the precision its evaluation used ({PRECISION_FILE})"
    return AUTO, f"no {PRECISION_FILE}: the weights' own dtype"
