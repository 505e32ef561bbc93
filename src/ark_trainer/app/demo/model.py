"""The demo's tiny base model, made here from nothing downloaded.

Three steps, all on CPU in about a minute:

1. a byte-level BPE tokenizer (~1.5k tokens) trained on the demo's own text, with
   Qwen2's ChatML special tokens and chat template;
2. a small randomly initialised ``Qwen2ForCausalLM`` (hidden 64, 2 layers, ~0.2M parameters by default:
   in the same minute on 2 CPU cores it sees more warm-up rows than hidden 128 / 4 layers, and measured, it
   learned more from them);
3. a short TRL ``SFTTrainer`` warm-up on QC rows drawn with a *different* seed than the train/eval data, whose
   targets are deliberately imperfect: a lenient inspector that calls most violations 无 (compliant) and
   suggests a flawed reply half of the time.

The result is weak but not random: it answers in the three-line QC format, usually with the wrong type and
often a non-compliant reply, and sampling still finds the right answer often enough for RFT and GRPO to have
something to select. It is a toy for the demo, not a real model; ``ARK_DEMO_MODEL.md`` beside the weights
says how it was made.

``build_base_model(..., strong=True)`` warms up on the gold answers instead: a base model that already does
the task fairly well, so that ``--strategy auto`` has a strong and a weak model to choose between (tests).

Run it::

    PYTHONPATH=src python -m ark_trainer.app.demo.model OUT_DIR
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.app.demo.data import flawed_reply, generate_rows, gold_answer, row_lang
from ark_trainer.rewards.qc import CLEAN, format_answer, parse_answer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, Qwen2Config

PAD_TOKEN, IM_START, EOS_TOKEN = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, EOS_TOKEN)
# Pre-tokenizer split: Qwen2's, except that punctuation never joins the word after it, so a phrase such as
# 不归我管 becomes the same token wherever it stands (after ：, ， or nothing); digits stay one by one.
WORD_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+"
# Qwen2's ChatML template, without the default system prompt (short sequences for a tiny model). The
# {% generation %} markers let TRL's assistant_only_loss find the assistant tokens.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{% generation %}{{- message['content'] + '<|im_end|>' -}}{% endgeneration %}{{- '\\n' -}}"
    "{%- else -%}{{- message['content'] + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

WARMUP_SEED_OFFSET = 7919  # the warm-up rows' seed is the data seed plus this, so they differ from train/eval
LENIENT_SHARE = 0.6  # share of warm-up violation rows whose target says 无 (a lenient inspector)
FLAWED_REPLY_SHARE = 0.5  # share of warm-up targets whose suggested reply is flawed
WARMUP_BATCH_SIZE = 64
WARMUP_LEARNING_RATE = 1e-2  # high, as tiny from-scratch models tolerate; measured best of 3e-3 .. 2e-2
# Weight init std. With Qwen2's 0.02 a model this thin starts with near-uniform attention and the short warm-up
# often ends before attention learns to find the cue in the dialogue; 0.08 made every seed tried (0-3) read it.
INIT_STD = 0.08
MODEL_CARD = "ARK_DEMO_MODEL.md"
CARD_WORDS = {  # the model card's examples, in the language of the data the model was made from
    "zh": {
        "clean": "`无` / `合规`",
        "none": "`无`",
        "deflection": "不归我管 / 自己去…",
        "promise": "保证 / 双倍赔偿",
        "format": "结论 / 类型 / 回复",
    },
    "en": {
        "clean": "`none` / `compliant`",
        "none": "`none`",
        "deflection": "not my job / go find…",
        "promise": "guarantee / double compensation",
        "format": "Verdict / Type / Reply",
    },
}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1500) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``texts``, with ChatML special tokens and chat template.

    ``<|endoftext|>`` pads and ``<|im_end|>`` ends a turn (the eos). Text outside the training corpus still
    round-trips, as bytes."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(WORD_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )


def chat_prompt(question: str) -> list[dict[str, str]]:
    """The conversational prompt the demo uses for a QC question (one user turn)."""
    return [{"role": "user", "content": question}]


def _warmup_target(rng: random.Random, row: dict) -> str:
    """A deliberately imperfect answer: often the lenient 无, often a flawed reply."""
    label = row["label"]
    if label != CLEAN and rng.random() < LENIENT_SHARE:
        label = CLEAN
    reply = parse_answer(gold_answer(row)).reply
    assert reply is not None  # gold_answer is a canonical answer, which always has a reply
    lang = row_lang(row)
    if rng.random() < FLAWED_REPLY_SHARE:
        reply = flawed_reply(rng, row["scenario"], row["question"], lang=lang)
    return format_answer(label, reply, lang=lang)


def warmup_rows(
    n: int, seed: int, exclude: Iterable[str] = (), strong: bool = False, lang: str = "zh"
) -> list[dict]:
    """``n`` conversational prompt/completion rows for the warm-up, with its deliberate flaws, in ``lang``.

    ``strong=True`` warms up on the gold answers instead (a base model that already does the task well,
    used to test ``--strategy auto``)."""
    rows = generate_rows(
        n, seed + WARMUP_SEED_OFFSET, "warmup", with_candidates=False, exclude=set(exclude), lang=lang
    )
    rng = random.Random(f"ark-demo:warmup-targets:{seed}")
    return [
        {
            "prompt": chat_prompt(row["question"]),
            "completion": [
                {"role": "assistant", "content": gold_answer(row) if strong else _warmup_target(rng, row)}
            ],
        }
        for row in rows
    ]


def _qwen2_config(tokenizer, hidden_size: int, num_layers: int) -> Qwen2Config:
    from transformers import Qwen2Config

    heads = max(1, hidden_size // 32)
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 3,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        initializer_range=INIT_STD,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
    )


def warm_up(
    model,
    tokenizer,
    rows: list[dict],
    steps: int,
    seed: int,
    progress: bool,
    batch_size: int = WARMUP_BATCH_SIZE,
    max_length: int = 256,
) -> list[dict]:
    """A short SFT run on the warm-up rows; returns the trainer's log history.

    ``rows`` are whatever ``SFTTrainer`` takes: conversational prompt/completion rows (the QC demo, loss on the
    completion), or already tokenized ``input_ids`` + ``assistant_masks`` (the agent demo, loss on the
    assistant turns only)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from ark_trainer.core.runtime.monitor import use_console_progress

    with tempfile.TemporaryDirectory(prefix="ark-demo-warmup-") as scratch:
        args = SFTConfig(
            output_dir=scratch,
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            learning_rate=WARMUP_LEARNING_RATE,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, steps // 20),
            weight_decay=0.0,
            max_length=max_length,
            logging_steps=max(1, steps // 10),
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=seed,
            disable_tqdm=not progress,
        )
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer
        )
        use_console_progress(trainer, "demo warm-up")
        trainer.train()
        return list(trainer.state.log_history)


