#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite plus lint. Used by the README and by CI.
#   bash scripts/test.sh          everything: lint + every test, the slow end-to-end tier included (CI)
#   bash scripts/test.sh --fast   lint + the fast tier (pytest -m "not slow" on 2 workers): the inner loop, under 2 minutes
#   ARK_TEST_WORKERS=1 bash scripts/test.sh   everything serially (the default is 2 pytest-xdist workers)
# Any other arguments go to pytest (e.g. bash scripts/test.sh --fast tests/data/test_loader.py -x).
set -euo pipefail
cd "$(dirname "$0")/.."
TIER=()
FAST=0
if [ "${1:-}" = "--fast" ]; then
  shift
  FAST=1
  # the fast tier on both cores (pytest-xdist), one torch thread per worker so they do not oversubscribe
  TIER=(-m "not slow" -n "${ARK_TEST_WORKERS:-2}")
  export OMP_NUM_THREADS=1
elif [ "${ARK_TEST_WORKERS:-2}" != "1" ]; then
  # the whole suite on both cores: a module per worker (its module fixtures built once), one torch thread
  # each so they do not oversubscribe; ARK_TEST_WORKERS=1 runs it serially with torch's own threads
  TIER=(-n "${ARK_TEST_WORKERS:-2}" --dist loadfile)
  export OMP_NUM_THREADS=1
fi
bash scripts/setup.sh requirements-test.txt
bash scripts/setup_openclaw.sh             # Node 24 + OpenClaw into .tools/ (the OpenClaw tests use the real CLI)
export ARK_REQUIRE_OPENCLAW=1              # so those tests fail, not skip, when it is missing
bash scripts/setup_models.sh               # SmolLM2-135M-Instruct (GGUF) into .tools/smollm2/ (the real-model tests)
export ARK_REQUIRE_MODELS=1                # so those tests fail, not skip, when it is missing
# the dashboard's browser test runs the page in real headless Chromium (Debian's package)
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
export ARK_REQUIRE_BROWSER=1               # so the browser test fails, not skips, when Chromium is missing
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/mypy                              # [tool.mypy] in pyproject.toml: src/, 0 errors
# the full run (CI) also checks the plain `pip install -e .` that GPU users do, with a real deploy test
if [ "$FAST" = 0 ] && [ $# -eq 0 ]; then bash scripts/check_pip_install.sh; fi
.venv/bin/python -m pytest -q --durations=15 ${TIER[@]+"${TIER[@]}"} "$@"
