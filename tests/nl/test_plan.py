"""A request -> a plan (``services/nl/plan.py``, ``ark-trainer plan``): natural-language requests -> validated configs,
command lines, assumptions; never a system folder, a note when a folder leaves the working folder, and no
user code run (a python grader's code runs at ``run``).

The request table: >= 100 requests in varied styles, each checked field by field against its plan. Two
lists. ``HELD_OUT`` was written first, before the parser was extended for them, and was not looked at
while tuning the rules; it is checked as is, and a held-out request the rules still get wrong is marked
xfail with the reason (never dropped). ``TUNED`` is the set the rules were developed against.

Fields: strategy (as the config normalises it: RFT+GRPO, GRPO, auto), model_path, data_path,
output_dir, steps (--max_train_steps), rft_steps, lr (--grpo_learning_rate), rft_lr, batch, weights
(--reward_weights). A field not listed is not checked.

Run: PYTHONPATH=src python -m pytest tests/nl/test_plan.py -q
"""

from __future__ import annotations

import json
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import parse_weights
from ark_trainer.cli import build_parser, main, train_flags
from ark_trainer.core.config import resolve_config
from ark_trainer.services.nl.parse import batch_for_memory, parse_request
from ark_trainer.services.nl.plan import plan_request
from ark_trainer.stages.registry import config_class
from tests.conftest import refused
from tests.nl.code_graders import code_grader_spec


