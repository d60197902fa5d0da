#!/usr/bin/env bash
# Installs the npm packages the tests use (the official `openai` client in tests/openai_client),
# exactly as package-lock.json pins them. Skips, with a note, where npm is missing.
#   scripts/install-npm.sh webui   instead installs playwright-core for the web UI's browser tests
#                                  (tests/webui) and fails when it cannot
set -euo pipefail
if [ "${1:-}" = "webui" ]; then
  cd "$(dirname "$0")/../tests/webui"
  wanted=$(node -p 'require("./package-lock.json").packages["node_modules/playwright-core"].version')
  installed=$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch { "" }')
  if [ "$wanted" = "$installed" ]; then exit 0; fi
  # playwright-core downloads no browser; the tests drive Debian's /usr/bin/chromium.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
  exit 0
fi
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
