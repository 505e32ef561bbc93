"""A synthetic customer-service quality-inspection (QC) data set, made from templates, in Chinese (the
default) or English.

Each row is one short dialogue between a customer (顾客) and an agent (客服), labelled with the one
violation type of :data:`ark_trainer.rewards.qc.VIOLATION_TYPES` it shows:

- 辱骂: the agent uses abusive words;          - 泄露隐私: the agent reveals someone else's phone / ID number;
- 违规承诺: the agent promises what it may not;  - 推诿: the agent deflects the customer elsewhere;
- 未致歉: the customer complains and the agent helps but never apologises;
- 无: clean: the agent apologises and helps.

Every customer opens with a complaint, so a clean dialogue and an 未致歉 one differ only by the agent's
apology. The other four types may or may not carry an apology: the cue decides, as in a real QC rule book
where the most serious breach names the case. Cues, scenarios, phrasings, names and numbers are drawn at
random from a seeded :class:`random.Random` (no global state), so the same seed gives the same rows.

Training rows may carry ``candidates``: two answers in the canonical format written by a noisy "historical
agent" (right type half the time, compliant reply half the time), for the RFT stage to score and select.

``lang="en"`` writes the same set in English (``data_en.py``: the same scenarios, cues and structure, for
a small English model that reads Chinese poorly): "Customer:" / "Agent:" dialogues and answers in
:func:`ark_trainer.rewards.qc.format_answer`'s English format (``Verdict:`` / ``Type:`` / ``Reply:``). The
``label`` column keeps the canonical (Chinese) type names in either language, so the graders, the metrics
and the report read both the same; an English row carries ``"lang": "en"`` (a Chinese row no ``lang``).

Run it::

    PYTHONPATH=src python -m ark_trainer.app.demo.data OUT_DIR [zh|en]   # writes OUT_DIR/train.jsonl, eval.jsonl
"""

from __future__ import annotations

import random
import re
import sys
import zlib
from collections.abc import Collection
from pathlib import Path

from ark_trainer.app.demo.data_en import ENGLISH
from ark_trainer.app.demo.phrasebook import Phrasebook, Scenario
from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import json_line
from ark_trainer.rewards.qc import CLEAN, VIOLATION_TYPES, format_answer

INSTRUCTION = "请质检以下客服对话，给出结论、类型和建议回复。"
# Share of each type in a generated set (clean ~30%, each violation ~14%).
TYPE_WEIGHTS: dict[str, float] = {
    "辱骂": 0.14,
    "泄露隐私": 0.14,
    "违规承诺": 0.14,
    "未致歉": 0.14,
    "推诿": 0.14,
    CLEAN: 0.30,
}
CANDIDATE_SHARE = 0.7  # share of training rows that carry candidates
N_CANDIDATES = 2
CANDIDATE_TYPE_ACCURACY = 0.5  # chance a historical candidate names the right type
CANDIDATE_COMPLIANT_SHARE = 0.5  # chance a historical candidate's reply is compliant
DIALOGUE_CHARS = (40, 110)  # dialogue length bounds (characters), so a tiny CPU model can read it
FLAW_KINDS = ("no_apology", "phone", "deflection", "promise")


