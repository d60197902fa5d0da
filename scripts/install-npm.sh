#!/usr/bin/env bash
# Installs the npm packages the tests use (the official `openai` client in tests/openai_client),
# exactly as package-lock.json pins them. Skips, with a note, where npm is missing. (The web UI's
# browser tests use the Python playwright package from .venv: scripts/webui-test.sh.)
set -euo pipefail
cd "$(dirname "$0")/../tests/openai_client"
if ! command -v npm >/dev/null; then
  echo "install-npm: npm not found; the openai client test will be skipped" >&2
  exit 0
fi
wanted=$(node -p 'require("./package-lock.json").packages["node_modules/openai"].version')
installed=$(node -p 'try { require("./node_modules/openai/package.json").version } catch { "" }')
if [ "$wanted" = "$installed" ]; then exit 0; fi
if ! npm ci --no-audit --no-fund --loglevel=error; then
  echo "install-npm: npm ci failed; the openai client test will be skipped" >&2
fi
