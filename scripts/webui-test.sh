#!/usr/bin/env bash
# The web UI's browser tests (tests/webui/test_webui.py): Debian's Chromium, headless, driven by
# Playwright for Python (pytest) against a real `kvserve serve` on stories260K. Installs Chromium
# when missing and the Python tools into .venv (scripts/venv.sh: playwright, whose wheel carries
# its own driver, and pytest; no browser is downloaded), builds kvserve, runs the tests (about half
# a minute) and leaves the screenshots in build/webui-artifacts/.
#   scripts/webui-test.sh                 run the tests
#   scripts/webui-test.sh --update-docs   also copy the chat and map screenshots into docs/
# Environment: KVSERVE_BUILD_DIR (build) and KVSERVE_BINARY (its kvserve), KVSERVE_MODEL
# (scripts/get-model.sh), WEBUI_ARTIFACTS (the build folder's webui-artifacts), CHROMIUM
# (/usr/bin/chromium); KVSERVE_SKIP_BUILD=1 skips scripts/build.sh and tests the kvserve that is
# there (KVSERVE_BINARY, e.g. another checkout's build).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --browser
scripts/venv.sh
if [ "${KVSERVE_SKIP_BUILD:-0}" != 1 ]; then
  scripts/build.sh
fi
build_dir=${KVSERVE_BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$PWD/$build_dir" ;; esac
export KVSERVE_BINARY="${KVSERVE_BINARY:-$build_dir/kvserve}"
export KVSERVE_MODEL="${KVSERVE_MODEL:-$(scripts/get-model.sh)}"
export WEBUI_ARTIFACTS="${WEBUI_ARTIFACTS:-$build_dir/webui-artifacts}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -x "$KVSERVE_BINARY" ]; then
  echo "webui-test: $KVSERVE_BINARY not built (scripts/build.sh)" >&2
  exit 1
fi
rm -rf "$WEBUI_ARTIFACTS"
timeout 300 .venv/bin/python -m pytest -q tests/webui
echo "webui-test: screenshots in $WEBUI_ARTIFACTS"
if [ "${1:-}" = "--update-docs" ]; then
  cp "$WEBUI_ARTIFACTS/chat.png" docs/webui-chat.png
  cp "$WEBUI_ARTIFACTS/map.png" docs/webui-map.png
fi