SCENARIOS: dict[str, Scenario] = {
    "快递丢失": Scenario(
        (
            "我的快递{order}显示已签收，可我根本没收到",
            "单号{order}的包裹好几天没动静了，是不是丢了",
            "快递{order}找不到了，你们怎么回事",
            "东西说送到了，家里没人收过，单号{order}",
        ),
        ("那要等多久才有结果？", "我急着用，能快点吗？", "要是真丢了怎么办？"),
        (
            "我这边帮您查一下物流记录",
            "已为您登记丢件，会联系站点核实",
            "已经通知快递员回访确认",
            "我们会向网点核实签收情况",
        ),
        ("我们会尽快核实包裹去向", "马上帮您联系站点查找", "我们会跟进丢件并给您答复"),
    ),
    "退款": Scenario(
        (
            "我申请的退款一周了还没到账，订单{order}",
            "订单{order}退货都寄回去了，钱呢",
            "退款被驳回了，凭什么，订单{order}",
            "说好{days}天内退款，现在还没消息",
        ),
        ("到底什么时候能退？", "我要的是尽快到账。", "再拖我就投诉了。"),
        (
            "我帮您查一下退款进度",
            "系统显示仓库还在验收退货",
            "已为您提交加急审核",
            "退款会原路返回您的支付账户",
        ),
        ("我们会尽快为您处理退款", "马上帮您跟进退款进度", "我们会核实后加急处理"),
    ),
    "账单": Scenario(
        (
            "这个月账单多扣了我{amount}元",
            "我没开通的业务怎么也扣了{amount}元",
            "账单{order}里有一笔重复扣款",
            "为什么这个月费用突然多了{amount}元",
        ),
        ("多扣的钱能退吗？", "以后还会这样吗？", "你们得给个说法。"),
        (
            "我帮您查一下本月的扣费明细",
            "系统显示有一项增值业务在计费",
            "已为您提交账单复核",
            "已帮您关闭这项业务",
        ),
        ("我们会尽快为您核实扣费", "马上帮您复核账单", "我们会核实后处理多扣的费用"),
    ),
    "会员": Scenario(
        (
            "会员到期又自动续费扣了{amount}元",
            "开了会员{days}天还是看不了，怎么回事",
            "我攒的{amount}积分突然清零了",
            "买的年卡会员权益用不了，订单{order}",
        ),
        ("能帮我取消吗？", "积分能恢复吗？", "那我这钱不是白花了？"),
        (
            "我帮您查一下会员状态",
            "已为您关闭自动续费",
            "系统显示积分在本月初过期",
            "已经为您提交权益恢复申请",
        ),
        ("我们会尽快为您恢复会员权益", "马上帮您核实续费记录", "我们会跟进积分问题并尽快答复"),
    ),
    "售后维修": Scenario(
        (
            "刚买的洗衣机用了{days}天就坏了",
            "手机送修半个月了还没修好，单号{order}",
            "空调修好才{days}天又不制冷了",
            "约好的维修师傅又没来，工单{order}",
        ),
        ("能换新的吗？", "什么时候能修好？", "师傅到底什么时候来？"),
        ("我帮您重新预约师傅上门", "已为您登记报修，工单{order}", "我查一下维修进度", "已经催促维修中心加快"),
        ("我们会尽快安排师傅上门处理", "马上帮您催促维修进度", "我们会跟进维修直到解决"),
    ),
    "订单延迟": Scenario(
        (
            "订单{order}说好昨天发货，到现在还没发",
            "我买的东西{days}天了还在路上",
            "下单五天了还没出库，订单{order}",
            "预售说好{days}天内发，现在还没动静",
        ),
        ("到底哪天能到？", "能不能催一下？", "不行我就退了。"),
        ("我帮您催一下仓库发货", "系统显示订单已在打包", "已为您备注优先发货", "我查一下物流预计送达时间"),
        ("我们会尽快催促仓库发货", "马上帮您跟进物流进度", "我们会核实延迟原因并尽快处理"),
    ),
}

