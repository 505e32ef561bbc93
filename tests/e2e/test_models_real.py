"""The real model end to end (slow tier): SmolLM2-135M-Instruct's Q4_1 GGUF in → a few training steps → eval
→ ``ark-trainer export`` → the GGUF loaded back gives the trained model's greedy answers.

The file comes from ``scripts/setup_models.sh`` (``scripts/test.sh`` runs it and sets ARK_REQUIRE_MODELS=1);
nothing is downloaded here. LoRA keeps the steps short on CPU and puts the merge on the export path.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.model_files import smollm2_gguf

pytestmark = pytest.mark.slow

QUESTIONS = [
    ("客服：您好。顾客：我的订单还没到。客服：关我什么事。", "辱骂"),
    ("客服：您好，请问有什么可以帮您？顾客：退款到账了吗？客服：抱歉，已经为您加急处理。", "无"),
    ("客服：你的手机号是13800001234吧。顾客：是的。", "泄露隐私"),
    ("客服：保证明天一定送到，不到全额赔偿。顾客：好的。", "越权承诺"),
]


def test_gguf_in_train_eval_export_and_reload(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    rows = [
        {"question": q, "label": label, "candidates": [f"结论：违规 类型：{label}"]} for q, label in QUESTIONS
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:2]))
    out = tmp_path / "OUT"
    train = run_cli(
        "train", "--strategy", "RFT+GRPO", "--model_path", str(gguf), "--data_path", "train.jsonl",
        "--eval_dataset", "eval.jsonl", "--output_dir", str(out), "--max_train_steps", "2", "--rft_steps", "1",
        "--batch_size", "2", "--num_generations", "2", "--max_completion_length", "12", "--rft_num_samples", "1",
        "--lora_r", "8", "--logging_steps", "1", "--save_steps", "100",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-3000:]
    plan = json.loads((out / "plan.json").read_text())
    base = plan["base_model"]
    assert base["kind"] == "gguf" and base["architecture"] == "llama" and base["quantization"] == "Q4_1"
    assert len(base["sha256"]) == 64 and base["path"] == str(out / "base_model")
    assert (out / "base_model" / "model.safetensors").is_file() and (out / "eval" / "grpo.json").is_file()
    report = (out / "report.md").read_text()
    assert "Base model: " in report and "GGUF file, llama, Q4_1" in report
    assert f"ark-trainer export {out} --format gguf" in report  # how to write the GGUF, until it is written
    export = run_cli("export", str(out), "--format", "gguf", "--quant", "f16", cwd=tmp_path, timeout=300)
    assert export.returncode == 0, export.stderr[-3000:]
    file = out / "export" / "model-f16.gguf"
    modelfile = (out / "export" / "Modelfile").read_text()
    assert "FROM ./model-f16.gguf" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
    tok = AutoTokenizer.from_pretrained(out / "model")
    trained = AutoModelForCausalLM.from_pretrained(out / "model", dtype=torch.float32).eval()
    back = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, dtype=torch.float32).eval()
    back_tok = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
    for question, _ in QUESTIONS[:2]:  # the held-out prompts: the same greedy answer from both files
        ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]  # fmt: skip
        assert back_tok(question).input_ids == tok(question).input_ids
        want = trained.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
        got = back.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
        assert got.tolist() == want.tolist()
    rebuilt = run_cli("report", str(out), cwd=tmp_path)  # the report now names the file and how to serve it
    report = (out / "report.md").read_text()
    assert (
        rebuilt.returncode == 0 and "model-f16.gguf" in report and "ollama create NAME -f Modelfile" in report
    )
