"""A Hugging Face sequence-classification reward model as one more reward (``--rm_model_path``).

The model is loaded from safetensors only (never pickle) with ``trust_remote_code`` off. A one-logit
model's score is squashed with a sigmoid into (0, 1) so it mixes with the rule graders' 0..1 scale; a
two-logit model uses ``logit[1] - logit[0]`` the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json
from ark_trainer.core.models.loading import check_model_dir
from ark_trainer.rewards.contract import completion_text


def check_reward_model_dir(path: str, flag: str = "--rm_model_path") -> Path:
    """A model folder whose architecture is a sequence classifier (a causal LM would get a random head)."""
    p = check_model_dir(path, flag)
    try:
        archs = read_json(p / "config.json").get("architectures") or []
    except (OSError, ValueError, RecursionError):
        raise UserError(f"{flag}: {path!r}: config.json is not valid JSON") from None
    if archs and not any("SequenceClassification" in a for a in archs):
        raise UserError(
            f"{flag}: {path!r} is a {archs[0]}, not a sequence-classification reward model; "
            "give a checkpoint saved from AutoModelForSequenceClassification (num_labels=1)"
        )
    return p


def auto_device() -> str:
    from ark_trainer.core.runtime.system import resolve_device

    return resolve_device("auto")


def rm_text(tokenizer, prompt: Any, completion: Any) -> str:
    """The text a reward model reads for (prompt, completion), the same in ``rm train`` and in scoring.

    The chat template when the tokenizer has one, else the prompt's turns and the answer on lines of their
    own; always ending with the EOS token, as TRL's RewardTrainer appends it in training (a sequence
    classifier reads the last token, so it must be the same one)."""
    answer = completion_text(completion)
    if isinstance(prompt, list) and getattr(tokenizer, "chat_template", None):
        messages = [*prompt, {"role": "assistant", "content": answer}]
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        if isinstance(prompt, list):
            prompt = "\n".join(str(m.get("content", "")) for m in prompt)
        text = f"{prompt}\n{answer}"
    eos = tokenizer.eos_token or ""
    return text if text.endswith(eos) else text + eos


class RewardModelScorer:
    """Scores (prompt, completion) pairs with a sequence-classification model; TRL reward contract."""

    __name__ = "reward_model"

    def __init__(self, path: str, device: str = "cpu", batch_size: int = 16, max_length: int = 1024) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        check_reward_model_dir(path)
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForSequenceClassification.from_pretrained(
            path, use_safetensors=True, trust_remote_code=False
        ).to(device)
        self.model.eval()
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.device, self.batch_size, self.max_length = device, batch_size, max_length
        self._torch = torch

    def __call__(self, prompts: list, completions: list, **_: Any) -> list[float | None]:
        torch = self._torch
        texts = [rm_text(self.tokenizer, p, c) for p, c in zip(prompts, completions, strict=True)]
        scores: list[float | None] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(
                texts[start : start + self.batch_size],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
            ).to(self.device)
            with torch.no_grad():
                logits = self.model(**batch).logits.float()
            raw = logits[:, 0] if logits.shape[-1] == 1 else logits[:, 1] - logits[:, 0]
            scores += torch.sigmoid(raw).tolist()
        return scores


class LazyRewardModel:
    """A reward model (``--rm_model_path`` or a ``score_model`` grader) loaded on first use, on its device,
    so checks and ``score``'s spec validation stay cheap; it applies to any answer."""

    def __init__(
        self, path: str, device: str = "auto", name: str = "reward_model", batch_size: int = 16,
        max_length: int = 1024,
    ) -> None:  # fmt: skip
        self.__name__ = name
        self.path, self.device, self.batch_size, self.max_length = path, device, batch_size, max_length
        self.scorer: RewardModelScorer | None = None

    def __call__(self, prompts, completions, **columns):
        if self.scorer is None:
            device = auto_device() if self.device == "auto" else self.device
            self.scorer = RewardModelScorer(
                self.path, device=device, batch_size=self.batch_size, max_length=self.max_length
            )
        return self.scorer(prompts, completions, **columns)

    def applies(self, prompts, completions, **columns) -> list[bool]:
        return [True] * len(completions)  # a reward model scores any answer; no need to load it to know