GREETINGS = ("您好，请问有什么可以帮您？", "您好，这里是客服中心，请讲。", "您好，很高兴为您服务。")
APOLOGIES = (
    "非常抱歉",
    "很抱歉给您添麻烦了",
    "不好意思让您久等了",
    "对不起，是我们的疏忽",
    "抱歉给您带来不便",
    "真的很抱歉",
)
# The cue of each violation type, in varied wordings; {other} {phone} {idno} are someone else's data.
CUES: dict[str, tuple[str, ...]] = {
    "辱骂": (
        "你是不是傻，这都看不懂",
        "烦死了，别再问了，闭嘴",
        "你有病吧，天天催",
        "真是个笨蛋，说多少遍了",
        "白痴都知道要等",
        "脑子进水了吧你",
        "爱要不要，滚",
        "问这种问题，废物一个",
        "神经病，自己看通知",
    ),
    "泄露隐私": (
        "上一位顾客{other}的电话是{phone}，您问问他",
        "收件人{other}的手机号{phone}，您直接打给他",
        "这单其实是{other}下的，身份证号{idno}",
        "{other}也投诉过，他电话{phone}",
        "账户登记人是{other}，号码{phone}",
        "{other}的身份证{idno}在系统里，您核对下",
    ),
    "违规承诺": (
        "我保证给您全额退款",
        "放心，一定给您双倍赔偿",
        "百分百明天就到",
        "绝对没问题，我私人包赔",
        "我承诺退您两倍的钱",
        "肯定赔您五百块",
        "我私下再补偿您三百元",
    ),
    "推诿": (
        "这事不归我管",
        "您自己去找快递公司",
        "这个找别人吧，别问我",
        "我也没办法，您去问商家",
        "这不是我们的问题，您找银行去",
        "跟我没关系，自己去网点问",
    ),
}
# Suggested-reply pieces: an apology clause (generic or fitting the type) and a help clause (per scenario).
REPLY_APOLOGIES = (
    "非常抱歉给您带来不便",
    "很抱歉让您久等了",
    "对不起给您添麻烦了",
    "不好意思让您着急了",
    "抱歉影响了您的体验",
    "真诚向您致歉",
)
TYPE_APOLOGIES: dict[str, tuple[str, ...]] = {
    "辱骂": ("对客服的不当言语深表歉意", "很抱歉客服态度不好"),
    "泄露隐私": ("抱歉刚才的信息不该透露", "对信息泄露深表歉意"),
    "违规承诺": ("抱歉之前的答复不准确", "对不起刚才说法有误"),
    "推诿": ("抱歉刚才没有及时帮您", "对不起没能第一时间处理"),
}
FLAWED_REPLIES: dict[str, tuple[str, ...]] = {
    "no_apology": ("{fix}，请耐心等待。", "请耐心等待，{fix}。", "{fix}。"),
    "phone": ("您可以直接联系{phone}。", "已记下号码{phone}，{fix}。", "对方电话是{phone}，您自己联系。"),
    "deflection": (
        "这事不归我管，您问问别处。",
        "您自己去找商家处理吧。",
        "这个您找别人吧。",
        "我也没办法，请另找渠道。",
    ),
    "promise": (
        "我们保证全额退款，请放心。",
        "一定全额赔偿，您放心。",
        "百分百给您解决，包赔。",
        "我们承诺退款并双倍赔偿。",
    ),
}
SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高"
GIVEN_NAMES = (*"伟芳娜敏静强磊洋艳勇军杰婷涛明超", "秀英", "建华")
PHONE_RE = re.compile(r"(?<!\d)1[3-9]\d{9}(?!\d)")


CHINESE = Phrasebook(
    lang="zh",
    instruction=INSTRUCTION,
    customer="顾客：",
    agent="客服：",
    scenarios=SCENARIOS,
    greetings=GREETINGS,
    apologies=APOLOGIES,
    cues=CUES,
    reply_apologies=REPLY_APOLOGIES,
    type_apologies=TYPE_APOLOGIES,
    flawed_replies=FLAWED_REPLIES,
    short_apologies=("抱歉", "不好意思"),
    surnames=SURNAMES,
    given_names=GIVEN_NAMES,
    name_format="{surname}{given}",
    comma="，",
    full_stop="。",
    end_marks="。？！",
    dialogue_chars=DIALOGUE_CHARS,
    capitalise=False,
)
PHRASEBOOKS: dict[str, Phrasebook] = {"zh": CHINESE, "en": ENGLISH}
LANGS = tuple(PHRASEBOOKS)  # the languages of the demo data; the first is the default


def phrasebook(lang: str) -> Phrasebook:
    """The phrase tables of ``lang`` (``zh`` or ``en``)."""
    if lang not in PHRASEBOOKS:
        raise UserError(f"--lang: {lang!r} is not a language of the demo data; use one of {', '.join(LANGS)}")
    return PHRASEBOOKS[lang]


