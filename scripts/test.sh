#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite plus lint. Used by the README and by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements-test.txt
bash scripts/setup_openclaw.sh             # Node 24 + OpenClaw into .tools/ (the OpenClaw tests use the real CLI)
export ARK_REQUIRE_OPENCLAW=1              # so those tests fail, not skip, when it is missing
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/python -m pytest -q "$@"
