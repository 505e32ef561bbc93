"""The report's model parts: where the base model came from (``plan.json``'s ``base_model``), and how to
serve the trained one with Ollama or llama.cpp (``OUT/export/export.json`` once ``ark-trainer export`` ran)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.render import Block, Bullets, Code, Heading, Para
from ark_trainer.runfolder import RunFolder

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
