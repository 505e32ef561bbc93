"""Models in and out: GGUF files and Ollama's store resolved to HF folders; HF folders exported back to GGUF.

Tiny llama and qwen2 models are made here, exported with ``ark-trainer export`` / ``export_gguf`` and read
back by transformers (``gguf_file=``), the loader llama.cpp-made files go through too.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.model_files import copy_truncated, ollama_store, save_tiny, tiny_gguf

PROMPTS = ["结论：违规 类型：辱骂 回复：抱歉", "hello world 你好", "客服：您好。顾客：订单不对。"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gguf")
    made = {arch: tiny_gguf(root, arch) for arch in ("llama", "qwen2")}
    return {"root": root, **made}


def greedy(model, tok, prompts: list[str], new: int = 8) -> tuple[list[list[int]], object]:
    """Greedy continuations (token ids) of each chat-rendered prompt, and the prompts' last-position logits."""
    import torch

    answers, logits = [], []
    for text in prompts:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]  # fmt: skip
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=tok.pad_token_id)
            logits.append(model(out).logits[0])
        answers.append(out[0, ids.shape[1] :].tolist())
    return answers, logits


def load_pair(folder: Path, gguf: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    back = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    return (
        hf,
        back,
        AutoTokenizer.from_pretrained(folder),
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name),
    )


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_f16_export_reloads_with_the_same_greedy_answers_and_tokenizer(files, arch):
    folder, gguf = files[arch]
    hf, back, tok, tok_back = load_pair(folder, gguf)
    assert back.config.model_type == arch and back.config.num_key_value_heads == 2
    for text in PROMPTS:  # the tokenizer came back from tokenizer.ggml.*: same ids, same special tokens
        assert tok_back(text).input_ids == tok(text).input_ids
    assert (tok_back.eos_token, tok_back.pad_token) == (tok.eos_token, tok.pad_token)
    assert tok_back.chat_template == tok.chat_template
    answers, logits = greedy(hf, tok, PROMPTS)
    answers_back, logits_back = greedy(back, tok, PROMPTS)
    assert answers_back == answers  # llama's q/k permutation undone by the loader: the same model
    assert max((a - b).abs().max().item() for a, b in zip(logits, logits_back, strict=True)) < 1e-2


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_q8_0_export_is_within_the_documented_tolerance(files, tmp_path, arch):
    from ark_trainer.core.export.gguf import export_gguf

    folder, f16 = files[arch]
    q8 = export_gguf(folder, tmp_path / "q8.gguf", "q8_0")
    assert q8.size < 0.7 * f16.stat().st_size
    hf, back, tok, _ = load_pair(folder, q8.path)
    answers, logits = greedy(hf, tok, PROMPTS)
    answers_back, logits_back = greedy(back, tok, PROMPTS)
    diff = max(
        (a[: len(b)] - b[: len(a)]).abs().max().item() for a, b in zip(logits, logits_back, strict=True)
    )
    assert diff < 0.05, diff  # docs/models.md: q8_0 tolerance (measured 0.006-0.007 on these models)


def test_a_slow_gguf_step_says_what_it_does_and_a_quick_one_says_nothing(
    files, tmp_path, capsys, monkeypatch
):
    """A real model's metadata took 16 s to read and its conversion minutes, with nothing on the console
    (the run's log is set up later); the steps now say so once they last, and a checked file is read once."""
    import time

    from ark_trainer.core.models import gguf as gguf_module

    with gguf_module.slow_notice("quick"):
        pass
    monkeypatch.setattr(gguf_module, "NOTICE_AFTER_S", 0.01)
    with gguf_module.slow_notice("converting x: reading and dequantizing its weights"):
        time.sleep(0.5)
    assert capsys.readouterr().err.splitlines() == ["converting x: reading and dequantizing its weights"]
    reads = []
    real = gguf_module._inspect
    monkeypatch.setattr(gguf_module, "_inspect", lambda p, flag: reads.append(p) or real(p, flag))
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(files["llama"][1].read_bytes())
    first = gguf_module.inspect_gguf(copy)
    assert gguf_module.inspect_gguf(copy) is first and len(reads) == 1  # train checks, then converts


