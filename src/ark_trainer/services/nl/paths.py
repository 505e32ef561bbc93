"""Paths in a request, and which flag each one is: by the keyword before it, else by its shape.

    用 /data/qc.jsonl 训练 /models/qwen 的 RFT+GRPO，输出到 /out/v3
    → --data_path /data/qc.jsonl (a .jsonl/.json file is data), --model_path /models/qwen (a folder or a
      path without a data extension right after 训练/train is the model), --output_dir /out/v3

A keyword names the role outright (模型 ./m, data ./d.jsonl, 输出到 /out, save to ./x); the longest
keyword wins, so "reward model ./rm" is not the policy model.
"""

from __future__ import annotations

import re

from ark_trainer.services.nl.request import Parsed, RequestText

# a path: quoted (any characters), or ASCII with a slash, or a *.json(l) / *.gguf file name, or ollama:NAME[:TAG]
PATH = (
    r"[\"'“「]([^\"'”」\n]*[/\\.][^\"'”」\n]*)[\"'”」]"
    r"|(ollama:[A-Za-z0-9_.\-/]+(?::[A-Za-z0-9_.\-]+)?"
    r"|(?:~|\.{1,2})?/?[A-Za-z0-9_.\-~]*[/\\][A-Za-z0-9_.\-~/\\]*|[A-Za-z0-9_.\-~]+\.(?:jsonl?|gguf))"
)
DATA_FILE = r"\.jsonl?$"

PATH_ROLES = [  # keyword before the path → flag
    (r"(?:奖励模型|reward[\s_-]*model|rm(?:_model)?(?:_path)?)", "rm_model_path"),
    (
        r"(?:评估集|评测集|验证集|测试集|评估数据|eval(?:uation)?[\s_-]*(?:set|data(?:set)?|on)?|test[\s_-]*set|dev[\s_-]*set)",
        "eval_dataset",
    ),
    (r"(?:日志|log(?:s|_dir)?)", "log_dir"),
    (
        r"(?:输出到|输出目录|输出|保存到|保存在|保存至|存到|结果放到|output(?:_dir)?|out(?:put)?\s+(?:to|in)|save(?:\s+(?:it|them))?\s+(?:to|in|under)|write\s+to)",
        "output_dir",
    ),
    (r"(?:基座模型|基础模型|模型路径|模型|base[\s_-]*model|model(?:_path)?|checkpoint|ckpt)", "model_path"),
    (
        r"(?:训练数据|训练集|数据集|数据路径|数据|training[\s_-]*data|train(?:ing)?[\s_-]*set|data(?:set|_path)?)",
        "data_path",
    ),
]
CONNECT = r"\s*(?:[:：=]|在|是|为|位于|at|in|is|from|on|under|to)?\s*"
# before a path that is not a data file, the model: "训练 /models/qwen", "train ./base on ...", "fine-tune
# ~/ckpt/m", "with /models/small" (a data path is caught by its .jsonl/.json shape first)
TRAIN_VERB = (
    r"(?:训练|微调|训|train|fine[\s-]*tune|finetune|with|using|用|基于|based\s+on|starting\s+from)\s*$"
)


def take_paths(t: RequestText, out: Parsed) -> None:
    """Set the path flags the request names and blank them (and their keywords) out of ``t``."""
    for m in t.finditer(PATH):
        path = (m.group(1) or m.group(2)).rstrip(".,;，。；")
        if not path or path in ("+", "/") or re.fullmatch(r"[\d.]+", path):
            continue
        before = t.rest[max(0, m.start() - 40) : m.start()]
        role = path_role(before, path)
        if role is None or role in out.flags:
            continue
        out.flags[role] = path
        t.rest = t.rest[: m.start()] + " " * len(m.group(0)) + t.rest[m.end() :]
        kw = re.search(_role_pattern(role) + CONNECT + r"$", t.rest[: m.start()], flags=re.IGNORECASE)
        if kw:
            t.rest = t.rest[: kw.start()] + " " * (kw.end() - kw.start()) + t.rest[kw.end() :]


def _role_pattern(role: str) -> str:
    return next(p for p, r in PATH_ROLES if r == role)


def path_role(before: str, path: str) -> str | None:
    """The flag for ``path``: the keyword right before it, else its shape (data file; model after 训练)."""
    best: tuple[int, str] | None = None
    for pattern, role in PATH_ROLES:
        for m in re.finditer(pattern + CONNECT + r"$", before, flags=re.IGNORECASE):
            if best is None or m.start() < best[0]:  # the longest keyword wins: "reward model" over "model"
                best = (m.start(), role)
    if best:
        return best[1]
    if re.search(DATA_FILE, path, flags=re.IGNORECASE):
        return "data_path"
    if path.startswith("ollama:") or re.search(r"\.gguf$", path, flags=re.IGNORECASE):
        return "model_path"  # a GGUF file or an Ollama model is a model wherever it stands
    if re.search(TRAIN_VERB, before, flags=re.IGNORECASE) and not re.search(r"\.(?:ya?ml|txt|csv)$", path):
        return "model_path"
    return None