def test_a_plan_says_when_its_log_folder_leaves_the_working_folder(assets, tmp_path, capsys, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    base = ["--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    lines = refused(capsys, ["plan", "RFT+GRPO，日志 /etc/ark", *base])
    assert lines == [
        "error: request: --log_dir: '/etc/ark' is a system folder; give a folder of its own, e.g. ./runs/NAME"
    ]
    assert main(["plan", "only GRPO, logs ../../../elsewhere", *base, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["log_dir"] == "../../../elsewhere"
    assert any(
        a.startswith("--log_dir ../../../elsewhere is outside the working folder")
        for a in plan["assumptions"]
    )


def test_a_plan_never_proposes_a_system_folder_and_says_when_it_leaves_the_working_folder(
    assets, tmp_path, capsys, monkeypatch
):
    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    base = ["--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    lines = refused(capsys, ["plan", "RFT+GRPO，输出到 ../../../../../../../../../../etc", *base])
    assert len(lines) == 1 and "is a system folder" in lines[0] and lines[0].startswith("error: request:")
    assert main(["plan", "only GRPO, save to ../../elsewhere", *base, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["output_dir"] == "../../elsewhere"
    assert any("is outside the working folder" in a for a in plan["assumptions"]), plan["assumptions"]
    assert main(["plan", "only GRPO, save to ./runs/x", *base, "--json"]) == 0
    assert not any("outside" in a for a in json.loads(capsys.readouterr().out)["assumptions"])


def test_plan_runs_no_user_code_even_from_the_users_own_config(assets, tmp_path, capsys):
    spec, ran = code_grader_spec(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(f"reward_config: {spec}\n", encoding="utf-8")
    argv = ["plan", "only GRPO", "--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    assert main([*argv, "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reward_config"] == str(spec)
    assert not ran.exists()
    from ark_trainer.rewards.builder import build_reward  # what `run` does once confirmed: the code runs

    with pytest.raises(UserError, match="os:system"):  # the rule is imported and checked at run time
        build_reward({"reward_config": str(spec)}, [{"prompt": "q"}], "cpu")
    assert ran.read_text() == "ran"


@pytest.mark.parametrize(
    "name",
    ["..", ".", "...", ".hidden", "a..b", "x" * 300, "-rf", "客服质检_v2", "名字.txt", "\u202e", "con\x00"],
)
def test_a_task_name_becomes_one_safe_folder_name(name):
    from ark_trainer.services.nl.plan import safe_folder_name

    safe = safe_folder_name(name)
    assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
    assert not safe.startswith((".", "-")) and len(safe) <= 80 and safe.isprintable()
    if name.isidentifier() and len(name) <= 80:
        assert safe == name  # unicode letters are kept as they are


@pytest.mark.parametrize("task", ["..", "...", ".ssh", "..-x", "a" * 300])
def test_run_never_writes_outside_runs_from_a_parsed_task_name(assets, tmp_path, monkeypatch, task):
    from ark_trainer.services.nl.plan import plan_request

    monkeypatch.chdir(tmp_path)
    plan = plan_request(f"RFT+GRPO, task name {task}, model {assets['model']}, data {assets['train']}")
    out = Path(plan.cfg.output_dir)
    assert out.parent == Path("runs") and out.name not in ("", ".", "..") and not out.name.startswith(".")
    assert len(out.name) <= 80
    assert (tmp_path / out).resolve().parent == (tmp_path / "runs").resolve()


PATHS = {"model_path": "models/base", "data_path": "data/train.jsonl"}
QC_AGENT = "客服质检_agent_training"


# (request, expected config fields); requests without paths get PATHS as --model_path/--data_path
TABLE = [
    # the reference's own sentence, and Chinese variants
    (
        "对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度",
        {
            "strategy": "RFT+GRPO",
            "task_name": QC_AGENT,
            "openclaw_env": True,
            "reward_weights": "qc_compliance=1,qc_satisfaction=1",
        },
    ),
    ("仅GRPO快速迭代", {"strategy": "GRPO", "rft_steps": 0}),
    ("只用GRPO训练500步", {"strategy": "GRPO", "max_train_steps": 500, "rft_steps": 0}),
    ("快速迭代一下客服模型", {"strategy": "GRPO", "task_name": "智能客服_agent_training"}),
    (
        "自动选择策略，训练1万步，RFT 3000步，显存32G",
        {"strategy": "auto", "max_train_steps": 10000, "rft_steps": 3000, "batch_size": 16},
    ),
    (
        "先RFT再GRPO，总步数15000，RFT阶段5000步",
        {"strategy": "RFT+GRPO", "max_train_steps": 15000, "rft_steps": 5000},
    ),
    ("RFT+GRPO，学习率5e-6，批大小16", {"grpo_learning_rate": 5e-6, "batch_size": 16}),
    ("RFT学习率2e-4，GRPO学习率1e-5", {"rft_learning_rate": 2e-4, "grpo_learning_rate": 1e-5}),
    ("用16G显存的卡训练质检模型", {"batch_size": 8, "task_name": QC_AGENT}),
    ("显存 24GB，梯度累积2", {"batch_size": 8, "gradient_accumulation_steps": 2}),
    ("8G显存", {"batch_size": 4}),
    ("80GB显卡，仅GRPO", {"batch_size": 32, "strategy": "GRPO"}),
    ("训练2000步，每500步保存，预热0.1", {"max_train_steps": 2000, "save_steps": 500, "warmup_ratio": 0.1}),
    ("任务名 质检_v2，RFT+GRPO", {"task_name": "质检_v2"}),
    (
        "智能客服 RFT+GRPO，评估集 ./eval/，输出到 runs/v2",
        {"task_name": "智能客服_agent_training", "eval_dataset": "./eval/", "output_dir": "runs/v2"},
    ),
    (
        "模型 ./ckpt/qwen 数据 ./qc/train.jsonl RFT+GRPO 3000步",
        {"model_path": "./ckpt/qwen", "data_path": "./qc/train.jsonl", "max_train_steps": 3000},
    ),
    (
        "基座模型在 /models/qwen2，训练集 /data/a.jsonl，验证集 /data/b.jsonl",
        {"model_path": "/models/qwen2", "data_path": "/data/a.jsonl", "eval_dataset": "/data/b.jsonl"},
    ),
    ("不要评估，仅GRPO", {"eval_auto": False, "strategy": "GRPO"}),
    ("用fp16在cuda:0上训练", {"fp16": True, "device": "cuda:0"}),
    ("在CPU上跑，100步", {"device": "cpu", "max_train_steps": 100}),
    ("提升准确率和格式", {"reward_weights": "qc_verdict=1,qc_format=1"}),
    ("合规权重2，满意度权重0.5", {"reward_weights": "qc_compliance=2,qc_satisfaction=0.5"}),
    ("部署到OpenClaw，开启心跳", {"openclaw_env": True, "auto_heartbeat": True}),
    ("自动", {"strategy": "auto"}),
    ("你来选策略，5k步", {"strategy": "auto", "max_train_steps": 5000}),
    # English, terse and wordy
    ("RFT+GRPO", {"strategy": "RFT+GRPO", "max_train_steps": 1000, "rft_steps": 333}),
    ("only GRPO", {"strategy": "GRPO"}),
    ("just grpo, 300 steps", {"strategy": "GRPO", "max_train_steps": 300}),
    ("GRPO only with lr 5e-6", {"strategy": "GRPO", "grpo_learning_rate": 5e-6}),
    ("auto", {"strategy": "auto"}),
    ("let the tool decide the strategy, 8GB card", {"strategy": "auto", "batch_size": 4}),
    ("quick iteration please", {"strategy": "GRPO"}),
    (
        "Run RFT+GRPO on my QC agent for 10000 steps with batch size 8, model at ./models/qwen, "
        "data ./data/train.jsonl",
        {
            "task_name": QC_AGENT,
            "max_train_steps": 10000,
            "batch_size": 8,
            "model_path": "./models/qwen",
            "data_path": "./data/train.jsonl",
        },
    ),
    (
        "Please fine-tune our customer service agent with RFT then GRPO: 15k steps in total, RFT stage 5000 "
        "steps, learning rate 5e-6, gradient accumulation 2, warmup 0.1, save every 2000 steps, fp16 on cuda:0",
        {
            "strategy": "RFT+GRPO",
            "max_train_steps": 15000,
            "rft_steps": 5000,
            "grpo_learning_rate": 5e-6,
            "gradient_accumulation_steps": 2,
            "warmup_ratio": 0.1,
            "save_steps": 2000,
            "fp16": True,
            "device": "cuda:0",
        },
    ),
    (
        "optimize compliance and customer satisfaction",
        {"reward_weights": "qc_compliance=1,qc_satisfaction=1"},
    ),
    (
        "improve accuracy, 2k steps, batch 4",
        {"reward_weights": "qc_verdict=1", "max_train_steps": 2000, "batch_size": 4},
    ),
    ("focus on format", {"reward_weights": "qc_format=1"}),
    ("RFT then GRPO, skip eval, 64GB GPU", {"eval_auto": False, "batch_size": 32}),
    ("train on a 16 GB GPU", {"batch_size": 8}),
    ("32GB, batch size 64", {"batch_size": 64}),
    (
        "auto, model ~/ckpt/qwen2-0.5b, data /data/qc.jsonl, output /tmp/out, eval set /data/eval.jsonl",
        {
            "strategy": "auto",
            "model_path": "~/ckpt/qwen2-0.5b",
            "data_path": "/data/qc.jsonl",
            "output_dir": "/tmp/out",
            "eval_dataset": "/data/eval.jsonl",
        },
    ),
    ("task name cs_v3, RFT+GRPO, bf16", {"task_name": "cs_v3", "bf16": True}),
    (
        "customer service quality inspection, 1200 steps, rft 400 steps",
        {"task_name": QC_AGENT, "max_train_steps": 1200, "rft_steps": 400},
    ),
    ("batch size 6", {"batch_size": 6, "num_generations": 3}),
    (
        "RFT+GRPO with reward model ./rm, logs in ./logs/run1",
        {"rm_model_path": "./rm", "log_dir": "./logs/run1"},
    ),
    ("train with DPO, or RFT+GRPO if DPO is unavailable", {"strategy": "RFT+GRPO"}),
    ("训练一万步，RFT五千步", {"max_train_steps": 10000, "rft_steps": 5000}),
    ("RFT+GRPO，自动评估", {"strategy": "RFT+GRPO", "eval_auto": True}),
    ("GRPO with automatic evaluation", {"strategy": "GRPO", "eval_auto": True}),
    ("10,000 steps, 1.5k RFT steps", {"max_train_steps": 10000, "rft_steps": 1500}),
    (
        "temperature 0.7, 8 generations per prompt, seed 7",
        {"temperature": 0.7, "num_generations": 8, "seed": 7},
    ),
    ("把模型./m在数据./d.jsonl上用RFT+GRPO训练", {"model_path": "./m", "data_path": "./d.jsonl"}),
    (
        '模型 "/data/我的 模型" 数据 「/data/质检 数据.jsonl」',
        {"model_path": "/data/我的 模型", "data_path": "/data/质检 数据.jsonl"},
    ),
]


def _plan(request: str, **overrides):
    parsed = parse_request(request)
    paths = {} if "model_path" in parsed.flags else dict(PATHS)
    return plan_request(request, {**paths, **overrides})


def test_table_is_big_and_bilingual():
    assert len(TABLE) >= 40
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in r) for r, _ in TABLE) >= 15


@pytest.mark.parametrize(("request_text", "expected"), TABLE, ids=[r[:40] for r, _ in TABLE])
def test_request_table(request_text, expected):
    plan = _plan(request_text)
    got = {k: getattr(plan.cfg, k) for k in expected}
    assert got == expected
    # the command line parses back to the very same config (no defaults lost, quoting right)
    argv = shlex.split(plan.command)
    assert argv[:2] == ["ark-trainer-inner", "train"]
    again = resolve_config(config_class(), train_flags(build_parser().parse_args(argv[1:])))
    assert again.flag_items() == plan.cfg.flag_items()


def test_defaults_and_what_was_assumed_are_said():
    plan = _plan("RFT+GRPO")
    text = "\n".join(plan.assumptions)
    assert "--max_train_steps 1000" in text and "--batch_size 8" in text and "--output_dir runs/" in text
    plan = _plan("哈哈 banana 仅GRPO")
    assert plan.ignored == ["哈哈", "banana"]
    assert not _plan("对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度").ignored


def test_memory_table_matches_the_reference():
    assert [batch_for_memory(gb)[0] for gb in (8, 16, 24, 32, 48, 80)] == [4, 8, 8, 16, 16, 32]
    plan = _plan("16G显存，batch size 32")
    assert plan.cfg.batch_size == 32 and any("4–8" in a for a in plan.assumptions)


def test_ppo_is_refused_clearly():
    for request in ("use PPO please", "PPO训练客服模型", "ppo"):
        with pytest.raises(UserError, match="no longer ships PPO; ask for GRPO or RLOO"):
            _plan(request)
    plan = _plan("train with PPO, or RFT+GRPO if PPO is unavailable")
    assert plan.cfg.strategy == "RFT+GRPO"
    assert any("PPO not available (TRL no longer ships it)" in a for a in plan.assumptions)


def test_missing_model_or_data_names_the_fix():
    plan = plan_request("RFT+GRPO 1000步")  # never a dead end: the whole plan, the missing items marked
    assert [m.split(":")[0] for m in plan.missing] == ["--model_path", "--data_path"]
    assert "--model_path" in plan.missing[0].split(":", 1)[1] and "当前Agent" in plan.missing[1]
    assert plan.cfg.max_train_steps == 1000 and plan.as_json()["ready"] is False
    with pytest.raises(UserError, match="request: empty"):
        plan_request("  ", PATHS)


def test_overrides_win_and_bad_numbers_fail_validation():
    plan = plan_request("模型 ./a 数据 ./b.jsonl", {"model_path": "./c"})
    assert plan.cfg.model_path == "./c" and any("replaces './a'" in a for a in plan.assumptions)
    with pytest.raises(UserError, match="--rft_steps"):
        _plan("训练100步，RFT 500步")
    with pytest.raises(UserError, match="whole number"):
        _plan("batch size 2.5")


def test_cli_plan_yaml_is_a_run_config(tmp_path, capsys):
    request = "对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度，训练3000步"
    assert main(["plan", request, "--model_path", "m", "--data_path", "d.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "# assumption:" in out and "ark-trainer-inner train --strategy RFT+GRPO" in out
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(out, encoding="utf-8")
    cfg = resolve_config(config_class(), {"config": str(run_yaml)})
    assert cfg.max_train_steps == 3000 and cfg.reward_weights == "qc_compliance=1,qc_satisfaction=1"
    assert yaml.safe_load(out)["task_name"] == QC_AGENT


def test_cli_plan_json_and_errors(capsys):
    assert main(["plan", "仅GRPO 300步", "--json", "--model_path", "m", "--data_path", "d.jsonl"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy"] == "GRPO" and data["max_train_steps"] == 300 and data["rft_steps"] == 0
    assert data["command"].startswith("ark-trainer-inner train ") and data["source"] == "rules"
    assert main(["plan", "PPO", "--model_path", "m", "--data_path", "d.jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: request: PPO: TRL, the training library, no longer")
    assert (
        main(["run", "仅GRPO", "--model_path", "m", "--data_path", "d.jsonl"]) == 2
    )  # stdin not a tty, no --yes
    assert "--yes" in capsys.readouterr().err


@pytest.fixture
def qc_data(tmp_path):
    from ark_trainer.app.demo.data import write_demo_data

    train, _ = write_demo_data(tmp_path / "qc", n_train=12, n_eval=4, seed=1)
    return str(train)


def test_weights_are_checked_against_the_runs_rewards(qc_data, tmp_path):
    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.rewards.builder import build_reward

    plan = plan_request("优化合规性", {"model_path": "m", "data_path": qc_data})
    reward = build_reward(plan.cfg, read_jsonl(qc_data), "cpu")
    assert {c.name: c.weight for c in reward.components}["qc_compliance"] == 1.0  # preset says 0.5
    assert {c.name: c.weight for c in reward.components}["qc_satisfaction"] == 0.25
    with pytest.raises(
        UserError, match="--reward_weights: unknown reward 'politeness'; this run's rewards are qc_verdict"
    ):
        build_reward(config_class()(reward_weights="politeness=1"), read_jsonl(qc_data), "cpu")
    # free-text data gets the reference preset: accuracy → reference_match, compliance has no grader
    ref = tmp_path / "ref.jsonl"
    ref.write_text('{"prompt": "1+1?", "reference": "2"}\n', encoding="utf-8")
    plan = plan_request("improve accuracy and compliance", {"model_path": "m", "data_path": str(ref)})
    assert plan.cfg.reward_weights == "reference_match=1"
    assert any("objective compliance: no matching reward" in a for a in plan.assumptions)


def test_parse_weights_errors():
    assert parse_weights("a=1, b=0.5,") == {"a": 1.0, "b": 0.5}
    for bad in ("a", "a=x", "=1", "a=-1"):
        with pytest.raises(UserError, match="--reward_weights"):
            parse_weights(bad)

    from ark_trainer.rewards.builder import reweigh
    from ark_trainer.rewards.composite import Component

    with pytest.raises(UserError, match="weight > 0"):
        reweigh([Component("x", len, 1.0)], parse_weights("x=0"))


@pytest.fixture
def llm_server():
    answers: list[str] = []
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, **body})
            reply = {"choices": [{"message": {"role": "assistant", "content": answers.pop(0)}}]}
            data = json.dumps(reply).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", answers, seen
    server.shutdown()
    server.server_close()


def test_llm_answer_fills_the_config(llm_server, capsys):
    url, answers, seen = llm_server
    answers.append('```json\n{"strategy": "Only GRPO", "max_train_steps": "800", "batch_size": 16}\n```')
    argv = ["plan", "whatever the model reads", "--llm-base-url", url, "--llm-model", "tiny", "--json"]
    assert main([*argv, "--model_path", "m", "--data_path", "d.jsonl"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "llm:tiny"
    assert (data["strategy"], data["max_train_steps"], data["batch_size"]) == (
        "GRPO",
        800,
        16,
    )
    assert seen[0]["path"] == "/v1/chat/completions" and seen[0]["model"] == "tiny"
    assert "max_train_steps (int" in seen[0]["messages"][0]["content"]  # the schema is sent


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ('{"strategy": "PPO"}', "answer rejected: --strategy: 'PPO': TRL, the training library, no longer"),
        ('{"strategy": "SFT"}', "answer rejected: --strategy: unknown strategy 'SFT'"),
        ('{"batch_size": "many"}', "--llm-model tiny: batch_size: expected int, got 'many'"),
        ('{"max_train_steps": 10, "rft_steps": 50}', "answer rejected: --rft_steps: must be between 0"),
        ('{"learning_rate": 1e-5}', "--llm-model tiny: learning_rate: not a config field"),
        ("sure! I'd use GRPO.", "--llm-model tiny: the answer is not a JSON object"),
        ('["GRPO"]', "expected a JSON object of train flags, got list"),
    ],
)
def test_llm_invalid_answers_are_rejected(llm_server, capsys, answer, message):
    url, answers, _ = llm_server
    answers.append(answer)
    argv = [
        "plan",
        "x",
        "--llm-base-url",
        url,
        "--llm-model",
        "tiny",
        "--model_path",
        "m",
        "--data_path",
        "d.jsonl",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_llm_unreachable_is_one_line(capsys):
    argv = [
        "plan",
        "x",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--llm-model",
        "tiny",
        "--model_path",
        "m",
    ]
    assert main([*argv, "--data_path", "d.jsonl"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --llm-base-url: cannot reach http://127.0.0.1:9/v1/chat/completions"
    )


def test_run_asks_before_training(tmp_path, monkeypatch, capsys):
    out = tmp_path / "never"
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    argv = ["run", f"仅GRPO 输出到 {out}", "--model_path", "m", "--data_path", "d.jsonl"]
    assert main(argv) == 1
    assert "not started" in capsys.readouterr().out and not out.exists()


FIELDS = {
    "steps": "max_train_steps",
    "lr": "grpo_learning_rate",
    "rft_lr": "rft_learning_rate",
    "batch": "batch_size",
    "weights": "reward_weights",
}


HELD_OUT = [
    (
        "两步走：先拒绝采样微调再强化学习，模型 /ckpt/qwen-1.5b，数据 /data/chats.jsonl",
        {"strategy": "RFT+GRPO", "model_path": "/ckpt/qwen-1.5b", "data_path": "/data/chats.jsonl"},
    ),
    ("just grpo pls, 2k steps, lr 3e-6", {"strategy": "GRPO", "steps": 2000, "lr": 3e-6}),
    (
        "Train ./models/base on ./data/qc_train.jsonl with RFT then GRPO for 1,500 steps, save to ./out/exp7",
        {
            "strategy": "RFT+GRPO",
            "model_path": "./models/base",
            "data_path": "./data/qc_train.jsonl",
            "steps": 1500,
            "output_dir": "./out/exp7",
        },
    ),
    ("奖励微调 3千步 + GRPO，总共一万步", {"strategy": "RFT+GRPO", "rft_steps": 3000, "steps": 10000}),
    ("单步GRPO，batch 4，训练八百步", {"strategy": "GRPO", "batch": 4, "steps": 800}),
    ("自动选择训练策略吧，数据在 /srv/qc/all.json", {"strategy": "auto", "data_path": "/srv/qc/all.json"}),
    (
        "optimise compliance only, RFT+GRPO, 12k steps",
        {"strategy": "RFT+GRPO", "weights": "qc_compliance=1", "steps": 12000},
    ),
    (
        "用户满意度优先，只做GRPO，保存到 /tmp/run_sat",
        {"strategy": "GRPO", "weights": "qc_satisfaction=1", "output_dir": "/tmp/run_sat"},
    ),
    (
        "stratgy: rft+grpo, max_train_step=5000, batchsize 16",
        {"strategy": "RFT+GRPO", "steps": 5000, "batch": 16},
    ),
    (
        "Please do a two-stage run (RFT first, then GRPO) on /models/qc-7b using /data/qc.jsonl; "
        "output to /runs/qc7b",
        {
            "strategy": "RFT+GRPO",
            "model_path": "/models/qc-7b",
            "data_path": "/data/qc.jsonl",
            "output_dir": "/runs/qc7b",
        },
    ),
    ("快速迭代，1.2万步，学习率1e-5", {"strategy": "GRPO", "steps": 12000, "lr": 1e-5}),
    ("仅GRPO 五百步 显存16G", {"strategy": "GRPO", "steps": 500, "batch": 8}),
    (
        "RFT 2000 steps then GRPO, total 6000 steps, rft lr 1e-4",
        {"strategy": "RFT+GRPO", "rft_steps": 2000, "steps": 6000, "rft_lr": 1e-4},
    ),
    ("对质检模型做两阶段训练，数据 qc_v3.jsonl", {"strategy": "RFT+GRPO", "data_path": "qc_v3.jsonl"}),
    ("reinforcement learning only (GRPO), 20k steps", {"strategy": "GRPO", "steps": 20000}),
    (
        "let the tool pick the strategy, 3000 steps, batch size 8",
        {"strategy": "auto", "steps": 3000, "batch": 8},
    ),
    (
        "训练 /models/qwen2 用 /data/d2.jsonl，两步走，输出到 runs/qw2",
        {
            "strategy": "RFT+GRPO",
            "model_path": "/models/qwen2",
            "data_path": "/data/d2.jsonl",
            "output_dir": "runs/qw2",
        },
    ),
    (
        "GRPO only; learning-rate 2e-6; 750 steps; bs=2",
        {"strategy": "GRPO", "lr": 2e-6, "steps": 750, "batch": 2},
    ),
    ("合规性权重2，满意度权重1，RFT+GRPO", {"weights": "qc_compliance=2,qc_satisfaction=1"}),
    ("RFT+GRPO 训 两千五百步", {"strategy": "RFT+GRPO", "steps": 2500}),
    (
        "Fine-tune model_path=/m/base data_path=/d/x.jsonl with auto strategy",
        {"strategy": "auto", "model_path": "/m/base", "data_path": "/d/x.jsonl"},
    ),
    (
        "先做奖励微调再做强化学习 共8000步 其中RFT 2000步",
        {"strategy": "RFT+GRPO", "steps": 8000, "rft_steps": 2000},
    ),
    (
        "only grpo, 32GB gpu, save it to ./ckpts/g1",
        {"strategy": "GRPO", "batch": 16, "output_dir": "./ckpts/g1"},
    ),
    ("RFT+GRPO on customer-service QC, 0.5万步", {"strategy": "RFT+GRPO", "steps": 5000}),
    ("仅做GRPO，不要RFT，2.5k步", {"strategy": "GRPO", "steps": 2500}),
    (
        "quick iteration on /data/new.jsonl, 400 steps",
        {"strategy": "GRPO", "data_path": "/data/new.jsonl", "steps": 400},
    ),
    (
        "Rejection-sampling fine-tuning followed by GRPO, lr 5e-6, 3k steps",
        {"strategy": "RFT+GRPO", "lr": 5e-6, "steps": 3000},
    ),
]


TUNED = [
    # requests the first rules got wrong
    ("32G显存，对质检模型做两阶段训练：先奖励微调，再GRPO强化学习", {"strategy": "RFT+GRPO", "batch": 16}),
    (
        "用 /data/qc.jsonl 训练 /models/qwen 的 RFT+GRPO，输出到 /out/v3",
        {
            "strategy": "RFT+GRPO",
            "data_path": "/data/qc.jsonl",
            "model_path": "/models/qwen",
            "output_dir": "/out/v3",
        },
    ),
    ("对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度", {"strategy": "RFT+GRPO"}),
    # strategy vocabulary
    ("奖励微调", {"strategy": "RFT+GRPO"}),
    ("先奖励微调再强化学习", {"strategy": "RFT+GRPO"}),
    ("拒绝采样微调加GRPO", {"strategy": "RFT+GRPO"}),
    ("两阶段训练", {"strategy": "RFT+GRPO"}),
    ("两步走", {"strategy": "RFT+GRPO"}),
    ("两步走，先RFT后GRPO", {"strategy": "RFT+GRPO"}),
    ("强化学习", {"strategy": "GRPO"}),
    ("用强化学习训练一下", {"strategy": "GRPO"}),
    ("单步训练", {"strategy": "GRPO"}),
    ("单步GRPO", {"strategy": "GRPO"}),
    ("只做强化学习", {"strategy": "GRPO"}),
    ("仅强化学习，3000步", {"strategy": "GRPO", "steps": 3000}),
    ("只做GRPO", {"strategy": "GRPO"}),
    ("仅GRPO", {"strategy": "GRPO"}),
    ("快速迭代", {"strategy": "GRPO"}),
    ("自动选择", {"strategy": "auto"}),
    ("自动选择策略", {"strategy": "auto"}),
    ("策略自动选", {"strategy": "auto"}),
    ("RFT+GRPO", {"strategy": "RFT+GRPO"}),
    ("rft + grpo", {"strategy": "RFT+GRPO"}),
    ("RFT→GRPO", {"strategy": "RFT+GRPO"}),
    ("two-stage RFT and GRPO", {"strategy": "RFT+GRPO"}),
    ("two stages please", {"strategy": "RFT+GRPO"}),
    ("rejection sampling fine-tuning then GRPO", {"strategy": "RFT+GRPO"}),
    ("reward fine-tuning, then reinforcement learning", {"strategy": "RFT+GRPO"}),
    ("only GRPO", {"strategy": "GRPO"}),
    ("GRPO only", {"strategy": "GRPO"}),
    ("just reinforcement learning", {"strategy": "GRPO"}),
    ("single-step GRPO", {"strategy": "GRPO"}),
    ("fast iteration", {"strategy": "GRPO"}),
    ("auto", {"strategy": "auto"}),
    ("pick the strategy automatically", {"strategy": "auto"}),
    ("you decide the strategy", {"strategy": "auto"}),
    ("strategy=auto", {"strategy": "auto"}),
    ("stratagy auto", {"strategy": "auto"}),
    ("GPRO only", {"strategy": "GRPO"}),
    ("RTF+GRPO", {"strategy": "RFT+GRPO"}),
    # numbers with units
    ("RFT+GRPO 1.5万步", {"steps": 15000}),
    ("RFT+GRPO 15k steps", {"steps": 15000}),
    ("RFT+GRPO 五千步", {"steps": 5000}),
    ("RFT+GRPO 2千步", {"steps": 2000}),
    ("RFT+GRPO 1,500 steps", {"steps": 1500}),
    ("RFT+GRPO 3w步", {"steps": 30000}),
    ("train for 10K steps", {"steps": 10000}),
    ("训练一万五千步", {"steps": 15000}),
    ("训练两万步，其中RFT五千步", {"steps": 20000, "rft_steps": 5000}),
    ("max_train_steps=1200 rft_steps=300", {"steps": 1200, "rft_steps": 300}),
    ("max-train-steps 1200", {"steps": 1200}),
    ("max_trian_steps 900", {"steps": 900}),
    ("1.5k steps total, 500 of RFT", {"steps": 1500, "rft_steps": 500}),
    ("learning rate 1e-5", {"lr": 1e-5}),
    ("lr=2e-6, batch_size=4", {"lr": 2e-6, "batch": 4}),
    ("学习率 3e-6 批大小 8", {"lr": 3e-6, "batch": 8}),
    ("learnig rate 5e-6", {"lr": 5e-6}),
    ("batchsize 16", {"batch": 16}),
    ("batch-size: 2", {"batch": 2}),
    ("RFT学习率1e-4", {"rft_lr": 1e-4}),
    ("显存16G", {"batch": 8}),
    ("24GB VRAM", {"batch": 8}),
    # paths by shape
    ("train /models/qwen on /data/qc.jsonl", {"model_path": "/models/qwen", "data_path": "/data/qc.jsonl"}),
    ("训练 ./base 用 ./d.jsonl", {"model_path": "./base", "data_path": "./d.jsonl"}),
    ("用 data/train.json 训练 models/m1", {"data_path": "data/train.json", "model_path": "models/m1"}),
    ("/data/qc.jsonl /models/qwen RFT+GRPO", {"data_path": "/data/qc.jsonl"}),
    ("train ~/ckpt/base", {"model_path": "~/ckpt/base"}),
    ("RFT+GRPO，保存到 /out/a", {"output_dir": "/out/a"}),
    ("GRPO, output to runs/x", {"output_dir": "runs/x"}),
    ("输出到 /tmp/r1 ，数据 /tmp/d.jsonl", {"output_dir": "/tmp/r1", "data_path": "/tmp/d.jsonl"}),
    (
        "save to ./out/b, model ./m, data ./d.jsonl",
        {"output_dir": "./out/b", "model_path": "./m", "data_path": "./d.jsonl"},
    ),
    (
        "fine-tune /models/qwen2.5-0.5b with /data/x.jsonl",
        {"model_path": "/models/qwen2.5-0.5b", "data_path": "/data/x.jsonl"},
    ),
    # objectives → weights
    ("优化合规性", {"weights": "qc_compliance=1"}),
    ("提升用户满意度", {"weights": "qc_satisfaction=1"}),
    ("compliance and satisfaction", {"weights": "qc_compliance=1,qc_satisfaction=1"}),
    ("合规性权重3", {"weights": "qc_compliance=3"}),
    # wordy and mixed
    (
        "我想用RFT+GRPO训练一下我们的客服质检模型，大概跑1万步，显存是24G，学习率用1e-5，输出到 runs/qc_v9",
        {"strategy": "RFT+GRPO", "steps": 10000, "batch": 8, "lr": 1e-5, "output_dir": "runs/qc_v9"},
    ),
    (
        "Hey, could you run a quick GRPO-only pass on /data/chat.jsonl with /models/small, 300 steps please?",
        {"strategy": "GRPO", "data_path": "/data/chat.jsonl", "model_path": "/models/small", "steps": 300},
    ),
    ("帮我两阶段训练 model ./m data ./d.jsonl 2k steps", {"strategy": "RFT+GRPO", "steps": 2000}),
    ("RFT then GRPO, 5k步, lr 1e-5", {"strategy": "RFT+GRPO", "steps": 5000, "lr": 1e-5}),
]


def _fields(text: str, expected: dict) -> dict:
    plan = plan_request(text)
    return {k: getattr(plan.cfg, FIELDS.get(k, k)) for k in expected}


def test_table_size_and_split():
    assert len(TUNED) + len(HELD_OUT) >= 100 and len(HELD_OUT) * 4 >= len(TUNED) + len(HELD_OUT)


@pytest.mark.parametrize(("text", "expected"), TUNED, ids=[r[:40] for r, _ in TUNED])
def test_tuned(text, expected):
    assert _fields(text, expected) == expected


# Held-out requests the rules get wrong, found when the held-out set was first checked (26 of 27 right);
# kept as strict xfails with the reason, not tuned away.
HELD_OUT_WRONG = {
    "Please do a two-stage run (RFT first, then GRPO) on /models/qc-7b using /data/qc.jsonl; "
    "output to /runs/qc7b": "a folder after 'run … on' is not read as the model (only after 训练/train/用/with)",
}


def _held_out_cases() -> list:
    return [
        pytest.param(text, expected, marks=pytest.mark.xfail(reason=HELD_OUT_WRONG[text], strict=True))
        if text in HELD_OUT_WRONG
        else (text, expected)
        for text, expected in HELD_OUT
    ]


@pytest.mark.parametrize(("text", "expected"), _held_out_cases(), ids=[r[:40] for r, _ in HELD_OUT])
def test_held_out(text, expected):
    assert _fields(text, expected) == expected
