#!/usr/bin/env bash
# Issue 7's GPU checks in one run on the lent GPU machine; written ahead, not yet run on a GPU.
#
#   here:   bash scripts/gpu_wheels.sh                 (the wheels that image lacks, into .whl/)
#   there:  bash scripts/gpu_check.sh                  (device `run`, carry [".whl"], timeout_s 600)
#
# 1. tests/test_gpu.py: auto precision (bf16), fp16 master weights, bf16 LoRA merge, QLoRA and vLLM
#    where those packages exist (they are skipped otherwise, and say so);
# 2. bench/gpu_grpo.py: bf16 GRPO on a 0.33B model: step time, tokens/s, peak GPU memory.
# Everything lands in $OUT (versions.txt, test_gpu.log, gpu_grpo.md/.json): copy gpu_grpo.* into
# bench/results/ and commit what it measured.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/ark-gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
$py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "installing .whl/ failed: run scripts/gpu_wheels.sh here and carry .whl"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
$py - <<'PY' | tee "$out/versions.txt"
import importlib
import torch
print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NONE", "torch", torch.__version__)
for name in ("transformers", "trl", "datasets", "accelerate", "peft", "pyarrow", "vllm", "bitsandbytes"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:  # noqa: BLE001
        print(name, "unavailable:", type(exc).__name__, exc)
PY
rc=0
timeout 200 $py -m pytest -q -rs -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$out/test_gpu.log" || rc=1
timeout 330 $py bench/gpu_grpo.py --out "$out" 2>&1 | tail -60 | tee "$out/gpu_grpo.log" || rc=1
exit $rc
