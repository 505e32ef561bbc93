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
  # each so they do not oversubscribe; ARK_TEST_WORKERS=1 runs it serially with torch's own threads. The
  # files go out in collection order (tests/conftest.py: the long computing files first, then pytest-xdist's
  # own order, the files with the most tests first)
  TIER=(-n "${ARK_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder)
  export OMP_NUM_THREADS=1
fi
# Set-up and the checks before pytest run side by side where they can (they are mostly disk and network): the
# OpenClaw CLI and Chromium install while pip fills .venv; then the models, lint, types and the plain-install
# check (which needs the OpenClaw CLI) together. Each job's output is shown when it ends; any failure stops here.
JOBS=()
LOGS=$(mktemp -d)
start() {  # start NAME CMD...: run CMD in the background, its output in $LOGS/NAME
  local name=$1
  shift
  ("$@") >"$LOGS/$name" 2>&1 &
  JOBS+=("$!:$name")
}
finish() {  # wait for every started job; print each one's output; exit 1 naming those that failed
  local failed=() entry
  for entry in "${JOBS[@]}"; do
    if ! wait "${entry%%:*}"; then failed+=("${entry#*:}"); fi
    cat "$LOGS/${entry#*:}"
  done
  JOBS=()
  if [ ${#failed[@]} -gt 0 ]; then
    echo "error: set-up or checks failed: ${failed[*]} (their output is above)" >&2
    exit 1
  fi
}
install_chromium() {  # the dashboard's browser test runs the page in real headless Chromium (Debian's package)
  command -v chromium >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
}
setup_openclaw() {  # Node 24 + OpenClaw into .tools/ (the OpenClaw tests use the real CLI); its exit code in a file
  local rc=0
  bash scripts/setup_openclaw.sh || rc=$?
  echo "$rc" >"$LOGS/.openclaw-rc"
  return "$rc"
}
check_pip_install() {  # after the OpenClaw CLI is in place: its deploy test runs it
  while [ ! -f "$LOGS/.openclaw-rc" ]; do sleep 1; done
  [ "$(cat "$LOGS/.openclaw-rc")" = 0 ] || { echo "(skipped: the OpenClaw set-up failed)"; return 1; }
  bash scripts/check_pip_install.sh
}
lint() {
  .venv/bin/ruff check src tests bench
  .venv/bin/ruff format --check src tests bench
  .venv/bin/mypy                              # [tool.mypy] in pyproject.toml: src/, 0 errors
}
start openclaw setup_openclaw
start chromium install_chromium
bash scripts/setup.sh requirements-test.txt
export ARK_REQUIRE_OPENCLAW=1              # so those tests fail, not skip, when it is missing
export ARK_REQUIRE_MODELS=1                # so the real-model tests fail, not skip, when SmolLM2 is missing
export ARK_REQUIRE_BROWSER=1               # so the browser test fails, not skips, when Chromium is missing
start models bash scripts/setup_models.sh  # SmolLM2-135M-Instruct (GGUF) into .tools/smollm2/ (the real-model tests)
start lint lint
# the full run (CI) also checks the plain `pip install -e .` that GPU users do, with a real deploy test (after
# setup.sh, as both write src/ark_trainer.egg-info)
if [ "$FAST" = 0 ] && [ $# -eq 0 ]; then start pip-install check_pip_install; fi
finish
.venv/bin/python -m pytest -q --durations=15 ${TIER[@]+"${TIER[@]}"} "$@"
