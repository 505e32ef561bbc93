#!/usr/bin/env bash
# Create .venv and install ark-trainer with the pinned, CPU-friendly dependencies.
# torch is pinned (requirements.txt): an unpinned torch would pull a multi-GB CUDA build.
# A second call with the same requirements, pyproject.toml and Python does nothing (a stamp in .venv records
# what was installed), so `bash scripts/test.sh --fast` does not spend its time in pip; delete
# .venv/.ark-installed to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REQ=${1:-requirements.txt}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# what decides the install: the requirement files (with those they include), pyproject.toml, the Python
stamp=$( (cat "$REQ" requirements.txt pyproject.toml; .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)
if [ -f .venv/.ark-installed ] && grep -qx "$stamp $REQ" .venv/.ark-installed \
  && .venv/bin/python -c "import ark_trainer" 2>/dev/null; then
  exit 0
fi
# pip -q is silent for minutes: say what is installed and how long it takes, then a line every 15 s
. scripts/ticking.sh
echo "setup: installing ark-trainer and its pinned dependencies ($REQ: torch, transformers, TRL, ...)" \
  "into .venv, once; about 2 minutes"
echo "setup: 1/3 pip itself"
ticking .venv/bin/python -m pip install -q --upgrade pip
# --no-compile: Python compiles a module when it is first imported; compiling every installed file up front
# doubled the time of installing torch (30 s vs 14 s here)
echo "setup: 2/3 the pinned dependencies ($REQ)"
ticking .venv/bin/python -m pip install -q --no-compile -r "$REQ"
echo "setup: 3/3 ark-trainer itself (editable)"
ticking .venv/bin/python -m pip install -q --no-deps -e .
echo "setup: .venv is ready"
echo "$stamp $REQ" >> .venv/.ark-installed
