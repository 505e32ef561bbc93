#!/usr/bin/env bash
# The install GPU users are told to do (docs/getting-started.md): the torch build they want first, then
# `pip install -e .` with no extras. Builds it in .venv-pip/ and runs a real deploy test against that
# install, so a dependency that `deploy` needs but the package does not declare fails CI.
# Here the torch "build you want" is the pinned CPU wheel (an unpinned torch would pull a CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
rm -rf .venv-pip
"$PY" -m venv .venv-pip
.venv-pip/bin/python -m pip install -q --upgrade pip
# --no-compile as in setup.sh: modules are compiled when first imported
.venv-pip/bin/python -m pip install -q --no-compile "$(grep -E '^torch==' requirements.txt)"
.venv-pip/bin/python -m pip install -q --no-compile -e . "$(grep -E '^pytest==' requirements-test.txt)"
ARK_REQUIRE_OPENCLAW=1 .venv-pip/bin/python -m pytest -q -p no:cacheprovider tests/openclaw/test_deploy.py tests/deploy/test_serve.py \
  -k "server_needs_the_deployments_key or core_dependencies_cover"
