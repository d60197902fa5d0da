#!/usr/bin/env bash
# The web UI's browser tests (tests/webui/webui.test.mjs): Debian's Chromium, headless, driven by
# playwright-core against a real `kvserve serve` on stories260K. Installs Chromium and
# playwright-core when missing, builds kvserve, runs the tests (about half a minute) and leaves the
# screenshots in build/webui-artifacts/.
#   scripts/webui-test.sh                 run the tests
#   scripts/webui-test.sh --update-docs   also copy the chat and map screenshots into docs/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --browser
scripts/install-npm.sh webui
scripts/build.sh
export KVSERVE_BINARY="$PWD/${KVSERVE_BUILD_DIR:-build}/kvserve"
export KVSERVE_MODEL="${KVSERVE_MODEL:-$(scripts/get-model.sh)}"
export WEBUI_ARTIFACTS="${WEBUI_ARTIFACTS:-$PWD/${KVSERVE_BUILD_DIR:-build}/webui-artifacts}"
rm -rf "$WEBUI_ARTIFACTS"
(cd tests/webui && timeout 300 node --test --test-concurrency=1 webui.test.mjs)
echo "webui-test: screenshots in $WEBUI_ARTIFACTS"
if [ "${1:-}" = "--update-docs" ]; then
  cp "$WEBUI_ARTIFACTS/chat.png" docs/webui-chat.png
  cp "$WEBUI_ARTIFACTS/map.png" docs/webui-map.png
fi
