"""Tests for the demo's tiny base model (ark_trainer.app.demo.model): tokenizer, warm-up data, build and reload.

Run: PYTHONPATH=src python -m pytest tests/demo/test_model.py -q
"""

from __future__ import annotations

import pytest

from ark_trainer.app.demo import data, model
from ark_trainer.rewards import qc


@pytest.fixture(autouse=True)
def _offline_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home" / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def rows():
    return data.generate_rows(40, seed=0, split="train", with_candidates=True)


@pytest.fixture(scope="module")
def tokenizer(rows):
    texts = [r["question"] for r in rows] + [data.gold_answer(r) for r in rows]
    return model.train_tokenizer(texts, vocab_size=600)


def test_tokenizer_round_trips_chinese(tokenizer, rows):
    for text in [rows[0]["question"], data.gold_answer(rows[1]), "没见过的字：龘靐 and ASCII 123"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    question = rows[0]["question"]
    assert len(tokenizer(question)["input_ids"]) < len(question)  # Chinese phrases merge


def test_tokenizer_special_tokens(tokenizer):
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    for token in model.SPECIAL_TOKENS:
        assert tokenizer.tokenize(token) == [token]


def test_chat_template_matches_chatml(tokenizer):
    prompt = model.chat_prompt("你好")
    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n"
    full = tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": "好的"}], tokenize=False)
    assert full == text + "好的<|im_end|>\n"
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]
    full_ids = tokenizer.apply_chat_template(
        [*prompt, {"role": "assistant", "content": "好的"}], return_dict=True
    )["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids  # TRL's completion mask relies on this


def test_warmup_rows_are_deliberately_flawed(rows):
    warm = model.warmup_rows(300, seed=0, exclude=[r["question"] for r in rows])
    assert not {w["prompt"][0]["content"] for w in warm} & {r["question"] for r in rows}
    answers = [w["completion"][0]["content"] for w in warm]
    assert all(qc.parse_answer(a).well_formed for a in answers)
    share_clean = sum(qc.parse_answer(a).type == qc.CLEAN for a in answers) / len(answers)
    expected = data.TYPE_WEIGHTS[qc.CLEAN] + (1 - data.TYPE_WEIGHTS[qc.CLEAN]) * model.LENIENT_SHARE
    assert share_clean == pytest.approx(expected, abs=0.08)
    flawed = sum(qc.qc_compliance(None, answers)[i] < 1.0 for i in range(len(answers))) / len(answers)
    assert flawed == pytest.approx(model.FLAWED_REPLY_SHARE, abs=0.08)


def test_build_base_model_saves_a_loadable_model(tmp_path, rows):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = model.build_base_model(
        tmp_path / "base",
        rows,
        hidden_size=32,
        num_layers=1,
        warmup_steps=5,
        n_warmup_rows=24,
        vocab_size=400,
        progress=False,
    )
    assert (out / "model.safetensors").is_file()
    card = (out / model.MODEL_CARD).read_text(encoding="utf-8")
    assert "not a real model" in card and "5 steps" in card
    tok = AutoTokenizer.from_pretrained(out)
    lm = AutoModelForCausalLM.from_pretrained(out)
    assert type(lm).__name__ == "Qwen2ForCausalLM"
    assert lm.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert lm.generation_config.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    prompt = tok.apply_chat_template(model.chat_prompt(rows[0]["question"]), add_generation_prompt=True)
    ids = torch.tensor([prompt["input_ids"]])
    generated = lm.generate(ids, max_new_tokens=5, do_sample=False)
    assert generated.shape[1] > ids.shape[1]


def test_english_warmup_rows_are_english_and_as_flawed():
    english = data.generate_rows(40, seed=0, split="train", with_candidates=True, lang="en")
    warm = model.warmup_rows(300, seed=0, exclude=[r["question"] for r in english], lang="en")
    answers = [w["completion"][0]["content"] for w in warm]
    assert all(a.startswith("Verdict: ") and qc.parse_answer(a).well_formed for a in answers)
    assert all(w["prompt"][0]["content"].startswith("Inspect this customer-service dialogue") for w in warm)
    share_clean = sum(qc.parse_answer(a).type == qc.CLEAN for a in answers) / len(answers)
    expected = data.TYPE_WEIGHTS[qc.CLEAN] + (1 - data.TYPE_WEIGHTS[qc.CLEAN]) * model.LENIENT_SHARE
    assert share_clean == pytest.approx(expected, abs=0.08)
    flawed = sum(score < 1.0 for score in qc.qc_compliance(None, answers)) / len(answers)
    assert flawed == pytest.approx(model.FLAWED_REPLY_SHARE, abs=0.08)


def test_build_base_model_from_english_rows(tmp_path):
    from transformers import AutoTokenizer

    english = data.generate_rows(24, seed=0, split="train", with_candidates=True, lang="en")
    out = model.build_base_model(
        tmp_path / "base", english, hidden_size=32, num_layers=1, warmup_steps=2, n_warmup_rows=16,
        vocab_size=400, progress=False,
    )  # fmt: skip
    card = (out / model.MODEL_CARD).read_text(encoding="utf-8")
    assert "Verdict / Type / Reply" in card and '"data_lang": "en"' in card and "结论" not in card
    tok = AutoTokenizer.from_pretrained(out)
    gold = data.gold_answer(english[0])
    assert tok.decode(tok(gold, add_special_tokens=False)["input_ids"]) == gold
    assert len(tok(gold)["input_ids"]) < len(gold)  # letters merge into tokens


def test_the_shipped_base_model_is_what_the_recipe_makes(tmp_path):
    """The package ships the default demo's base model (``demo/base_model/``) because its 200 warm-up steps
    follow another path on each CPU's float kernels. The recipe (``python -m ark_trainer.app.demo.model``: the
    default demo's 800 training dialogues, seed 0) rebuilds the same tokenizer and architecture; the
    weights' names, shapes and dtypes are the same, their values are the one CPU's that made them."""
    import json

    from safetensors import safe_open

    from ark_trainer.app.demo.run import shipped_base_model

    shipped = shipped_base_model()
    assert shipped is not None
    rows = data.generate_rows(800, 0, "train", with_candidates=True)
    rebuilt = model.build_base_model(tmp_path / "rebuilt", rows, warmup_steps=0, progress=False)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "chat_template.jinja"):
        assert json_or_text(rebuilt / name) == json_or_text(shipped / name), name
    with (
        safe_open(rebuilt / "model.safetensors", "pt") as a,
        safe_open(shipped / "model.safetensors", "pt") as b,
    ):
        names = sorted(a.keys())  # a safetensors file's tensor names
        assert names == sorted(b.keys())
        for key in names:
            assert a.get_slice(key).get_shape() == b.get_slice(key).get_shape(), key
            assert a.get_slice(key).get_dtype() == b.get_slice(key).get_dtype(), key
    card = (shipped / model.MODEL_CARD).read_text(encoding="utf-8")
    assert '"warmup_steps": 200' in card and '"seed": 0' in card
    assert json.loads((shipped / "config.json").read_text())["model_type"] == "qwen2"


def json_or_text(path):
    """A file's JSON (less ``use_cache``, which the warm-up turns off) or its text."""
    import json

    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        return text
    found = json.loads(text)
    return {k: v for k, v in found.items() if k != "use_cache"} if isinstance(found, dict) else found


def test_the_default_demo_copies_the_shipped_base_model_and_another_seed_makes_one(tmp_path, monkeypatch):
    from ark_trainer.app.demo import run
    from ark_trainer.services.train import run_train  # noqa: F401  (imported by run_demo: patched below)

    built = []
    monkeypatch.setattr("ark_trainer.services.train.run_train", lambda cfg: cfg)
    monkeypatch.setattr(model, "build_base_model", lambda base, train, **kw: built.append(kw) or base)
    run.run_demo(tmp_path / "default")
    shipped = run.shipped_base_model()
    assert shipped is not None and not built
    assert (tmp_path / "default" / "base_model" / "model.safetensors").read_bytes() == (
        shipped / "model.safetensors"
    ).read_bytes()
    run.run_demo(tmp_path / "seed1", seed=1)
    assert built == [{"seed": 1}]
