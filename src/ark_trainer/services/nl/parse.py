"""Deterministic parser: a Chinese or English training request → ``train`` flags, assumptions, ignored words.

Offline and rule-based (regexes and keyword tables), so the same request always gives the same plan::

    parse_request("对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度，显存16G")

gives ``strategy RFT+GRPO``, ``task_name 客服质检_agent_training``, reward weights for compliance and
satisfaction, ``batch_size 8`` (the reference's table: 16 GB → 4–8, 32 GB → 16–32) and one assumption line
for every value the request did not state. Each rule consumes the characters it matched; what is left,
minus filler words, is reported as ignored, so a user sees what was not understood.
"""

from __future__ import annotations

import re

from ark_trainer.base.errors import UserError
from ark_trainer.base.strategies import AUTO, DEFAULT_STRATEGY, Strategy, strategy_table
from ark_trainer.services.nl.paths import take_paths
from ark_trainer.services.nl.request import Parsed, RequestText
from ark_trainer.services.nl.vocab import named_agent, normalize
from ark_trainer.services.nl.weights import format_weights

NUM = (
    r"(\d{1,3}(?:,\d{3})+(?![\d.])|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[一二两三四五六七八九十百千万]+)"
    r"\s*([kK]|千|万|w|W)?"
)
MULTIPLIERS = {"k": 1_000, "K": 1_000, "千": 1_000, "万": 10_000, "w": 10_000, "W": 10_000}
# how a request asks for ``auto`` (not a strategy of the table: the probe picks one); every strategy's own
# phrases and words come with it from the strategy registry (``base/strategies.py``: ``Strategy.phrases``)
AUTO_PHRASE = (
    r"(?<![a-z_])auto(?:matic(?:ally)?)?(?![a-z_])(?!\s*(?:eval|evaluat|评估|deploy|部署|heartbeat|save))"
    r"\s*(?:strategy|select\w*|choose|choice|pick)?"
    r"|自动(?!\s*(?:评估|评测|部署|心跳|保存|化))\s*(?:选择|选|判断|决定)?(?:策略)?"
    r"|(?:you|tool)\s+(?:decide|choose|pick)|(?:由你|你来|帮我)\s*(?:选|决定|判断)"
)
NO_RFT = r"(?:不要|不用|不做|无需|不需要|跳过|no|without|skip(?:ping)?)\s*(?:the\s+)?rft(?![a-z_])"
RFT = r"(?<![a-z_])rft(?![a-z_])"  # RFT named alone still means the two-step RFT+GRPO
UNSUPPORTED = (
    r"(?<![a-z])(ppo)(?![a-z])"  # TRL no longer ships PPO (config.normalize_strategy refuses it too)
)

TASKS = [  # (pattern, task label used for the default task name)
    (r"客服\s*质检|质检|quality[\s-]*inspection|\bqc\b", "客服质检"),
    (r"智能\s*客服|客服|customer[\s-]*(?:service|support)", "智能客服"),
]

# objective → (grader names in preference order, the weight the objective gets when named)
OBJECTIVES = {
    "compliance": (r"合规(?:性)?|compliance|compliant|违规", ("qc_compliance",)),
    "satisfaction": (r"(?:用户|客户)?满意度?|satisfaction|satisfied|polite\w*|礼貌", ("qc_satisfaction",)),
    "accuracy": (
        r"准确(?:率|性|度)?|accura\w+|正确率|correct\w*|判定|verdict",
        ("qc_verdict", "reference_match"),
    ),
    "format": (r"格式|format\w*", ("qc_format",)),
}
NAMED_WEIGHT = 1.0

# filler words left out of the "ignored" list (they carry no setting)
FILLER = (
    "对当前的|对当前|当前的|当前|执行|进行|开始|训练|优化|提升|提高|改进|模型|请|帮我|帮忙|一下|使用|用|采用|的|和|与|及|以及|并|并且|"
    "在|上|对|把|将|给|为|做|跑|一个|一次|我的|我们的|我们|我|策略|一轮|目标|重点|关注|agent|智能体|please|train|training|"
    "run|fine[- ]?tune|optimi[sz]e|improve|boost|focus|on|for|the|a|an|my|our|with|and|to|of|using|use|in|at|it|"
    "model|agent|strategy|me|let|can|you|then|by|from|is|be|i|want|would|like|need|could|steps?|步|"
    "rft|grpo|only|first|先|再|然后|后|pls|please|吧|一下"
)


