#!/usr/bin/env bash
# Create .venv and install ark-trainer with the pinned, CPU-friendly dependencies.
# torch is pinned (requirements.txt): an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r "${1:-requirements.txt}"
.venv/bin/python -m pip install -q --no-deps -e .