def row_lang(row: dict) -> str:
    """The language a generated row is written in (a row without ``lang`` is Chinese)."""
    return row.get("lang", "zh")


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _slots(rng: random.Random, book: Phrasebook = CHINESE) -> dict[str, str]:
    """Random order number, day count, amount, third-party name, phone and ID number for one dialogue."""
    year, month, day = rng.randint(1960, 2004), rng.randint(1, 12), rng.randint(1, 28)
    return {
        "order": rng.choice(("JD", "SF", "TB", "DD")) + _digits(rng, 8),
        "days": str(rng.randint(2, 15)),
        "amount": str(rng.randint(20, 599)),
        "other": book.name_format.format(
            surname=rng.choice(book.surnames), given=rng.choice(book.given_names)
        ),
        "phone": "1" + rng.choice("3456789") + _digits(rng, 9),
        "idno": f"{_digits(rng, 6)}{year}{month:02d}{day:02d}{_digits(rng, 3)}{rng.choice('0123456789X')}",
    }


def _agent_lines(
    rng: random.Random, label: str, scenario: Scenario, n_turns: int, slots: dict, book: Phrasebook
) -> list[str]:
    """The agent's lines: help everywhere, the type's cue in one of them, an apology where the type allows."""
    lines = [h.format(**slots) for h in rng.sample(scenario.helps, n_turns)]
    if label in book.cues:
        at = rng.randrange(n_turns)
        cue = rng.choice(book.cues[label]).format(**slots)
        lines[at] = cue if rng.random() < 0.5 else f"{lines[at]}{book.comma}{cue}"
    apologise = label == CLEAN or (label != "未致歉" and rng.random() < 0.5)
    if apologise:
        lines[0] = f"{rng.choice(book.apologies)}{book.comma}{lines[0]}"
    return [book.sentence(line) for line in lines]


def _dialogue(rng: random.Random, label: str, scenario_name: str, book: Phrasebook) -> str:
    scenario, slots = book.scenarios[scenario_name], _slots(rng, book)
    n_turns = rng.choice((1, 2))
    agent = _agent_lines(rng, label, scenario, n_turns, slots, book)
    customer = [rng.choice(scenario.complaints).format(**slots), rng.choice(scenario.follow_ups)]
    lines = [] if rng.random() < 0.8 else [f"{book.agent}{rng.choice(book.greetings)}"]
    for turn in range(n_turns):
        lines += [f"{book.customer}{book.sentence(customer[turn])}", f"{book.agent}{agent[turn]}"]
    return "\n".join(lines)


def _bounded_dialogue(rng: random.Random, label: str, scenario_name: str, book: Phrasebook) -> str:
    """A dialogue whose length lies within the phrasebook's ``dialogue_chars`` (redrawn until it does)."""
    low, high = book.dialogue_chars
    for _ in range(100):
        text = _dialogue(rng, label, scenario_name, book)
        if low <= len(text) <= high:
            return text
    return text


def compliant_reply(rng: random.Random, scenario: str, label: str | None = None, lang: str = "zh") -> str:
    """A suggested reply that apologises and offers help (Chinese: 10–30 characters), with nothing
    forbidden."""
    book = phrasebook(lang)
    apologies = book.reply_apologies + book.type_apologies.get(label or "", ())
    reply = f"{rng.choice(apologies)}{book.comma}{rng.choice(book.scenarios[scenario].fixes)}"
    return book.start(reply) + book.full_stop


def flawed_reply(
    rng: random.Random, scenario: str, question: str = "", kind: str | None = None, lang: str = "zh"
) -> str:
    """A suggested reply with one flaw of :data:`FLAW_KINDS`: no apology, a copied phone number, deflection or a
    promise. A phone number in ``question`` is the one copied; otherwise a random one is made up."""
    book = phrasebook(lang)
    kind = kind or rng.choice(FLAW_KINDS)
    phones = PHONE_RE.findall(question)
    phone = phones[0] if phones else _slots(rng, book)["phone"]
    reply = rng.choice(book.flawed_replies[kind]).format(
        fix=rng.choice(book.scenarios[scenario].fixes), phone=phone
    )
    if kind != "no_apology" and rng.random() < 0.5:
        reply = f"{rng.choice(book.short_apologies)}{book.comma}{reply}"
    return book.start(reply)