CN_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
CN_UNITS = {"十": 10, "百": 100, "千": 1000}


def chinese_number(text: str) -> float:
    """一万 → 10000, 五千 → 5000, 三百五十 → 350, 十二 → 12 (the forms a request uses)."""
    total, section, digit = 0, 0, 0
    for ch in text:
        if ch in CN_DIGITS:
            digit = CN_DIGITS[ch]
        elif ch == "万":
            total += (section + digit or 1) * 10_000
            section, digit = 0, 0
        else:
            section += (digit or 1) * CN_UNITS[ch]
            digit = 0
    return float(total + section + digit)


def number(value: str, unit: str | None = None) -> float:
    if value[0] in CN_DIGITS or value[0] in CN_UNITS or value[0] == "万":
        base = chinese_number(value)
    else:
        base = float(value.replace(",", ""))
    return base * MULTIPLIERS.get(unit or "", 1)


def parse_request(text: str, known_rewards: list[str] | None = None) -> Parsed:
    """Parse ``text``; ``known_rewards`` (the run's reward names, when known) steers objective mapping."""
    if not text or not text.strip():
        raise UserError('request: empty; say what to train, e.g. "RFT+GRPO on my QC data, 1000 steps"')
    t, out = RequestText(text), Parsed()
    take_paths(t, out)
    t.rest = normalize(t.rest)
    out.agent = named_agent(text)
    _strategy(t, out)
    _numbers(t, out)
    _gpu_memory(t, out)
    _switches(t, out)
    _objectives(t, out, known_rewards)
    _task(t, out)
    out.ignored = _leftover(t.rest)
    return out


# --- strategy ----------------------------------------------------------------------------------------------


