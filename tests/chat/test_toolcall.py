"""The shared <tool_call> text format: template rendering, parsing, TRL's parser agreeing with ours."""

from ark_trainer.base.chat.toolcall import format_tool_calls, parse_tool_calls
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE, attach_response_parser


def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: the order's id
    """
    return "shipped"


CALL = {"type": "function", "function": {"name": "lookup_order", "arguments": {"order_id": "A12"}}}
MSGS = [
    {"role": "user", "content": "where is A12?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "name": "lookup_order", "content": "shipped"},
    {"role": "assistant", "content": "It shipped."},
]


def _tok():
    from ark_trainer.app.demo.model import train_tokenizer

    tok = train_tokenizer(["where is lookup_order shipped", "<tool_call> </tool_call>"] * 4, vocab_size=300)
    tok.chat_template = AGENT_CHAT_TEMPLATE
    return attach_response_parser(tok)


def test_template_renders_tools_calls_and_results_with_an_assistant_mask():
    from trl.chat_template_utils import supports_tool_calling

    tok = _tok()
    assert supports_tool_calling(tok)
    text = tok.apply_chat_template(MSGS, tools=[lookup_order], tokenize=False)
    assert "- lookup_order(order_id): Look up an order." in text
    assert format_tool_calls([CALL]) in text
    assert "<tool_response>\nshipped\n</tool_response>" in text
    out = tok.apply_chat_template(
        MSGS, tools=[lookup_order], return_dict=True, return_assistant_tokens_mask=True
    )
    masked = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert "It shipped." in tok.decode(masked) and "where is" not in tok.decode(masked)


def test_parse_tool_calls_counts_malformed_blocks_and_decodes_string_arguments():
    text = 'hi <tool_call>{bad}</tool_call> <tool_call>{"name":"a","arguments":"{\\"x\\":1}"}</tool_call> <tool_call>{"n'
    content, calls, invalid = parse_tool_calls(text)
    assert content == "hi"
    assert calls == [{"type": "function", "function": {"name": "a", "arguments": {"x": 1}}}]
    assert invalid == 2
    assert parse_tool_calls(format_tool_calls([CALL])) == ("", [CALL], 0)


def test_trl_parser_reads_our_format():
    from trl.chat_template_utils import parse_response

    tok = _tok()
    prefix = tok.apply_chat_template(MSGS[:1], tools=[lookup_order], add_generation_prompt=True)
    prefix = prefix["input_ids"] if isinstance(prefix, dict) or hasattr(prefix, "keys") else prefix
    ids = tok(format_tool_calls([CALL]) + "<|im_end|>", add_special_tokens=False)["input_ids"]
    parsed = parse_response(tok, ids, prefix=list(prefix), tools=[lookup_order])
    assert parsed["tool_calls"] == [CALL]


def test_the_hint_variant_adds_the_call_format_to_the_system_turn_only():
    from trl.chat_template_utils import supports_tool_calling

    from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE_WITH_HINT, TOOL_FORMAT_HINT

    tok = _tok()
    plain = tok.apply_chat_template(MSGS, tools=[lookup_order], tokenize=False)
    tok.chat_template = AGENT_CHAT_TEMPLATE_WITH_HINT
    assert supports_tool_calling(tok)
    hinted = tok.apply_chat_template(MSGS, tools=[lookup_order], tokenize=False)
    assert hinted == plain.replace(
        "Look up an order.<|im_end|>", f"Look up an order.{TOOL_FORMAT_HINT}<|im_end|>"
    )
    assert "To call a tool, write <tool_call>\n" in hinted
    out = tok.apply_chat_template(
        MSGS, tools=[lookup_order], return_dict=True, return_assistant_tokens_mask=True
    )
    masked = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert "To call" not in tok.decode(masked) and "It shipped." in tok.decode(masked)