def test_gguf_resolves_to_a_folder_converted_once(files, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from ark_trainer.core.models.source import check_model, resolve_model

    folder, gguf = files["llama"]
    checked = check_model(str(gguf))
    assert (checked.kind, checked.architecture, checked.quantization) == ("gguf", "llama", "F16")
    assert not (tmp_path / "base").exists() and not checked.path.exists()  # a check writes nothing
    first = resolve_model(str(gguf), convert_dir=tmp_path / "base")
    assert first.converted and first.path == tmp_path / "base" and first.sha256 == checked.sha256
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
        "ark_source.json",
    ):
        assert (first.path / name).is_file(), name
    again = resolve_model(str(gguf), convert_dir=tmp_path / "base")
    assert not again.converted  # its ark_source.json holds the same sha256: reused
    a = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    b = AutoModelForCausalLM.from_pretrained(first.path, dtype=torch.float32).eval()
    ids = torch.tensor([[1, 5, 9, 20, 3]])
    assert (a(ids).logits - b(ids).logits).abs().max().item() < 1e-2
    assert first.to_json()["sha256"] == checked.sha256 and first.to_json()["kind"] == "gguf"


@pytest.mark.parametrize("spec", ["ollama:tiny", "ollama:tiny:latest", "ollama:library/tiny:latest"])
def test_ollama_store_resolves_to_the_model_blob(files, tmp_path, monkeypatch, spec):
    from ark_trainer.core.models.source import check_model

    store = ollama_store(tmp_path / "store", files["qwen2"][1], template="{{ .Prompt }}")
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    model = check_model(spec)
    assert model.kind == "ollama" and model.name == "ollama:tiny:latest" and model.architecture == "qwen2"
    assert model.file is not None and model.file.name == f"sha256-{model.sha256}"
    assert model.template == "{{ .Prompt }}"


def test_ollama_namespaced_tag_and_default_store(files, tmp_path, monkeypatch):
    from ark_trainer.core.models.ollama import list_models, parse_ref
    from ark_trainer.core.models.source import check_model

    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    store = ollama_store(Path(os.environ["HOME"]) / ".ollama" / "models", files["llama"][1], name="me/bot/v1")
    assert check_model("ollama:me/bot:v1").architecture == "llama"
    assert list_models(store) == ["me/bot:v1"]
    ref = parse_ref("ollama:hf.co/user/repo:Q8_0")
    assert (ref.registry, ref.namespace, ref.name, ref.tag) == ("hf.co", "user", "repo", "Q8_0")


def _garbage(tmp: Path, files: dict) -> Path:
    path = tmp / "garbage.gguf"
    path.write_bytes(b"\x00\x01 not a model at all" * 50)
    return path


def _wrong_magic(tmp: Path, files: dict) -> Path:
    path = tmp / "model.gguf"
    path.write_bytes(b"GGML" + files["llama"][1].read_bytes()[4:])
    return path


def _truncated(tmp: Path, files: dict) -> Path:
    return copy_truncated(files["llama"][1], tmp / "cut.gguf", 0.6)


def _header_only(tmp: Path, files: dict) -> Path:
    return copy_truncated(files["llama"][1], tmp / "head.gguf", 0.02)


def _unsupported_arch(tmp: Path, files: dict) -> Path:
    import gguf
    import numpy as np

    path = tmp / "gpt2.gguf"
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b"])
    w.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return path


def _unsupported_quant(tmp: Path, files: dict) -> Path:
    import gguf
    import numpy as np

    path = tmp / "i8.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b"])
    w.add_tensor(
        "token_embd.weight", np.zeros((2, 32), dtype=np.int8), raw_dtype=gguf.GGMLQuantizationType.I8
    )
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return path


def _missing_file(tmp: Path, files: dict) -> Path:
    return tmp / "nowhere.gguf"


def _patched(offset: int, fmt: str, value: int | None = None, name: str = "patched.gguf"):
    """A copy of the tiny llama GGUF with the header field at ``offset`` (``struct`` ``fmt``) set to
    ``value``, or incremented by one when None: a version, a tensor or key/value count that lies."""
    import struct

    def make(tmp: Path, files: dict) -> Path:
        data = bytearray(files["llama"][1].read_bytes())
        (old,) = struct.unpack_from(fmt, data, offset)
        struct.pack_into(fmt, data, offset, old + 1 if value is None else value)
        (tmp / name).write_bytes(bytes(data))
        return tmp / name

    return make


