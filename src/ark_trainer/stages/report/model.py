"""The report's model parts: where the base model came from (``plan.json``'s ``base_model``), which stage's
model ``OUT/model`` is and why (``model/ark_final_model.json``, ``core/final_model.py``), and how to serve it with
Ollama or llama.cpp (``OUT/export/export.json`` once ``ark-trainer export`` ran)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.core.metrics import RATES, TASK_SUCCESS, main_metric, shown
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.stats import shipped_line
from ark_trainer.stages.report.render import Block, Bullets, Code, Heading, Para, Table

KIND_NAMES = {"hf": "Hugging Face folder", "gguf": "GGUF file", "ollama": "Ollama model"}


def base_model_line(plan: dict[str, Any]) -> str | None:
    """``Base model: X (GGUF file, llama, Q4_1, sha256 b179c952…; converted into OUT/base_model)``."""
    base = plan.get("base_model")
    if not isinstance(base, dict) or not base.get("source"):
        return None
    kind = str(base.get("kind", "hf"))
    facts = [KIND_NAMES.get(kind, kind)]
    facts += [str(base[k]) for k in ("architecture", "quantization") if base.get(k)]
    if base.get("sha256"):
        facts.append(f"sha256 {str(base['sha256'])[:12]}…")
    text = f"Base model: {base['source']} ({', '.join(facts)})"
    if kind != "hf":
        text += f"; converted into {base.get('path')} (safetensors), trained from there"
        if base.get("file") and kind == "ollama":
            text += f"; file {base['file']}"
    return text


def final_model_blocks(
    run_dir: Path, evals: dict[str, dict[str, Any]], labels: dict[str, str]
) -> list[Block]:
    """ "Final model": which model OUT/model is and why, then the base model and every stage on the main
    metric and the headline rates. ``evals`` in run order (base first), ``labels`` their display names."""
    record = RunFolder(run_dir).final_model()
    final = str(record.get("stage") or "")
    if not final:  # a run still going, stopped before its end, or of an earlier version
        return []
    why = f"OUT/model is {labels.get(final, final)}, {record.get('reason', 'the stage recorded')}."
    blocks: list[Block] = [Heading("Final model"), Para(why)]
    if final not in evals:  # evaluation off: the last stage ships
        return blocks
    metric = main_metric(list(evals.values()))
    wanted = dict.fromkeys(m for m in (metric, *RATES, TASK_SUCCESS) if m)
    columns = [m for m in wanted if any(e.get(m) is not None for e in evals.values())]
    header = ["model", *(f"{m} (main)" if m == metric else m for m in columns), "n", "OUT/model"]
    rows = [
        [
            labels.get(model, model),
            *(shown(m, data.get(m)) for m in columns),
            str(data.get("n", "?")),
            "ships" if model == final else "never ships" if model == "base" else "",
        ]
        for model, data in evals.items()
    ]
    said = shipped_line(evals, final)  # against the stage before it and the base: interval, n, p
    return [
        *blocks,
        Table(header, rows),
        *([Para(f"Paired on the held-out prompts: {said}.")] if said else []),
    ]


def serve_blocks(run_dir: Path) -> list[Block]:
    """ "Serve it with Ollama or llama.cpp": the exported files, or the command that writes them."""
    run = RunFolder(run_dir)
    if not run.model_dir.is_dir():
        return []
    exports = run.exports()
    head = Heading("Serve it with Ollama or llama.cpp")
    if not exports:
        return [
            head,
            Para(
                "OUT/model is a Hugging Face folder. For Ollama or llama.cpp, write it as one GGUF file "
                "(with its tokenizer, chat template and an Ollama Modelfile):"
            ),  # fmt: skip
            Code(
                f"ark-trainer export {run_dir} --format gguf --quant f16   # or --quant q8_0: about half the size"
            ),
        ]
    items = [
        f"{Path(r['file']).name}: {r.get('quant')}, {int(r.get('size_bytes', 0)) / 1e6:.1f} MB"
        for r in exports
    ]
    first = exports[-1]
    folder = Path(first["file"]).parent
    commands = (
        f"cd {folder} && ollama create NAME -f Modelfile && ollama run NAME\n"
        f"llama-server -m {first['file']} --port 8080   # OpenAI-compatible API at http://127.0.0.1:8080/v1"
    )
    return [head, Bullets(items), Code(commands)]
