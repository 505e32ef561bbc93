#!/usr/bin/env bash
# Fetch, on this machine, the wheels the lent GPU machine's image lacks, for scripts/gpu_check.sh.
# That image (see .library/device/KINDS.md) has Python 3.12 with torch+CUDA, accelerate, peft, pyarrow,
# tensorboard and pytest, transformers 5.17, and no trl, datasets, dill or multiprocess (regex and fsspec
# come along at the versions transformers and datasets want); nothing can be
# fetched there. The versions are the ones requirements.txt pins. Writes .whl/ (git-ignored, ~16 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
pins=$(grep -E '^(transformers|trl|datasets|json5)==' requirements.txt | tr '\n' ' ')
rm -rf .whl && mkdir .whl
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl $pins dill==0.4.1 multiprocess==0.70.19 regex==2026.11.19 fsspec==2026.9.0 2>&1 | grep -v "^WARNING: Location" || true
ls .whl && du -sh .whl
