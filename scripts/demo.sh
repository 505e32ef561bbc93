#!/usr/bin/env bash
# Set up (if needed) and run the embedded demo: ark-trainer demo --output_dir ark-demo
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ark-trainer demo --output_dir "${1:-ark-demo}" --overwrite_output_dir True
