"""The reference's words and common phrasings, rewritten to the canonical ones the parser's rules read.

奖励微调 / 拒绝采样微调 / rejection sampling fine-tuning are RFT; 强化学习 / reinforcement learning are
GRPO; 两阶段 / 两步走 / two-stage mean RFT+GRPO; 单步 means Only GRPO; typos in flag-like words
(``max_trian_steps``, ``learnig rate``, ``GPRO``, ``RTF``) read as the flag. Applied after the paths are
taken, so a path is never rewritten. Also: which OpenClaw agent a request names (当前 Agent, agent main).
"""

from __future__ import annotations

import re

# (pattern, replacement), applied in order, case-insensitive
SYNONYMS = [
    (
        r"拒绝采样微调|奖励微调|rejection[\s-]*sampling(?:[\s-]*fine[\s-]*tun\w*)?|reward[\s-]*fine[\s-]*tun\w*",
        " RFT ",
    ),
    (r"(?<![a-z])rtf(?![a-z])", " RFT "),
    (r"(?<![a-z])gpro(?![a-z])", " GRPO "),
    (
        r"(?:GRPO\s*)?强化学习|reinforcement[\s-]*learning(?:\s*\(\s*grpo\s*\))?|(?<![a-z])rl(?![a-z])",
        " GRPO ",
    ),
    (r"两阶段|两步走|两个阶段|分两步|two[\s-]*(?:stages?|phases?)|two-step(?!s)", " RFT+GRPO "),
    (r"单步|single[\s-]*(?:step|stage)|one[\s-]*stage", " only GRPO "),
    (r"max[\s_-]*tr\w{2,4}[\s_-]*steps?", "max_train_steps"),
    (r"rft[\s_-]*steps?(?=\s*[:=]|\s+\d)", "rft_steps"),
    (r"lear?n\w{0,5}[\s_-]*rate|learning[\s_-]*rate", "learning rate"),
    (r"batch[\s_-]*size|batchsize", "batch size"),
    (r"(?<![a-z])bs(?=\s*[:=])", "batch size"),
    (r"strat\w{2,6}(?=\s*[:=]?\s*(?:auto|rft|grpo|dpo|kto|rloo))", "strategy"),
]

CURRENT_AGENT = (
    r"(?:当前|目前|现在|正在用?的?|现有|current(?:ly)?|this|my|our|我的|我们的|这个)"
    r"[^，,。.;；!?！？\n]{0,16}?(?:agent|智能体|助手|bot)"
)
AGENT_ID = (
    r"(?:--agent[\s=]+|agent[\s_-]*id\s*[:：=]?\s*|(?:agent|智能体)\s*[:：=]\s*)"
    r"[\"'`“]?([a-z0-9_][a-z0-9_-]{0,63})(?![a-z0-9_-])"
)
# "agent qc-bot", "agent main": a bare word after "agent" is an id only when it looks like one
AGENT_WORD = r"(?:agent|智能体)\s+[\"'`“]?(main|[a-z0-9_]*[0-9_-][a-z0-9_-]*)(?![a-z0-9_-])"


def normalize(text: str) -> str:
    """``text`` with every synonym and flag typo replaced by the word the parser's rules read."""
    for pattern, canonical in SYNONYMS:
        text = re.sub(pattern, canonical, text, flags=re.IGNORECASE)
    return text


def named_agent(text: str) -> str | None:
    """The agent id the request names (``agent main``), ``"current"`` for 当前/current agent, or None."""
    m = re.search(AGENT_ID, text, flags=re.IGNORECASE) or re.search(AGENT_WORD, text, flags=re.IGNORECASE)
    if m:
        return m.group(1).lower()
    if re.search(CURRENT_AGENT, text, flags=re.IGNORECASE):
        return "current"
    return None
