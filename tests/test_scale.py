"""Scale and speed: 2-process CPU (gloo) RFT+GRPO through accelerate, LoRA export, flag checks."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.config import resolve_config
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen

ZERO3 = Path(__file__).resolve().parent.parent / "examples" / "accelerate" / "deepspeed_zero3.yaml"


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    from ark_trainer.app.demo.data import write_demo_data

    root = tmp_path_factory.mktemp("scale")
    train, eval_ = write_demo_data(root / "data", n_train=16, n_eval=4, seed=5)
    texts = [r["question"] if "question" in r else str(r.get("prompt")) for r in read_jsonl(train)][:8]
    model = save_tiny_qwen(root / "model", texts=texts)
    return {"train": train, "eval": eval_, "model": model}


def _args(a: dict, out: Path, *extra: str) -> list[str]:
    line = (
        f"train --strategy RFT+GRPO --model_path {a['model']} --data_path {a['train']} --eval_dataset {a['eval']} "
        f"--output_dir {out} --max_train_steps 2 --rft_steps 1 --batch_size 4 --num_generations 2 "
        "--rft_num_samples 2 --max_completion_length 8 --rft_min_reward 0.0 --logging_steps 1 --save_steps 0 "
        "--heartbeat_interval 1 --device cpu"
    )
    return shlex.split(line) + list(extra)


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_two_cpu_processes_train_identical_replicas_and_one_consistent_run_dir(assets, tmp_path, capfd):
    from safetensors.torch import load_file

    from ark_trainer.core.runtime.distributed import weights_digest

    out = tmp_path / "run"
    assert main(_args(assets, out, "--num_processes", "2")) == 0
    assert capfd.readouterr().out.count("done: model in") == 1  # the launcher says it, not each process
    events = _events(out)
    # only the main process wrote: one run, one start, one end
    assert [e["event"] for e in events].count("run_start") == 1
    scale = next(e for e in events if e["event"] == "scale")
    assert (scale["processes"], scale["launcher"], scale["precision"]) == (2, "accelerate", "fp32")
    assert [e for e in events if e["event"] == "run_end"][0]["status"] == "finished"
    replicas = {e["stage"]: e for e in events if e["event"] == "replicas"}
    assert set(replicas) == {"rft", "grpo"}
    for rep in replicas.values():
        assert rep["processes"] == 2 and rep["identical"] and len(set(rep["digests"])) == 1
    # the exported model is exactly what both processes ended with
    import torch
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(str(out / "model"), dtype=torch.float32)
    assert weights_digest(saved) == replicas["grpo"]["digests"][0]
    assert load_file(str(out / "model" / "model.safetensors"))
    # RFT sampling was sharded and gathered: the prompts its budget samples, each once, in the budget's order
    train_rows = read_jsonl(out / "data" / "train.jsonl") if (out / "data" / "train.jsonl").exists() else None
    scored = read_jsonl(out / "data" / "rft_scored.jsonl")
    if train_rows is not None:
        from ark_trainer.rewards.scoring import budget_order

        selection = next(e for e in events if e["event"] == "rft_selection")
        seed = yaml.safe_load((out / "run.yaml").read_text())["seed"]
        order = budget_order(train_rows, selection.get("n_needed"), seed)
        assert [s["prompt"] for s in scored] == [r["prompt"] for r in order[: len(scored)]]
    assert len(scored) == len({json.dumps(s["prompt"]) for s in scored})
    for name in ("run.yaml", "plan.json", "heartbeat.json", "report.md", "eval/base.json", "eval/grpo.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "finished"
    # one set of TensorBoard folders (the main process's), no leftovers
    assert sorted(p.name for p in (out / "logs" / "tensorboard").iterdir()) == ["grpo", "rft"]
    assert not list(out.rglob(".*.adapter"))


@pytest.mark.slow
def test_lora_exports_merged_model_or_adapter_both_loadable(assets, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    merged, adapter = tmp_path / "merged", tmp_path / "adapter"
    lora = ["--lora_r", "4", "--lora_target_modules", "q_proj,v_proj", "--eval_auto", "False"]
    assert main(_args(assets, merged, *lora, "--gradient_checkpointing", "True")) == 0
    assert (merged / "model" / "model.safetensors").is_file()
    assert not (merged / "model" / "adapter_config.json").exists()
    m = AutoModelForCausalLM.from_pretrained(str(merged / "model"))
    base = AutoModelForCausalLM.from_pretrained(str(assets["model"]))
    changed = [
        n for n, p in m.state_dict().items() if not torch.equal(p, base.state_dict()[n])
    ]  # LoRA merged into the targeted projections only
    assert changed and all(("q_proj" in n or "v_proj" in n) for n in changed)

    assert main(_args(assets, adapter, *lora, "--save_adapter_only", "True")) == 0
    cfg = json.loads((adapter / "model" / "adapter_config.json").read_text())
    assert Path(cfg["base_model_name_or_path"]).is_absolute()
    assert not (adapter / "model" / "model.safetensors").exists()
    a = AutoModelForCausalLM.from_pretrained(str(adapter / "model"))
    ids = torch.tensor([[1, 2, 3]])
    assert a(ids).logits.shape[-1] == m(ids).logits.shape[-1]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--load_in_4bit", "True"], "--load_in_4bit: QLoRA trains adapters on a 4-bit base"),
        (
            ["--load_in_4bit", "True", "--lora_r", "8"],
            "--load_in_4bit: QLoRA needs bitsandbytes and a CUDA GPU",
        ),
        (["--use_vllm", "True"], "--use_vllm: vLLM rollouts need the vllm package and a CUDA GPU"),
        (["--vllm_mode", "remote"], "--vllm_mode: unknown mode 'remote'"),
        (["--save_adapter_only", "True"], "--save_adapter_only: there is no adapter without LoRA"),
        (["--mixed_precision", "fp8"], "--mixed_precision: unknown value 'fp8'"),
        (["--accelerate_config", "nope.yaml"], "--accelerate_config: no such file 'nope.yaml'"),
        (
            ["--accelerate_config", str(ZERO3)],
            f"--accelerate_config: {ZERO3} uses DeepSpeed, which needs CUDA GPUs",
        ),
    ],
)
def test_unavailable_scale_options_are_refused_in_one_line(assets, tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    assert main(_args(assets, out, *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith(f"error: {message}") for line in err), err
    assert not out.exists()


def test_launch_command_forwards_the_resolved_flags(assets, tmp_path):
    from ark_trainer.core.runtime import launch
    from ark_trainer.services.planning import launch_settings

    def launch_command(cfg, use_cpu):  # with what the pipeline passes for the run's config
        return launch.launch_command(launch_settings(cfg), use_cpu)

    cfg = resolve_config(
        config_class(),
        {"model_path": str(assets["model"]), "data_path": str(assets["train"]), "output_dir": str(tmp_path)}
        | {"num_processes": "2", "lora_r": "8"},
    )
    cmd = launch_command(cfg, use_cpu=True)
    i = cmd.index("-m", 2)
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"] and "--multi_gpu" in cmd
    assert cmd[i + 1 : i + 3] == ["ark_trainer", "train"]
    flags = cmd[i + 3 :]
    assert flags[flags.index("--lora_r") + 1] == "8" and flags[flags.index("--num_processes") + 1] == "2"
    again = resolve_config(config_class(), {k[2:]: v for k, v in zip(flags[::2], flags[1::2], strict=True)})
    assert again.flag_items() == cfg.flag_items()
    cfg = dataclasses.replace(
        cfg, num_processes=1
    )  # --launcher accelerate alone: one process (accelerate refuses --multi_gpu with 1)
    assert "--multi_gpu" not in launch_command(cfg, use_cpu=True) and "--cpu" in launch_command(
        cfg, use_cpu=True
    )
    cfg = dataclasses.replace(cfg, accelerate_config="zero3.yaml")
    cmd = launch_command(cfg, use_cpu=False)
    assert cmd[3:5] == ["--config_file", "zero3.yaml"] and "--multi_gpu" not in cmd


def test_relaunch_runs_the_launch_command_as_the_launched_child(monkeypatch):
    from types import SimpleNamespace

    from ark_trainer.core.runtime import launch

    ran: dict = {}

    def run(cmd, env, check):
        ran.update(cmd=cmd, env=env)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(launch.subprocess, "run", run)
    launch.relaunch(launch.LaunchSettings(2, None, 29511, True, ("--seed", "1")), use_cpu=True)
    assert ran["env"][launch.CHILD_ENV] == "1" and ran["env"]["ACCELERATE_USE_CPU"] == "true"
    assert ran["cmd"][-4:] == ["--seed", "1", "--resume", "True"]
    assert ran["cmd"][ran["cmd"].index("--main_process_port") + 1] == "29511"


def test_auto_precision_choice():
    from ark_trainer.base.scale import auto_precision

    assert auto_precision("auto", "cpu", False, False) == (False, False, None)
    assert auto_precision("auto", "cuda:0", True, False)[:2] == (True, False)  # --fp16 True wins
    assert auto_precision("no", "cuda:0", False, False)[:2] == (False, False)
    assert auto_precision("bf16", "cuda:0", False, False)[:2] == (False, True)


def test_rft_sampling_is_one_generate_call_per_batch_and_keeps_prompt_order(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.loading import load_tokenizer

    path = save_tiny_qwen(tmp_path / "m")
    model, tok = AutoModelForCausalLM.from_pretrained(str(path)).eval(), load_tokenizer(path)
    prompts = [[{"role": "user", "content": "hello " * n + "world"}] for n in (1, 7, 3, 12, 5)]
    calls = []
    real = model.generate

    def counting(*args, **kwargs):
        calls.append((kwargs["input_ids"].shape[0], kwargs["num_return_sequences"], kwargs["use_cache"]))
        return real(*args, **kwargs)

    model.generate = counting
    out = generate(model, tok, prompts, num_samples=3, temperature=1.0, max_new_tokens=4, batch_size=2)
    assert [len(s) for s in out] == [3] * 5
    assert calls == [
        (2, 3, True),
        (2, 3, True),
        (1, 3, True),
    ]  # N samples per call, prompts batched, cache on
    calls.clear()
    greedy = generate(model, tok, prompts, max_new_tokens=4, batch_size=2)
    alone = [generate(model, tok, [p], max_new_tokens=4)[0] for p in prompts]
    assert greedy == alone  # answers come back in the prompts' order despite the length sort
    assert torch.is_grad_enabled()


def test_example_accelerate_configs_load_and_are_documented():
    from accelerate.commands.config.config_args import load_config_from_file

    root = Path(__file__).resolve().parent.parent
    readme = (root / "docs" / "scale.md").read_text(encoding="utf-8")
    files = sorted((root / "examples" / "accelerate").glob("*.yaml"))
    assert {f.name for f in files} >= {
        "multi_gpu.yaml",
        "two_nodes.yaml",
        "deepspeed_zero3.yaml",
        "fsdp.yaml",
    }
    for f in files:
        cfg = load_config_from_file(str(f))  # accelerate's own parser: unknown keys are an error
        assert cfg.num_processes >= 2
        assert f"--accelerate_config examples/accelerate/{f.name}" in readme, f.name
        assert f"--accelerate_config examples/accelerate/{f.name}" in f.read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_vllm_flags_map_onto_trl_grpo_config(assets, tmp_path, mode):
    from trl import GRPOConfig

    from ark_trainer.base.scale import vllm_grpo_kwargs
    from ark_trainer.stages.common import vllm_settings

    def vllm(cfg):  # the run's vLLM flags, as a stage reads them from its shared run flags
        return vllm_settings(cfg.run_flags())

    cfg = resolve_config(
        config_class(),
        {"model_path": str(assets["model"]), "data_path": str(assets["train"]), "output_dir": str(tmp_path)}
        | {
            "use_vllm": "True",
            "vllm_mode": mode,
            "vllm_server_port": "8123",
            "vllm_gpu_memory_utilization": "0.5",
        },
    )
    kwargs = vllm_grpo_kwargs(vllm(cfg))
    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, **kwargs
    )  # TRL's own names, accepted as they are
    assert args.use_vllm and args.vllm_mode == mode
    if mode == "server":
        assert (args.vllm_server_host, args.vllm_server_port) == ("127.0.0.1", 8123)
    else:
        assert args.vllm_gpu_memory_utilization == 0.5
    cfg = dataclasses.replace(cfg, use_vllm=False)
    assert vllm_grpo_kwargs(vllm(cfg)) == {}


def test_fp16_and_bf16_train_fp32_master_weights_and_bf16_weights_only_when_asked():
    import torch

    from ark_trainer.base.scale import trainer_model_kwargs
    from ark_trainer.core.models.device import Runtime

    assert (
        trainer_model_kwargs(False, Runtime("cuda:0", fp16=True, bf16=False, warnings=[]))["dtype"]
        == torch.float32
    )
    bf16 = Runtime("cuda:0", fp16=False, bf16=True, warnings=[])
    assert trainer_model_kwargs(False, bf16)["dtype"] == torch.float32  # autocast over fp32 weights
    bf16.bf16_weights = True  # --mixed_precision bf16_weights
    assert trainer_model_kwargs(False, bf16) == {}


def test_shards_cover_the_prompts_in_order():
    from types import SimpleNamespace

    from ark_trainer.core.runtime.distributed import Ranks

    items = list(range(10))
    for k in (1, 2, 3, 4, 11):
        parts = [Ranks(SimpleNamespace(num_processes=k, process_index=i)).shard(items) for i in range(k)]
        assert [x for p in parts for x in p] == items  # gather concatenates in rank order
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.slow
def test_the_hook_profile_times_our_callbacks_and_reward_guard(assets, tmp_path):
    """bench/hook_profile.py (the in-loop part of bench/overhead.py) still hooks into this transformers."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    prof = tmp_path / "hooks.json"
    args = _args(assets, tmp_path / "run", "--strategy", "GRPO", "--eval_auto", "False")
    cmd = [sys.executable, str(root / "bench" / "hook_profile.py"), "--profile_out", str(prof), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(prof.read_text())
    assert {"_MonitorCallback", "StepGuard", "TensorBoardCallback", "DefaultFlowCallback"} <= set(
        data["callbacks_s"]
    )
    assert data["callbacks_ours_s"] > 0 and data["reward_guard_calls"] > 0
    assert data["reward_guard_handoff_s"] >= 0 and data["reward_functions_s"] > 0


def test_fsdp_on_cpu_is_said_to_run_as_plain_data_parallel(tmp_path, capsys):
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.runtime.launch import check_engine

    check_engine(str(ZERO3.with_name("fsdp.yaml")), use_cpu=True)
    assert "FSDP, which shards only on GPUs" in capsys.readouterr().err
    check_engine(str(ZERO3.with_name("multi_gpu.yaml")), use_cpu=True)
    assert capsys.readouterr().err == ""
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: [unclosed\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"--accelerate_config: .*bad.yaml:2: not valid YAML"):
        check_engine(str(bad), use_cpu=True)