def make_model(tokenizer, hidden_size: int, num_layers: int):
    """A randomly initialised tiny ``Qwen2ForCausalLM`` for ``tokenizer`` (seed it first: ``set_seed``)."""
    from transformers import GenerationConfig, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(_qwen2_config(tokenizer, hidden_size, num_layers))
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id
    )
    return model


def _tokenizer_corpus(train_rows: list[dict], warmup: list[dict]) -> list[str]:
    texts = [row["question"] for row in train_rows]
    texts += [answer for row in train_rows for answer in row.get("candidates", [])]
    texts += [gold_answer(row) for row in train_rows]
    for row in warmup:
        texts += [row["prompt"][0]["content"], row["completion"][0]["content"]]
    return texts


def build_base_model(
    out_dir: Path,
    train_rows: list[dict],
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    warmup_steps: int = 200,
    n_warmup_rows: int = 3000,
    vocab_size: int = 1500,
    progress: bool = True,
    strong: bool = False,
    warmup_batch_size: int = WARMUP_BATCH_SIZE,
) -> Path:
    """Make the demo base model in ``out_dir`` (safetensors, tokenizer, generation config, model card).

    ``train_rows`` (the demo's training rows) feed the tokenizer; the warm-up uses its own rows, drawn with
    a different seed, in the language of ``train_rows`` (``demo --lang``), and kept apart from them. Loads with ``AutoModelForCausalLM.from_pretrained``.
    ``strong=True`` warms up on the correct answers (no deliberate flaws): a base model for which
    ``--strategy auto`` should pick Only GRPO."""
    from transformers import set_seed

    started = time.monotonic()
    out_dir = Path(out_dir)
    set_seed(seed)
    lang = row_lang(train_rows[0]) if train_rows else "zh"
    questions = [row["question"] for row in train_rows]
    warmup = warmup_rows(n_warmup_rows, seed, exclude=questions, strong=strong, lang=lang)
    tokenizer = train_tokenizer(_tokenizer_corpus(train_rows, warmup), vocab_size=vocab_size)
    model = make_model(tokenizer, hidden_size, num_layers)
    history = (
        warm_up(model, tokenizer, warmup, warmup_steps, seed, progress, warmup_batch_size)
        if warmup_steps > 0
        else []
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    facts = {
        "seed": seed,
        "data_lang": lang,
        "warmup_target": "gold answers (strong variant)" if strong else "deliberately flawed answers",
        "warmup_steps": warmup_steps,
        "warmup_batch_size": warmup_batch_size,
        "n_warmup_rows": len(warmup),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": next((round(e["loss"], 4) for e in reversed(history) if "loss" in e), None),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / MODEL_CARD).write_text(_model_card(model.config, len(tokenizer), facts), encoding="utf-8")
    return out_dir


def _model_card(config, vocab: int, facts: dict) -> str:
    """``ARK_DEMO_MODEL.md``: how the model was made, so nobody mistakes it for a real one."""
    arch = (
        f"hidden {config.hidden_size}, {config.num_hidden_layers} layers, {config.num_attention_heads} heads "
        f"({config.num_key_value_heads} KV), intermediate {config.intermediate_size}, tied embeddings, "
        f"max positions {config.max_position_embeddings}, init std {config.initializer_range}; "
        f"{facts['n_parameters']:,} parameters"
    )
    warmup = (
        f"{facts['warmup_steps']} steps of TRL `SFTTrainer` (batch {facts['warmup_batch_size']}, lr {WARMUP_LEARNING_RATE}, "
        f"cosine, completion-only loss) on {facts['n_warmup_rows']} synthetic QC dialogues drawn with seed "
        f"{facts['seed']} + {WARMUP_SEED_OFFSET} (not the train/eval seeds; no train dialogue reused); "
        f"final training loss {facts['final_loss']}"
    )
    words = CARD_WORDS[facts["data_lang"]]
    return f"""# ark-trainer demo base model: a toy, not a real model

Made by `ark_trainer.app.demo.model.build_base_model` on CPU in {facts["build_seconds"]} s, from nothing
downloaded. It exists only to run the RFT+GRPO pipeline end to end; point `--model_path` at a real
checkpoint for real work.

## How it was made

1. **Tokenizer**: byte-level BPE (punctuation split from words), {vocab} tokens, trained on the demo's synthetic
   QC text; special tokens `<|endoftext|>` (pad), `<|im_start|>`, `<|im_end|>` (eos); ChatML chat template
   without a default system prompt.
2. **Model**: `Qwen2ForCausalLM`, randomly initialised (seed {facts["seed"]}): {arch}.
3. **Warm-up**: {warmup}.

## Its deliberate flaws

The warm-up targets were written by a *lenient, careless inspector*, so the model is weak but not random:

- {LENIENT_SHARE:.0%} of the violation dialogues are labelled {words["clean"]}, the rest with their right type;
  clean dialogues are labelled {words["none"]}.
- {FLAWED_REPLY_SHARE:.0%} of the suggested replies are flawed: no apology, a copied phone number,
  deflection ({words["deflection"]}) or an unauthorised promise ({words["promise"]}).

So it answers in the three-line format ({words["format"]}), calls most violations compliant when decoding
greedily, and often suggests a non-compliant reply; sampled answers name the right type often enough for
RFT and GRPO to select and reinforce them.

```json
{json.dumps(facts, ensure_ascii=False, indent=2)}
```
"""


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_model")
    print(build_base_model(target, generate_rows(800, 0, "train", with_candidates=True)))
