"""What the scale/speed benchmarks share: the machine description, test assets, results files.

Not a benchmark itself. Each bench writes ``bench/results/<name>.md`` (for people) and ``.json`` (for
tools) with the machine it ran on, the exact command, and a ``label`` that says whether the numbers are
a measurement or a ``--quick`` smoke run.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LOAD_AT_START = os.getloadavg() if hasattr(os, "getloadavg") else None  # this module is imported at start
QUICK_LABEL = "SMOKE RUN (--quick, tiny settings, possibly on a busy machine): proves the script works; not a measurement"
FULL_LABEL = "measurement"


def machine() -> dict:
    """CPU model, cores, RAM, GPU and library versions of this machine."""
    import accelerate
    import peft
    import torch
    import transformers
    import trl

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    ram = None
    try:
        kb = next(
            line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
        )
        ram = round(int(kb.split()[1]) / 1024**2, 1)
    except (OSError, StopIteration):
        pass
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = f"{torch.cuda.device_count()} × {props.name} ({props.total_memory / 1024**3:.0f} GiB)"
    try:
        import vllm

        vllm_version = vllm.__version__
    except ImportError:
        vllm_version = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram,
        "gpu": gpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "accelerate": accelerate.__version__,
        "peft": peft.__version__,
        "vllm": vllm_version,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "load_average_at_start": LOAD_AT_START,
    }


def machine_line(m: dict) -> str:
    return (
        f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, GPU: {m['gpu'] or 'none'}; {m['os']}, "
        f"Python {m['python']}, torch {m['torch']}, transformers {m['transformers']}, trl {m['trl']}, "
        f"accelerate {m['accelerate']}, peft {m['peft']}, vllm {m['vllm'] or 'not installed'}; "
        f"load average (1, 5, 15 min) at the start {tuple(round(x, 2) for x in m['load_average_at_start'] or ())}, "
        f"at the end {tuple(round(x, 2) for x in m['load_average'] or ())}"
    )


def command_line() -> str:
    return shlex.join([Path(sys.executable).name, *sys.argv])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def write_results(
    name: str,
    md_lines: list[str],
    data: dict,
    quick: bool,
    out_dir: Path | None = None,
    label: str | None = None,
) -> Path:
    """Write ``<name>.md`` and ``<name>.json``; the label and the machine go at the top of both."""
    out_dir = Path(out_dir or RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    m = machine()
    label = label or (QUICK_LABEL if quick else FULL_LABEL)
    busy = [
        x
        for x in (m["load_average_at_start"] or ())[:1] + (m["load_average"] or ())[:1]
        if x > 0.5 * m["cores"] + 1
    ]
    if not quick and label == FULL_LABEL and busy:
        label += f" (caution: the 1-minute load average reached {max(busy):.1f} on {m['cores']} cores: other work shared the machine)"
    header = [
        md_lines[0],
        "",
        f"**{label}**",
        "",
        f"Machine: {machine_line(m)}",
        "",
        f"Command: `{command_line()}`",
        "",
    ]
    md = "\n".join(header + md_lines[1:]) + "\n"
    (out_dir / f"{name}.md").write_text(md, encoding="utf-8")
    payload = {"label": label, "quick": quick, "machine": m, "command": command_line(), **data}
    (out_dir / f"{name}.json").write_text(
        json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {out_dir / (name + '.md')} and {name}.json")
    return out_dir / f"{name}.md"


def make_assets(root: Path, n_train: int, hidden: int, layers: int, seed: int = 0, vocab: int = 1000) -> dict:
    """Demo QC data and a random-initialised Qwen2 of the given size (no warm-up: speed, not quality)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import train_tokenizer
    from ark_trainer.base.fileio import read_jsonl

    train, eval_ = write_demo_data(root / "data", n_train=n_train, n_eval=8, seed=seed)
    rows = read_jsonl(train)
    texts = [json.dumps(r, ensure_ascii=False) for r in rows]
    tok = train_tokenizer(texts, vocab_size=vocab)
    heads = max(2, hidden // 64)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=4096,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model_dir = root / "model"
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(model_dir, safe_serialization=True)
    tok.save_pretrained(model_dir)
    params = sum(p.numel() for p in model.parameters())
    return {"train": train, "eval": eval_, "model": model_dir, "params": params}


def src_env() -> dict:
    """Environment for child processes: this checkout's ``src`` first on PYTHONPATH, offline."""
    src = str(Path(__file__).resolve().parent.parent / "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false"
    )
    return env


def demo_sft_rows(n: int) -> list[dict]:
    """``n`` prompt/completion rows of the QC demo's training data (its gold answers): what RFT trains on."""
    from ark_trainer.app.demo.data import generate_rows, gold_answer

    return [
        {
            "prompt": [{"role": "user", "content": r["question"]}],
            "completion": [{"role": "assistant", "content": gold_answer(r)}],
        }
        for r in generate_rows(n, 0, "train", with_candidates=False)
    ]


def step_timer(times: list[float]):
    """A ``TrainerCallback`` that appends each optimizer step's wall seconds to ``times``."""
    import time

    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.started)

    return StepTimer()


def step_figures(times: list[float]) -> dict:
    """Seconds a step (the first, which pays for warm-up, left out), the first step's, and this process's peak
    RSS: what the SFT step benches report."""
    import resource

    steady = times[1:] or times
    return {
        "seconds_per_step": round(sum(steady) / len(steady), 3),
        "first_step_s": round(times[0], 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
