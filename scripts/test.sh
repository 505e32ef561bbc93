#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite plus lint. Used by the README and by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements-test.txt
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/python -m pytest -q "$@"
