#!/usr/bin/env bash
# The GPU checks (precision, QLoRA, vLLM, GRPO speed) in one run of under 8 minutes on one GPU: the parts' limits add up to
# 470 s (sized for an H200 from the November 2026 timings; not yet run on a GPU with these parts). Without a
# CUDA GPU every GPU part is skipped and says so (exit 0).
#
#   here:   bash scripts/gpu_wheels.sh                 (the wheels that image lacks, into .whl/)
#   there:  bash scripts/gpu_check.sh                  (device `run`, carry [".whl"], timeout_s 600)
#
# 1. tests/test_gpu.py: autocast over fp32 master weights by default, bf16 weights only when asked,
#    a NaN step skipped on the GPU, fp16 master weights, bf16 LoRA merge, QLoRA/vLLM where installed;
# 2. the demo end to end with default flags (`ark-trainer demo`): must exit 0 and write its report;
# 3. the advanced reference template (docs/getting-started.md) (`--device cuda:0 --fp16 True`) on the demo's data;
# 4. bench/gpu_generation.py: generation methods side by side (tokens/s);
# 5. bench/memory.py --gpu: peak GPU memory of GRPO full fine-tuning vs LoRA, and per precision mode.
# Results land in $OUT (default /tmp/ark-gpu) and, for 2-5, in bench/results/gpu_*.md / memory_gpu.md:
# commit what it measured. Each part has its own time limit; a part that fails is recorded, the rest run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/ark-gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing .whl/ failed: run scripts/gpu_wheels.sh here and carry .whl"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src  # a machine that has the requirements installed already (or this CPU box)
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
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
results=bench/results
status="$out/gpu_check.md"
echo "# scripts/gpu_check.sh ($(date -u +%FT%TZ))" > "$status"
note() { echo "- $1" | tee -a "$status"; }
if ! $py -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  note "no CUDA GPU: tests/test_gpu.py, the demo, the reference template and the GPU benchmarks skipped"
  $py bench/gpu_generation.py --out "$results" >/dev/null  # says "not measured: no GPU in this session"
  $py bench/memory.py --gpu --out "$results" >/dev/null
  exit 0
fi
rc=0
part() {  # part NAME SECONDS COMMAND...: run with a limit, log to $out/NAME.log, record the outcome
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local code=$?
  tail -n 25 "$out/$name.log"
  note "$name: exit $code in $((SECONDS - t0))s (limit ${limit}s)"
  [ $code -eq 0 ] || rc=1
}
part test_gpu 70 $py -m pytest -q -rs -p no:cacheprovider tests/test_gpu.py
demo="$out/demo"
rm -rf "$demo"
part demo 150 $py -m ark_trainer demo --output_dir "$demo"
if [ -f "$demo/report.md" ]; then cp "$demo/report.md" "$results/gpu_demo_report.md"; fi
if [ -d "$demo/data" ] && [ -d "$demo/base_model" ]; then
  tpl="$out/qc-v2"
  rm -rf "$tpl"
  part reference_template 70 $py -m ark_trainer train --strategy RFT+GRPO --task_name 智能客服_RFT_GRPO_v2 \
    --model_path "$demo/base_model" --data_path "$demo/data/train.jsonl" \
    --output_dir "$tpl" --eval_auto True \
    --eval_dataset "$demo/data/eval.jsonl" --max_train_steps 60 --rft_steps 20 \
    --grpo_learning_rate 5e-6 --batch_size 8 --gradient_accumulation_steps 2 --warmup_ratio 0.1 \
    --save_steps 20 --log_dir "$tpl-logs" --device cuda:0 --fp16 True --auto_heartbeat True
  if [ -f "$tpl/report.md" ]; then cp "$tpl/report.md" "$results/gpu_reference_template_report.md"; fi
else
  note "reference_template: skipped (the demo left no data/base_model in $demo)"; rc=1
fi
part gpu_generation 80 $py bench/gpu_generation.py --out "$results" --budget_s 50
part memory_gpu 100 $py bench/memory.py --gpu --out "$results"
cp "$status" "$results/gpu_check.md"
cp "$out/versions.txt" "$results/gpu_versions.txt"  # the logs stay in $OUT
exit $rc
