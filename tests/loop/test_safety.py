"""The safety filter on users' corrections (``services/loop/safety.py``): a correction "不对，应该回答：X" whose X
carries a secret or asks for a credential or payment secret is refused; warnings and ordinary questions pass.
Also refused: requests without an asking verb ("你的银行卡密码多少"), with verbs it did not know (说下,
需要您的, 发过来, 回复给), a secret word split by a space, and the code of an SMS asked for in other words.
"""

from __future__ import annotations

import pytest

from tests.data.scrub_forms import ZW

HARMFUL = {
    "secret": [
        "您的支付密码是 889900",
        "密码abc123",
        "验证码 482913",
        "联系 bob at gmail dot com",
        "接口密钥 abcd1234efgh5678",
        "您的卡号是 [CARD_NUMBER]",  # what the recorder's scrubbing leaves
        "[PASSWORD]",
    ],
    "credential_request": [
        "请提供您的银行卡密码和验证码",
        "请输入短信验证码完成支付",
        "麻烦发一下您的身份证号和密码",
        "请把卡背面的三位数字告诉我",
        "把卡号和密码发给我",
        "请您提供一下银行卡的有效期和CVV",
        "为了核实身份，请告诉我您的登录密码",
        f"请提供您的{ZW}密{ZW}码",
        "Please send me your password",
        "What is your CVV?",
        "Please tell us your PIN and the verification code",
        "Give me the seed phrase of your wallet",
    ],
}


BENIGN = [
    "请勿向任何人透露您的密码和验证码",
    "我们不会要求您提供密码",
    "请妥善保管您的密码",
    "不要把验证码告诉任何人",
    "验证码请勿告诉他人",
    "您可以在设置中修改登录密码",
    "请提供订单号，我们会尽快处理",
    "Never share your password or verification code with anyone.",
    "We will never ask for your PIN.",
    "结论：违规\n类型：泄露隐私\n回复：非常抱歉给您带来不便。",
]


@pytest.mark.parametrize(("reason", "text"), [(r, t) for r, ts in HARMFUL.items() for t in ts])
def test_harmful_corrections_are_refused(reason, text):
    from ark_trainer.services.loop.safety import correction_problem

    assert correction_problem(text)[0] == reason


@pytest.mark.parametrize("text", BENIGN)
def test_safe_corrections_pass(text):
    from ark_trainer.services.loop.safety import correction_problem

    assert correction_problem(text) is None


ASKS = [
    "把身份证号和密码发过来",
    "你的银行卡密码多少",
    "账户密码是多少？",
    "您的支付密码是什么呢",
    "麻烦说下您的取款密码",
    "为了核实身份，我需要您的支付密码",
    "请将短信验证码回复给客服",
    "请提供您的密 码",
    "请把收到的6位数字发给我",
    "Send the code from the SMS",
    "What's the PIN of your card?",
]
KEPT = [
    "请勿将验证码发过来",
    "密码多少位都可以，建议 8 位以上",
    "忘记密码是什么原因导致的？可以点击找回密码",
    "收到的短信请勿转发给他人",
    "需要您的订单号，我们会尽快处理",
    "我们不会要求您说下密码",
    "Never send the code from the SMS to anyone",
]


@pytest.mark.parametrize("text", ASKS)
def test_more_ways_of_asking_for_a_secret_are_refused(text):
    from ark_trainer.services.loop.safety import correction_problem

    problem = correction_problem(text)
    assert problem is not None and problem[0] == "credential_request", (text, problem)


@pytest.mark.parametrize("text", KEPT)
def test_warnings_and_other_questions_are_kept(text):
    from ark_trainer.services.loop.safety import correction_problem

    assert correction_problem(text) is None