BAD_FILES = {
    "garbage": (_garbage, "not a GGUF file"),
    "wrong magic": (_wrong_magic, "not a GGUF file"),
    "truncated": (_truncated, "truncated"),
    "header only": (_header_only, "truncated"),
    "architecture": (_unsupported_arch, "architecture 'gpt2' is not supported (supported: llama, qwen2)"),
    "quantization": (_unsupported_quant, "quantization I8 cannot be dequantized"),
    "missing": (_missing_file, "no such file"),
    "version 99": (_patched(4, "<I", 99), "version 99"),
    "tensor count 2^60": (_patched(8, "<Q", 2**60), "truncated or corrupt GGUF"),
    "one tensor more than written": (_patched(8, "<Q"), "truncated or corrupt GGUF"),
    "key/value count 2^60": (_patched(16, "<Q", 2**60), "truncated or corrupt GGUF"),
    "a key 2^62 bytes long": (_patched(24, "<Q", 2**62), "truncated or corrupt GGUF"),
}


def train_refused(tmp_path: Path, model: str, capsys) -> str:
    """``ark-trainer train`` with ``model``: exit 2, one line, no run folder; returns the line."""
    from ark_trainer.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "label": "无"}) + "\n" for i in range(6)))
    out = tmp_path / "OUT"
    code = main(["train", "--model_path", model, "--data_path", str(data), "--output_dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert not out.exists()  # checked before anything is written
    return err[0]


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_gguf_files_are_refused_in_one_line(files, tmp_path, capsys, case):
    make, words = BAD_FILES[case]
    path = make(tmp_path, files)
    line = train_refused(tmp_path, str(path), capsys)
    assert line.startswith(f"error: --model_path: {path}") or "no such file" in line, line
    assert words in line, line


def _no_store(store: Path, files: dict) -> None:
    shutil.rmtree(store)


def _no_manifest(store: Path, files: dict) -> None:
    (store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest").unlink()


def _manifest(store: Path) -> Path:
    return store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"


def _no_model_layer(store: Path, files: dict) -> None:
    data = json.loads(_manifest(store).read_text())
    data["layers"] = [x for x in data["layers"] if not x["mediaType"].endswith(".model")]
    _manifest(store).write_text(json.dumps(data))


def _bad_json(store: Path, files: dict) -> None:
    _manifest(store).write_text('{"layers": [')


def _model_blob(store: Path) -> Path:
    layer = next(
        x for x in json.loads(_manifest(store).read_text())["layers"] if x["mediaType"].endswith(".model")
    )
    return store / "blobs" / layer["digest"].replace(":", "-")


def _missing_blob(store: Path, files: dict) -> None:
    _model_blob(store).unlink()


def _checksum(store: Path, files: dict) -> None:
    blob = _model_blob(store)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # one byte of the last tensor: still a well-formed GGUF
    blob.write_bytes(bytes(data))


BAD_STORES = {
    "no store": (_no_store, "no Ollama model store at"),
    "no manifest": (_no_manifest, "no manifest"),
    "no model layer": (_no_model_layer, "has no model layer (application/vnd.ollama.image.model)"),
    "bad json": (_bad_json, "is not valid JSON"),
    "missing blob": (_missing_blob, "is missing; run `ollama pull tiny:latest` again"),
    "checksum": (_checksum, "not the"),
}


@pytest.mark.parametrize("case", list(BAD_STORES))
def test_bad_ollama_stores_are_refused_in_one_line(files, tmp_path, monkeypatch, capsys, case):
    store = ollama_store(tmp_path / "store", files["qwen2"][1])
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    spoil, words = BAD_STORES[case]
    spoil(store, files)
    line = train_refused(tmp_path, "ollama:tiny", capsys)
    assert line.startswith("error: --model_path: ollama:tiny") and words in line, line


def test_export_command_writes_gguf_modelfile_and_record(files, tmp_path, capsys):
    from ark_trainer.cli import main
    from ark_trainer.core.folders import claim_folder

    out = claim_folder(tmp_path / "run")  # a run of ours: export/ is written into it
    shutil.copytree(files["qwen2"][0], out / "model")
    assert main(["export", str(out), "--format", "gguf", "--quant", "f16"]) == 0
    printed = capsys.readouterr().out
    gguf = out / "export" / "model-f16.gguf"
    assert gguf.is_file() and "ollama create NAME -f Modelfile" in printed and "llama-server -m" in printed
    modelfile = (out / "export" / "Modelfile").read_text()
    assert "FROM ./model-f16.gguf" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
    assert "<|im_start|>{{ .Role }}" in modelfile  # the ChatML template in Ollama's Go syntax
    record = json.loads((out / "export" / "export.json").read_text())
    assert record[0]["quant"] == "f16" and record[0]["size_bytes"] == gguf.stat().st_size
    hf, back, tok, _ = load_pair(out / "model", gguf)
    assert greedy(back, tok, PROMPTS[:2])[0] == greedy(hf, tok, PROMPTS[:2])[0]


def test_export_merges_a_lora_adapter(files, tmp_path, capsys):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.cli import main

    base = files["llama"][0]
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=4, target_modules=["q_proj", "v_proj"])
    )
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)  # a real change, so a forgotten merge shows
    out = tmp_path / "run"
    model.save_pretrained(out / "model")
    AutoTokenizer.from_pretrained(base).save_pretrained(out / "model")
    cfg = json.loads((out / "model" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(base)
    (out / "model" / "adapter_config.json").write_text(json.dumps(cfg))
    assert main(["export", str(out), "-o", str(tmp_path / "m.gguf")]) == 0
    back = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="m.gguf", dtype=torch.float32).eval()
    ids = torch.tensor([[1, 5, 9, 20, 3]])
    with torch.no_grad():
        want = model.merge_and_unload()(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(base)(ids).logits
        got = back(ids).logits
    assert (got - want).abs().max().item() < 1e-2 < (plain - want).abs().max().item()
    assert (tmp_path / "Modelfile").is_file()


def test_export_refuses_a_folder_without_a_model(tmp_path, capsys):
    from ark_trainer.cli import main

    assert main(["export", str(tmp_path)]) == 2
    assert "holds no model" in capsys.readouterr().err


def test_export_refuses_an_architecture_it_cannot_write(tmp_path, capsys):
    from ark_trainer.cli import main

    folder = save_tiny(tmp_path / "m", "qwen2")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "gemma"}))
    assert main(["export", str(folder)]) == 2
    assert "cannot be exported to GGUF (supported: llama, qwen2)" in capsys.readouterr().err