def _candidates(rng: random.Random, row: dict, lang: str) -> list[str]:
    """Answers from a noisy historical agent: right type and compliant reply each with probability 1/2."""
    answers = []
    for _ in range(N_CANDIDATES):
        label = row["label"]
        if rng.random() >= CANDIDATE_TYPE_ACCURACY:
            label = rng.choice([t for t in VIOLATION_TYPES if t != row["label"]])
        if rng.random() < CANDIDATE_COMPLIANT_SHARE:
            reply = compliant_reply(rng, row["scenario"], label, lang)
        else:
            reply = flawed_reply(rng, row["scenario"], row["question"], lang=lang)
        answers.append(format_answer(label, reply, lang=lang))
    return answers


def _label_plan(n: int, rng: random.Random) -> list[str]:
    """``n`` labels in the proportions of :data:`TYPE_WEIGHTS` (largest remainder), shuffled."""
    exact = {t: n * w for t, w in TYPE_WEIGHTS.items()}
    counts = {t: int(x) for t, x in exact.items()}
    by_remainder = sorted(exact, key=lambda t: exact[t] - counts[t], reverse=True)
    for t in by_remainder[: n - sum(counts.values())]:
        counts[t] += 1
    labels = [t for t, c in counts.items() for _ in range(c)]
    rng.shuffle(labels)
    return labels


def generate_rows(
    n: int,
    seed: int,
    split: str,
    with_candidates: bool,
    *,
    exclude: Collection[str] = (),
    lang: str = "zh",
) -> list[dict]:
    """``n`` labelled rows with distinct questions, none of them in ``exclude``; deterministic in ``seed``.

    ``lang``: ``zh`` (the default) or ``en``; the labels drawn for a seed are the same in both."""
    book = phrasebook(lang)
    rng = random.Random(f"ark-demo:{split}:{seed}")
    seen, rows = set(exclude), []
    for i, label in enumerate(_label_plan(n, rng)):
        scenario = rng.choice(sorted(book.scenarios))
        question = f"{book.instruction}\n{_bounded_dialogue(rng, label, scenario, book)}"
        while question in seen:
            question = f"{book.instruction}\n{_bounded_dialogue(rng, label, scenario, book)}"
        seen.add(question)
        row: dict = {"id": f"qc-{split}-{i:05d}", "question": question, "label": label, "scenario": scenario}
        if lang != "zh":
            row["lang"] = lang
        if with_candidates and rng.random() < CANDIDATE_SHARE:
            row["candidates"] = _candidates(rng, row, lang)
        rows.append(row)
    return rows


def gold_answer(row: dict) -> str:
    """The ideal answer for a row: its true type and a compliant reply (varied, fixed per question), in the
    row's language."""
    lang = row_lang(row)
    rng = random.Random(zlib.crc32(row["question"].encode("utf-8")))
    return format_answer(row["label"], compliant_reply(rng, row["scenario"], row["label"], lang), lang=lang)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json_line(row))


def write_demo_data(
    data_dir: Path, n_train: int = 800, n_eval: int = 300, seed: int = 0, lang: str = "zh"
) -> tuple[Path, Path]:
    """Write ``train.jsonl`` (with candidates) and ``eval.jsonl`` (without) under ``data_dir``, in ``lang``.

    Train and eval come from different seeds, and no eval dialogue repeats a train one."""
    train = generate_rows(n_train, seed, "train", with_candidates=True, lang=lang)
    train_questions = {row["question"] for row in train}
    eval_rows = generate_rows(
        n_eval, seed + 1, "eval", with_candidates=False, exclude=train_questions, lang=lang
    )
    assert not train_questions & {row["question"] for row in eval_rows}, "an eval dialogue leaked into train"
    if n_eval >= len(VIOLATION_TYPES):
        assert {row["label"] for row in eval_rows} == set(VIOLATION_TYPES), "a type is missing from eval"
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    train_path, eval_path = data_dir / "train.jsonl", data_dir / "eval.jsonl"
    _write_jsonl(train_path, train)
    _write_jsonl(eval_path, eval_rows)
    return train_path, eval_path


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_data")
    for written in write_demo_data(out, lang=sys.argv[2] if len(sys.argv) > 2 else "zh"):
        print(written)
