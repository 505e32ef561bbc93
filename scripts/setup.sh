#!/usr/bin/env bash
# Create .venv and install ark-trainer with the pinned, CPU-friendly dependencies.
# torch is pinned (requirements.txt): an unpinned torch would pull a multi-GB CUDA build.
# A second call with the same requirements, pyproject.toml and Python does nothing (a stamp in .venv records
# what was installed), so `bash scripts/test.sh --fast` does not spend its time in pip; delete
# .venv/.ark-installed to force a reinstall. The installed packages' bytecode is written once too
# (.venv/.ark-compiled records it): see the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REQ=${1:-requirements.txt}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# what decides the install: the requirement files (with those they include), pyproject.toml, the Python
stamp=$( (cat "$REQ" requirements.txt pyproject.toml; .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)
# pip -q is silent for minutes: say what is installed and how long it takes, then a line every 15 s
. scripts/ticking.sh
# Bytecode of everything installed in .venv, written once per install: Python reads a module's .pyc where
# one is there, and else compiles the module every time it is imported unless it may write the .pyc, which
# PYTHONDONTWRITEBYTECODE=1 (set on the shared development machine) forbids. Without these files every
# process there compiled torch, transformers and TRL from source again: about 10 s of CPU, half of a tiny
# `train` run's, and the test suite starts hundreds of processes (CLI runs, loop rounds, model servers).
compile_quietly() { .venv/bin/python -m compileall -q -j 0 "$1" >/dev/null 2>&1; }
compile_installed() {
  grep -qx "$stamp $REQ" .venv/.ark-compiled 2>/dev/null && return 0
  local site
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "setup: writing the installed packages' bytecode into .venv, once (about a minute)"
  # a few packages ship files that are not Python 3 (test data, templates): compileall reports them and
  # goes on (its exit status says so); they are never imported
  ticking compile_quietly "$site" || true
  echo "$stamp $REQ" >> .venv/.ark-compiled
}
if [ -f .venv/.ark-installed ] && grep -qx "$stamp $REQ" .venv/.ark-installed \
  && .venv/bin/python -c "import ark_trainer" 2>/dev/null; then
  compile_installed
  exit 0
fi
echo "setup: installing ark-trainer and its pinned dependencies ($REQ: torch, transformers, TRL, ...)" \
  "into .venv, once; about 2 minutes"
echo "setup: 1/3 pip itself"
ticking .venv/bin/python -m pip install -q --upgrade pip
# --no-compile: pip's compiling file by file doubled the time of installing torch (30 s vs 14 s here);
# compile_installed writes the same bytecode afterwards, on every core
echo "setup: 2/3 the pinned dependencies ($REQ)"
ticking .venv/bin/python -m pip install -q --no-compile -r "$REQ"
echo "setup: 3/3 ark-trainer itself (editable)"
ticking .venv/bin/python -m pip install -q --no-deps -e .
echo "$stamp $REQ" >> .venv/.ark-installed
compile_installed
echo "setup: .venv is ready"
