"""``train --env file.py:make_env``: RFT on sampled episodes and GRPO through TRL's tool loop, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.conftest import run_cli, save_tiny_qwen

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "agent_env" / "shop_env.py"
TEXTS = [
    "Tools:\n- lookup_order(order_id): Look up an order's status.",
    '<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": "A1"}}\n</tool_call>',
    "<tool_response>\norder A1: shipped\n</tool_response> Where is my order B2? It is pending.",
]


def agent_model(path: Path, template: str | None = AGENT_CHAT_TEMPLATE) -> Path:
    from transformers import AutoTokenizer

    save_tiny_qwen(path, texts=TEXTS, max_position_embeddings=512)
    tok = AutoTokenizer.from_pretrained(path)
    if template is not None:
        tok.chat_template = template
        tok.save_pretrained(path)
    return path


def shop_rows(n: int, greeting: str = "Hi") -> list[dict]:
    ids = ["A1", "B2", "C3", "D4"]
    return [
        {
            "prompt": [{"role": "user", "content": f"{greeting} {i}, where is order {ids[i % 4]}?"}],
            "order_id": ids[i % 4],
        }
        for i in range(n)
    ]


@pytest.mark.slow
def test_train_with_an_env_file_writes_agent_metrics(tmp_path):
    model = agent_model(tmp_path / "model")
    write_jsonl(tmp_path / "train.jsonl", shop_rows(8))
    write_jsonl(tmp_path / "eval.jsonl", shop_rows(4, "Hello"))
    out = tmp_path / "run"
    result = run_cli(
        "train", "--model_path", str(model), "--data_path", str(tmp_path / "train.jsonl"),
        "--eval_dataset", str(tmp_path / "eval.jsonl"), "--output_dir", str(out),
        "--env", f"{SHOP}:make_env", "--strategy", "RFT+GRPO", "--max_train_steps", "4", "--rft_steps", "2",
        "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "2", "--rft_min_reward", "0",
        "--max_completion_length", "24", "--max_turns", "2", "--logging_steps", "1", "--save_steps", "0",
        "--report_to", "none", "--device", "cpu",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("base", "rft", "grpo"):
        metrics = json.loads((out / "eval" / f"{name}.json").read_text())
        assert metrics["n"] == len((out / "data" / "test.jsonl").read_text().splitlines())  # the test half
        for key in ("task_success", "tool_call_validity", "mean_turns", "mean_tool_calls"):
            assert key in metrics
        assert 1 <= metrics["mean_turns"] <= 2
        assert metrics["episodes"] and metrics["episodes"][0]["messages"][0]["role"] == "user"
    selected = [json.loads(line) for line in (out / "data" / "rft_selected.jsonl").read_text().splitlines()]
    assert len(selected) == 8 and selected[0]["tools"][0]["function"]["name"] in (
        "lookup_order",
        "refund_order",
    )
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    grpo_logs = [e for e in events if e.get("event") == "metrics" and e.get("stage") == "grpo"]
    assert any("rewards/agent_turns/mean" in e for e in grpo_logs), grpo_logs[:2]
    report = (out / "report.md").read_text()
    assert "task_success" in report


@pytest.fixture(scope="module")
def shop_model(tmp_path_factory) -> Path:
    """The tiny agent model with the agent chat template, made once: the refusals below only read it."""
    return agent_model(tmp_path_factory.mktemp("shop") / "model")


@pytest.mark.parametrize(
    ("env", "template", "message", "in_process"),
    [
        # through the real process: its exit code and its whole stderr
        ("missing_env.py:make_env", AGENT_CHAT_TEMPLATE, "--env: no such file 'missing_env.py'", False),
        # through main() in this process: the same refusal path, without importing torch again (~5 s)
        (f"{SHOP}:make_nothing", AGENT_CHAT_TEMPLATE, "has no 'make_nothing'", True),
        pytest.param(  # imports TRL to check the template: ~30 s on a busy 2-core machine
            f"{SHOP}:make_env",
            "{% for m in messages %}{{ m['content'] }}{% endfor %}",
            "cannot render tool calls",
            False,
            marks=pytest.mark.slow,
        ),
    ],
)
def test_train_refuses_a_bad_env_or_template_in_one_line(
    tmp_path, monkeypatch, capfd, shop_model, env, template, message, in_process
):
    from ark_trainer.cli import main

    model = shop_model if template == AGENT_CHAT_TEMPLATE else agent_model(tmp_path / "model", template)
    write_jsonl(tmp_path / "train.jsonl", shop_rows(4))
    out = tmp_path / "run"
    argv = [
        "train", "--model_path", str(model), "--data_path", str(tmp_path / "train.jsonl"),
        "--output_dir", str(out), "--env", env,
    ]  # fmt: skip
    if in_process:
        monkeypatch.chdir(tmp_path)
        returncode, stderr = main(argv), capfd.readouterr().err
    else:
        result = run_cli(*argv, cwd=tmp_path)
        returncode, stderr = result.returncode, result.stderr
    assert returncode == 2, stderr[-2000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], stderr[-2000:]
    assert "Traceback" not in stderr and not (out / "run.yaml").exists()