def strategy_phrases() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The (pattern, strategy) pairs a request names a strategy by, most specific first, from the strategy
    registry: every strategy's ``phrases`` (those of several stages first), ``auto``'s, then the strategies'
    ``words``; and, apart, the words of a strategy that ends the default one (GRPO's), read only after "RFT
    named alone" (which means the default, RFT+GRPO)."""
    table = strategy_table()
    by_length = sorted(table.items(), key=lambda item: -len(item[1].stages))  # stable: registry order
    phrases = [(p, name) for name, s in by_length for p in s.phrases]
    default = table[DEFAULT_STRATEGY].stages

    def ends_default(s: Strategy) -> bool:
        return len(s.stages) < len(default) and default[-len(s.stages) :] == s.stages

    words = [(w, name) for name, s in table.items() if not ends_default(s) for w in s.words]
    last = [(w, name) for name, s in table.items() if ends_default(s) for w in s.words]
    return [*phrases, (AUTO_PHRASE, AUTO), *words], last


def _pick_strategy(t: RequestText, no_rft: bool) -> tuple[str | None, re.Match | None]:
    """The first strategy pattern that matches; RFT named alone (not "不要RFT") means the default strategy."""
    first, last = strategy_phrases()
    for pattern, strategy in first:
        m = t.take(pattern)
        if m:
            return strategy, m
    if not no_rft and t.find(RFT):  # the RFT words stay for the step and rate rules ("RFT 3000步")
        return DEFAULT_STRATEGY, None
    for pattern, strategy in last:
        if m := t.take(pattern):
            return strategy, m
    return None, None


def _strategy(t: RequestText, out: Parsed) -> None:
    unsupported = sorted({m.group(1).upper() for m in t.finditer(UNSUPPORTED)})
    for u in t.finditer(UNSUPPORTED):
        t.consume(u)
    strategy, m = _pick_strategy(t, no_rft=t.take(NO_RFT) is not None)
    if strategy:
        out.flags["strategy"] = strategy
        if strategy == "GRPO" and m and re.search(r"快速迭代|fast|quick|one[\s-]step", m.group(0), re.I):
            out.assumptions.append("fast iteration: Only GRPO (one step, no RFT)")
        if strategy == "auto":
            out.assumptions.append(
                "auto: DPO for data of preference pairs only, KTO for thumbs-up/down labels only; otherwise "
                "the run starts by probing the base model and picks RFT+GRPO or Only GRPO "
                "(--auto_min_pass_rate, --auto_max_zero_std); plan.json and the report say which and why"
            )
        for more in [p for group in strategy_phrases() for p in group]:  # a second mention is not ignored
            while t.take(more[0]):
                pass
    if unsupported:
        names = " and ".join(unsupported)
        if "strategy" not in out.flags:
            raise UserError(
                f"request: {names}: TRL, the training library, no longer ships PPO; ask for GRPO or RLOO, its "
                "critic-free successors here (or RFT+GRPO, DPO, KTO, auto)"
            )
        out.assumptions.append(
            f"{names} not available (TRL no longer ships it); training with {out.flags['strategy']}"
        )
    if "strategy" not in out.flags:
        out.flags["strategy"] = "RFT+GRPO"
        out.assumptions.append(
            "strategy not named: RFT+GRPO (the reference's choice for precise preference alignment); "
            "say 'only GRPO' for one fast step or 'auto' to let a probe of the base model decide"
        )


# --- numbers -----------------------------------------------------------------------------------------------

STEP_WORD = r"(?:steps?|步|次迭代|iterations?|iters?)"
NUMBER_RULES = [  # (flag, patterns with the number as groups 1-2), most specific first
    (
        "rft_steps",
        [
            rf"rft\s*(?:阶段|stage|部分|phase)?\s*(?:steps?|步数|训练)?\s*(?:[:：=]|为|用|跑|of|for)?\s*{NUM}\s*{STEP_WORD}?",
            rf"{NUM}\s*{STEP_WORD}\s*(?:of\s+|的\s*)?rft",
            rf"{NUM}\s*rft\s*{STEP_WORD}",
            rf"rft_steps\s*[:=]?\s*{NUM}",
        ],
    ),
    (
        "max_train_steps",
        [
            rf"max_train_steps\s*[:=]?\s*{NUM}",
            rf"(?:总|一共|共|总共|合计|total|max(?:imum)?)\s*(?:训练)?\s*(?:steps?|步数?)?\s*(?:[:：=]|为|of)?\s*{NUM}\s*{STEP_WORD}?",
            rf"(?:训练|train(?:ing)?\s*(?:for)?)\s*{NUM}\s*{STEP_WORD}",
            rf"{NUM}\s*{STEP_WORD}",
            rf"(?:steps?|步数)\s*(?:[:：=]|为|of)?\s*{NUM}",
        ],
    ),
    (
        "batch_size",
        [
            rf"(?:batch[\s_-]*size|批大小|批次大小|批量大小|批量|批次|bs|batch)\s*(?:[:：=]|为|of|设为|设置为)?\s*{NUM}",
            rf"{NUM}\s*(?:per\s+batch|条每批|一批)",
        ],
    ),
    (
        "gradient_accumulation_steps",
        [
            rf"(?:gradient[\s_-]*accumulation(?:[\s_-]*steps)?|grad[\s_-]*accum\w*|梯度累积(?:步数)?|梯度累加)\s*(?:[:：=]|为|of)?\s*{NUM}",
        ],
    ),
    (
        "rft_learning_rate",
        [
            rf"rft\s*(?:的)?\s*(?:learning[\s_-]*rate|学习率|lr)\s*(?:[:：=]|为|of)?\s*{NUM}",
        ],
    ),
    (
        "grpo_learning_rate",
        [
            rf"(?:grpo\s*(?:的)?\s*)?(?:learning[\s_-]*rate|学习率|lr)\s*(?:[:：=]|为|of|设为|用|设置为|to)?\s*{NUM}",
            rf"grpo_learning_rate\s*[:=]?\s*{NUM}",
        ],
    ),
    (
        "warmup_ratio",
        [rf"(?:warm[\s_-]*up(?:_ratio)?|预热(?:比例)?)\s*(?:ratio)?\s*(?:[:：=]|为|of)?\s*{NUM}"],
    ),
    (
        "save_steps",
        [
            rf"(?:每|every)\s*{NUM}\s*{STEP_WORD}\s*(?:保存|存一次|save|a\s+checkpoint|checkpoint)",
            rf"(?:save(?:_steps)?|保存)\s*(?:a\s+checkpoint\s*)?(?:every|每)?\s*{NUM}",
        ],
    ),
    ("num_generations", [rf"(?:num_generations|group[\s_-]*size|组大小|每组)\s*(?:[:：=]|为|of)?\s*{NUM}"]),
    (
        "num_generations",
        [
            rf"{NUM}\s*(?:generations|completions|samples|answers)\s*(?:per|a|each)\s*(?:prompt|question|group)"
        ],
    ),
    (
        "rft_temperature",
        [rf"rft\s*(?:的)?\s*(?:sampling\s*)?(?:temperature|温度)\s*(?:[:：=]|为|of)?\s*{NUM}"],
    ),
    ("temperature", [rf"(?:sampling\s*)?(?:temperature|采样温度|温度)\s*(?:[:：=]|为|of)?\s*{NUM}"]),
    ("seed", [rf"(?:random\s*)?(?:seed|随机种子|种子)\s*(?:[:：=]|为|of)?\s*{NUM}"]),
    (
        "max_eval_samples",
        [
            rf"(?:评估|eval(?:uate)?(?:uation)?\s*(?:on)?)\s*{NUM}\s*(?:条|个|samples?|prompts?|examples?)",
        ],
    ),
]
INT_FLAGS = {
    "rft_steps",
    "max_train_steps",
    "batch_size",
    "gradient_accumulation_steps",
    "save_steps",
    "num_generations",
    "max_eval_samples",
    "seed",
}


def _numbers(t: RequestText, out: Parsed) -> None:
    for flag, patterns in NUMBER_RULES:
        for pattern in patterns:
            m = t.find(pattern)
            if not m:
                continue
            value = number(m.group(1), m.group(2))
            if flag in INT_FLAGS:
                if not value.is_integer():
                    raise UserError(f"request: {m.group(0).strip()!r}: --{flag} must be a whole number")
                value = int(value)
            out.flags[flag] = value
            t.consume(m)
            break


# --- GPU memory (the reference's table) --------------------------------------------------------------------

GPU_MEMORY = rf"(?:显存|gpu\s*memory|vram|memory)?\s*(?:[:：=]|为|是|of)?\s*{NUM}\s*(?:gb|g|gib)\b\s*(?:显存|的?显卡|gpu|vram|card|memory)?"


def batch_for_memory(gb: float) -> tuple[int, str]:
    """The reference's advice: 16 GB → 4–8, 32 GB → 16–32; the upper end below 32 GB, the lower above."""
    if gb < 16:
        return 4, f"{gb:g} GB is below the reference's smallest row (16 GB → 4–8): batch_size 4"
    if gb < 32:
        return 8, f"{gb:g} GB: the reference advises batch 4–8 for 16 GB; batch_size 8"
    if gb < 64:
        return 16, f"{gb:g} GB: the reference advises batch 16–32 for 32 GB; batch_size 16 (the safe end)"
    return 32, f"{gb:g} GB: above the reference's 32 GB row (16–32); batch_size 32"


def _gpu_memory(t: RequestText, out: Parsed) -> None:
    m = re.search(GPU_MEMORY.replace(r"\b", r"(?![a-z])"), t.rest, flags=re.IGNORECASE)
    if not m:
        return
    t.consume(m)
    gb = number(m.group(1), None)
    batch, why = batch_for_memory(gb)
    if "batch_size" in out.flags:
        low, high = (4, 8) if gb < 32 else (16, 32)
        if not low <= out.flags["batch_size"] <= high:
            out.assumptions.append(
                f"batch_size {out.flags['batch_size']} as asked, though the reference advises {low}–{high} "
                f"for {gb:g} GB"
            )
        return
    out.flags["batch_size"] = batch
    out.assumptions.append(f"GPU memory {why}")


# --- switches ----------------------------------------------------------------------------------------------

SWITCHES = [  # (pattern, flag, value)
    (
        r"不(?:要|用)?(?:做)?(?:自动)?评估|跳过评估|no\s+eval\w*|skip\s+eval\w*|without\s+eval\w*",
        "eval_auto",
        False,
    ),
    (r"(?:openclaw|龙虾)", "openclaw_env", True),
    (r"fp16|半精度|float16|混合精度", "fp16", True),
    (r"bf16|bfloat16", "bf16", True),
    (r"(?:cuda:\d+)", "device", None),
    (r"(?:在|on|use)?\s*(?:the\s+)?cpu\s*(?:上|only)?|(?:cpu)", "device", "cpu"),
    (r"(?:在|on|use)?\s*(?:a\s+|the\s+)?gpu\s*(?:上)?", "device", "cuda"),
    (r"心跳|heartbeat", "auto_heartbeat", True),
    (r"自动\s*(?:评估|评测)|auto(?:matic(?:ally)?)?[\s_-]*eval\w*|eval_auto", "eval_auto", True),
    (r"覆盖(?:输出目录|旧的?结果)?|overwrite", "overwrite_output_dir", True),
]


def _switches(t: RequestText, out: Parsed) -> None:
    for pattern, flag, value in SWITCHES:
        m = t.take(pattern)
        if m and flag not in out.flags:
            out.flags[flag] = m.group(0).strip().lower() if value is None else value
    if re.search(r"agent|智能体", t.original, flags=re.IGNORECASE) and "openclaw_env" not in out.flags:
        out.flags["openclaw_env"] = True
        out.assumptions.append("an agent is named: --openclaw_env True (check OpenClaw, deploy when present)")


# --- objectives → reward weights ---------------------------------------------------------------------------

OBJECTIVE_WEIGHT = rf"\s*(?:权重|weight(?:ed)?|[:：=]|x|×)\s*{NUM}"


def _objectives(t: RequestText, out: Parsed, known: list[str] | None) -> None:
    weights: dict[str, float] = {}
    for objective, (pattern, graders) in OBJECTIVES.items():
        m = t.find(f"(?:{pattern})(?:{OBJECTIVE_WEIGHT})?")
        if not m:
            continue
        t.consume(m)
        while t.take(pattern):  # "合规 ... 违规" names one objective
            pass
        grader = next((g for g in graders if known is None or g in known), None)
        if grader is None:
            out.assumptions.append(
                f"objective {objective}: no matching reward in this run's rewards ({', '.join(known or [])}); ignored"
            )
            continue
        weights[grader] = number(m.group(1), m.group(2)) if m.group(1) else NAMED_WEIGHT
        out.objectives.append(objective)
    if weights:
        out.flags["reward_weights"] = format_weights(weights)
        out.assumptions.append(
            f"objectives {', '.join(out.objectives)} → --reward_weights {format_weights(weights)} "
            "(named objectives count as much as the verdict; the other rewards keep the preset's weights)"
        )


# --- task --------------------------------------------------------------------------------------------------

TASK_NAME = (
    r"(?:task[\s_-]*name|任务名(?:称)?|名为|叫做|命名为|named|called)\s*(?:[:：=]|为|是)?\s*"
    r"[\"'“”‘’「」]?([\w\-+.]+)[\"'“”‘’「」]?"
)


def _task(t: RequestText, out: Parsed) -> None:
    m = t.take(TASK_NAME)
    task = None
    for pattern, label in TASKS:
        found = t.take(pattern)
        if found:
            task = label
            while t.take(pattern):
                pass
            break
    if m:
        out.flags["task_name"] = m.group(1)
    elif task:
        out.flags["task_name"] = f"{task}_agent_training"
        out.assumptions.append(f"task {task}: task_name {task}_agent_training (the reference's naming)")


# --- leftovers ---------------------------------------------------------------------------------------------


def _leftover(rest: str) -> list[str]:
    words = []
    for chunk in re.split(r"[\s,.;:!?，。；：！？、()（）\[\]【】\"'“”‘’「」+*/=]+", rest):
        chunk = re.sub(rf"^(?:{FILLER})+$", "", chunk, flags=re.IGNORECASE)
        if not chunk:
            continue
        for part in (
            re.split(rf"(?:{FILLER})+", chunk, flags=re.IGNORECASE)
            if re.search(r"[\u4e00-\u9fff]", chunk)
            else [chunk]
        ):
            if part and not re.fullmatch(r"[\W_\d]*", part):
                words.append(part)
    return words
