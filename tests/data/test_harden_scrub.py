"""The scrubber against the forms personal data once leaked through, and ``data collect`` end to end.

Table-driven: every sample of every family is checked in each form it reaches training data in (Chinese
text, English text, a JSON string, and a tool call's arguments, which ``data collect`` writes into the
assistant text and the ``tool_calls`` column, with a nested JSON string whose quotes are escaped).
Ordinary numbers (order ids, prices, dates) must survive, or the data stops being useful.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark_trainer.data.collect import _assistant
from ark_trainer.data.scrub import Scrubber


def luhn(prefix: str, length: int) -> str:
    """``prefix`` padded with 0s and completed with its Luhn check digit to ``length`` digits."""
    body = prefix.ljust(length - 1, "0")
    digits = [int(c) for c in body]
    total = sum(d if i % 2 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return body + str((10 - total % 10) % 10)


def group(number: str, sizes: list[int], sep: str = " ") -> str:
    out, i = [], 0
    for size in sizes:
        out.append(number[i : i + size])
        i += size
    return sep.join(out)


CARD_19 = luhn("6222021", 19)
CARD_16 = luhn("4111", 16)
FULLWIDTH = str.maketrans("0123456789X@.", "０１２３４５６７８９Ｘ＠．")

# family -> [(fragment as written, fragment after scrubbing)]
FAMILIES: dict[str, list[tuple[str, str]]] = {
    "phone": [
        ("13812345678", "[PHONE]"),
        ("138-1234-5678", "[PHONE]"),
        ("138 1234 5678", "[PHONE]"),
        ("+86 138 1234 5678", "[PHONE]"),
        ("+86-138-1234-5678", "[PHONE]"),
        ("+8613812345678", "[PHONE]"),
        ("(+86)138-1234-5678", "[PHONE]"),
        ("0086 13812345678", "[PHONE]"),
        ("13812345678".translate(FULLWIDTH), "[PHONE]"),
        ("010 8888 1234", "[PHONE]"),
    ],
    "id_number": [
        ("11010519491231002X", "[ID_NUMBER]"),
        ("110105194912310021", "[ID_NUMBER]"),
        ("110105 19491231 002X", "[ID_NUMBER]"),
        ("110105-19491231-0021", "[ID_NUMBER]"),
        ("1101 0519 4912 3100 2X", "[ID_NUMBER]"),
        ("110105491231002", "[ID_NUMBER]"),  # the old 15-digit form
        ("11010519491231002X".translate(FULLWIDTH), "[ID_NUMBER]"),
    ],
    "card_number": [
        (CARD_16, "[CARD_NUMBER]"),
        (group(CARD_16, [4, 4, 4, 4]), "[CARD_NUMBER]"),
        (group(CARD_16, [4, 4, 4, 4], "-"), "[CARD_NUMBER]"),
        (group(CARD_19, [4, 4, 4, 4, 3]), "[CARD_NUMBER]"),
        (group(CARD_19, [6, 13]), "[CARD_NUMBER]"),
        (group("378282246310005", [4, 6, 5]), "[CARD_NUMBER]"),  # Amex
        (luhn("4222", 13), "[CARD_NUMBER]"),
        (group(luhn("2221", 16), [4, 4, 4, 4]), "[CARD_NUMBER]"),  # Mastercard 2-series
        (group(CARD_16, [4, 4, 4, 4]).translate(FULLWIDTH), "[CARD_NUMBER]"),
    ],
    "api_key": [
        ("AKIAIOSFODNN7EXAMPLE", "[API_KEY]"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "[API_KEY]"),  # AWS secret access key shape
        ("LTAI5tRqvXg9bKzP8wY3mN2c", "[API_KEY]"),  # Alibaba Cloud AccessKey id
        ("AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA", "[API_KEY]"),  # Tencent Cloud SecretId
        ("sk-abcdefghijklmnopqrstuvwxyz123456", "[API_KEY]"),
        ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv", "[API_KEY]"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "[API_KEY]"),
        ("hf_abcdefghijklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("xoxb-1234567890-abcdefghij", "[API_KEY]"),
    ],
    "token": [
        ("api_key=abcd1234efgh5678", "api_key=[TOKEN]"),
        ('"api_key": "abcd1234efgh5678"', '"api_key": "[TOKEN]"'),
        ("X-Api-Key: abcd1234efgh5678", "X-Api-Key: [TOKEN]"),
        ("aws_secret_access_key = Zx9Yw8Xv7Wu6Vt5Us4Tr3Sq2Rp1Qo0PnMlKjIh", "aws_secret_access_key = [TOKEN]"),
        ('"AccessKeySecret": "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1"', '"AccessKeySecret": "[TOKEN]"'),
        ("client_secret: abcdEFGH12345678", "client_secret: [TOKEN]"),
        ("access_token=ya29.a0AfH6SMBx1234", "access_token=[TOKEN]"),
        ("Authorization: Bearer abcdefghijklmnop1234567890", "Authorization: Bearer [TOKEN]"),
    ],
    "password": [
        ("密码：abc123", "密码：[PASSWORD]"),
        ("密码: Passw0rd!", "密码: [PASSWORD]"),
        ("登录密码=qwer1234", "登录密码=[PASSWORD]"),
        ("口令是 hunter22", "口令是 [PASSWORD]"),
        ("密码为Zz_998877", "密码为[PASSWORD]"),
        ("密码：" + "abc123".translate(FULLWIDTH), "密码：[PASSWORD]"),
        ("password: hunter2", "password: [PASSWORD]"),
        ("my password is S3cret!x", "my password is [PASSWORD]"),
        ("DB_PASSWORD=hunter2x", "DB_PASSWORD=[PASSWORD]"),
        ('"password": "hunter2x"', '"password": "[PASSWORD]"'),
        ("pwd=abcd1234", "pwd=[PASSWORD]"),
        ("PIN码：1234", "PIN码：[PASSWORD]"),
    ],
    "email": [
        ("bob.smith@corp.co.uk", "[EMAIL]"),
        ("zhang.san@example.cn", "[EMAIL]"),
        ("张三@例子.中国", "[EMAIL]"),
        ("josé@exämple.com", "[EMAIL]"),
        ("用户@公司.com", "[EMAIL]"),
        ("bob@corp.com".translate(FULLWIDTH), "[EMAIL]"),
    ],
}
CASES = [(family, raw, clean) for family, samples in FAMILIES.items() for raw, clean in samples]


def as_zh(text: str) -> str:
    return f"请帮我记一下：{text}，谢谢。"


def as_en(text: str) -> str:
    return f"Please note {text} for later.\nThanks"


def as_json(text: str) -> str:
    return json.dumps({"note": as_en(text), "备注": as_zh(text)}, ensure_ascii=False)


def as_tool_call(text: str) -> tuple[str, list[dict]]:
    """What ``data collect`` writes for a tool call carrying ``text``: the assistant text and the column."""
    nested = json.dumps({"body": as_zh(text), "raw": text}, ensure_ascii=False)  # escaped quotes inside
    return _assistant(
        [{"type": "toolCall", "name": "send", "arguments": {"body": as_en(text), "payload": nested}}]
    )


@pytest.mark.parametrize("form", [as_zh, as_en, as_json], ids=["zh", "en", "json"])
@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_family_in_text_and_json(family, raw, clean, form):
    s = Scrubber()
    assert s.text(form(raw)) == form(clean)
    assert set(s.counts) == {family}


@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_family_in_tool_call_arguments(family, raw, clean):
    text, calls = as_tool_call(raw)
    want_text, want_calls = as_tool_call(clean)
    s = Scrubber()
    assert s.text(text) == want_text
    assert s.value(calls) == want_calls
    assert set(s.counts) == {family}


def test_keys_of_the_tool_call_arguments_themselves():
    args = {"api_key": "abcd1234efgh5678", "password": "hunter2x", "密码": "abc123", "to": "138-1234-5678"}
    text, calls = _assistant([{"type": "toolCall", "name": "login", "arguments": args}])
    s = Scrubber()
    out = s.text(text) + json.dumps(s.value(calls), ensure_ascii=False)
    for secret in args.values():
        assert secret not in out
    assert json.loads(s.value(calls)[0]["arguments"]) == {
        "api_key": "[TOKEN]",
        "password": "[PASSWORD]",
        "密码": "[PASSWORD]",
        "to": "[PHONE]",
    }


ORDINARY = [
    "订单号 2024112300001 已发货",
    "order 2024112300001 shipped, tracking 1Z999AA10123456784",
    "第2024112300001号订单，金额 ¥1,399.00，优惠 200 元",
    "price 1999 元, total 13999元, 1,234,567.89 USD",
    "订单号：202411230000123456",
    "订单号 138123456789 有 12 位，不是手机号",
    "card-like 1234 5678 9012 3456 is not a card (starts with 1)",
    "version 1.2.3 on 2026-11-30 at 12:30; room 1501, floor 15",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "path home/User1/Documents/Projects/MyApp2/src",
    "session ba09a082-5df7-4dd3-9636-d752b068922c",
    '{"max_tokens": 512, "total_tokens": 12345678, "tokenizer": "Qwen/Qwen2.5-0.5B-Instruct"}',
    "the password is wrong; 请输入密码；密码错误，请重试",
    "结论：违规\n类型：泄露隐私\n回复：非常抱歉给您带来不便。",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_numbers_and_words_are_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text
    assert not s.counts


# --- data collect end to end: no secret survives in any column ---

SECRETS = {
    "phone": "138-1234-5678",
    "phone_key": "+8613912345678",
    "email": "张三@例子.中国",
    "email_key": "alice@corp.com",
    "id": "110105 19491231 002X",
    "card": group(CARD_19, [4, 4, 4, 4, 3]),
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "ali": "LTAI5tRqvXg9bKzP8wY3mN2c",
    "password": "hunter2x",
    "api_value": "abcd1234efgh5678",
    "agent": "carol@corp.com",
}


def _transcript(path: Path, session_id: str) -> None:
    s = SECRETS
    user = (
        f"我的手机 {s['phone']}，邮箱 {s['email']}，身份证 {s['id']}，卡号 {s['card']}，密码：{s['password']}"
    )
    call = {
        "type": "toolCall",
        "name": "deploy",
        "arguments": {"api_key": s["api_value"], "env": json.dumps({"AWS_KEY": s["aws"], "ali": s["ali"]})},
    }
    entries = [
        {"type": "session", "id": session_id, "version": 3},
        {"type": "message", "message": {"role": "system", "content": f"owner {s['email_key']}"}},
        {"type": "message", "message": {"role": "user", "content": user}},
        {"type": "message", "message": {"role": "assistant", "content": [call]}},
        {"type": "message", "message": {"role": "toolResult", "content": f"password: {s['password']}"}},
        {"type": "message", "message": {"role": "assistant", "content": f"已通知 {s['phone']}"}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")


def collect(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARK_OPENCLAW_BIN": str(tmp_path / "no-openclaw"), "PYTHONWARNINGS": "ignore"}
    out = tmp_path / "collected.jsonl"
    return subprocess.run(
        [sys.executable, "-m", "ark_trainer", "data", "collect", "--openclaw", "-o", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collect_leaves_no_secret_in_any_column(tmp_path):
    state = Path(os.environ["OPENCLAW_STATE_DIR"])
    # A channel session: its key and id carry the peer's phone number and e-mail.
    key = f"whatsapp:{SECRETS['phone_key']}:{SECRETS['email_key']}"
    _transcript(state / "agents" / "main" / "sessions" / f"{key}.jsonl", f"sess-{SECRETS['phone_key']}")
    _transcript(state / "agents" / SECRETS["agent"] / "sessions" / "s2.jsonl", "s2")  # an agent named by mail
    result = collect(tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "collected.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 4
    dumped = text + json.dumps(rows, ensure_ascii=False)  # raw, and with escapes undone
    for name, secret in SECRETS.items():
        assert secret not in dumped, f"{name} leaked"
        assert secret.replace(" ", "") not in dumped.replace(" ", ""), f"{name} leaked (spaces)"
    assert "13912345678" not in dumped and "alice" not in dumped
    by_agent = {r["agent_id"]: r for r in rows}
    assert by_agent["main"]["session_key"] == "legacy:main:whatsapp:[PHONE]:[EMAIL]"
    assert by_agent["main"]["session_id"] == "sess-[PHONE]"
    assert by_agent["[EMAIL]"]["session_key"] == "legacy:[EMAIL]:s2"


def test_collect_skips_a_torn_last_line_with_a_warning(tmp_path):
    state = Path(os.environ["OPENCLAW_STATE_DIR"])
    path = state / "agents" / "main" / "sessions" / "live.jsonl"
    _transcript(path, "live")
    torn = json.dumps(
        {"type": "message", "message": {"role": "user", "content": "写到一半的消息"}}, ensure_ascii=False
    )
    with path.open("ab") as f:
        f.write(
            torn.encode("utf-8")[:-7]
        )  # cut mid-object and mid-character, no newline: still being written
    result = collect(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and str(path) in warnings[0] and "1 unreadable line" in warnings[0]
    rows = [
        json.loads(line) for line in (tmp_path / "collected.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(rows) == 2  # the rest of the session is kept


@pytest.mark.slow
def test_adversarial_text_is_scrubbed_in_linear_time():
    """Long runs that make a careless pattern quadratic (each start rescanning the run) finish quickly."""
    code = (
        "from ark_trainer.data.scrub import Scrubber\n"
        "s = Scrubber()\n"
        "for text in ['a-' * 200_000, '1 ' * 200_000, 'a@' * 100_000, 'x.' * 200_000 + '@', '7' * 400_000,\n"
        "             '密码' * 100_000, 'password_' * 50_000, 'Ab1/' * 100_000, '张' * 300_000 + '@']:\n"
        "    s.text(text)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
