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
ticking() {
  local start=$SECONDS
  "$@" &
  local pid=$!
  while ! wait_for "$pid" 15; do echo "  ... still installing ($((SECONDS - start)) s)"; done
  wait "$pid"
}
wait_for() {  # true once process $1 has ended, false after $2 seconds while it still runs
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
  ! kill -0 "$1" 2>/dev/null
}
echo "setup: installing ark-trainer and its pinned dependencies ($REQ: torch, transformers, TRL, ...)" \
  "into .venv, once; about 2 minutes"
ticking .venv/bin/python -m pip install -q --upgrade pip
# --no-compile: Python compiles a module when it is first imported; compiling every installed file up front
# doubled the time of installing torch (30 s vs 14 s here)
ticking .venv/bin/python -m pip install -q --no-compile -r "$REQ"
.venv/bin/python -m pip install -q --no-deps -e .
echo "setup: .venv is ready"
echo "$stamp $REQ" >> .venv/.ark-installed