def test_modelfile_keeps_an_ollama_template_and_leaves_other_jinja_to_ollama(tmp_path):
    from ark_trainer.core.export.gguf import ExportedGguf, modelfile

    def made(template: str | None) -> ExportedGguf:
        return ExportedGguf(tmp_path / "m.gguf", "llama", "f16", 1, 1, None, "</s>", template)

    own = modelfile("m.gguf", made("{{ bos }}"), ollama_template="{{ .Prompt }}")
    assert 'TEMPLATE """{{ .Prompt }}"""' in own and 'PARAMETER stop "</s>"' in own
    chatml = modelfile("m.gguf", made("{{ '<|im_start|>system\nBe brief.<|im_end|>\n' }}<|im_start|>"))
    assert 'SYSTEM """Be brief."""' in chatml and 'PARAMETER stop "<|im_start|>"' in chatml
    other = modelfile("m.gguf", made("[INST] {{ messages[0]['content'] }} [/INST]"))
    assert "TEMPLATE" not in other.replace("# no TEMPLATE", "") and "tokenizer.chat_template" in other


@pytest.mark.slow  # trains a reward model (about 20 s here)
def test_rm_train_and_deploy_take_a_gguf(files, tmp_path, capsys):
    from ark_trainer.app.commands.deploy import serving_folder
    from ark_trainer.cli import main

    pairs = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"问题{i}", "chosen": "结论：违规 类型：辱骂", "rejected": "hello"} for i in range(8)]
    pairs.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    gguf = str(files["qwen2"][1])
    argv = [
        "rm",
        "train",
        "--data_path",
        str(pairs),
        "--model_path",
        gguf,
        "--output_dir",
        str(tmp_path / "rm"),
    ]
    assert main([*argv, "--max_steps", "1", "--batch_size", "4"]) == 0
    metrics = json.loads((tmp_path / "rm" / "rm_metrics.json").read_text())
    assert metrics["base_model"]["kind"] == "gguf" and metrics["args"]["model_path"] == gguf
    folder = serving_folder(gguf)  # deploy: the same conversion, from the per-user cache
    assert Path(metrics["base_model"]["path"]) == folder and (folder / "config.json").is_file()
    assert folder.parent == Path(os.environ["HOME"]) / ".cache" / "ark-trainer" / "models"
