#!/usr/bin/env bash
# The project's Python tools in a project-local virtual environment, .venv/ (ignored by git),
# exactly as requirements/tools.txt pins them: every package by version and sha256, wheels only
# (--only-binary=:all:), never system-wide. Reinstalls when tools.txt changes; fails (exit 1) when
# it cannot install, so that a test that needs a tool fails instead of skipping. Prints nothing
# when the environment is already up to date.
#   scripts/venv.sh           create or update .venv
#   scripts/venv.sh --lock    recompile requirements/tools.txt from requirements/tools.in (pip-tools
#                             in a throwaway environment; newest versions, every wheel's hash)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
lock="$root/requirements/tools.txt"
python=${KVSERVE_PYTHON:-python3}

if [ "${1:-}" = "--lock" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$python" -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q --only-binary=:all: pip-tools
  "$tmp/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
    --pip-args="--only-binary=:all:" --output-file "$lock" "$root/requirements/tools.in"
  echo "venv: wrote $lock" >&2
  exit 0
fi

stamp="$venv/.kvserve-requirements.sha256"
wanted=$(sha256sum "$lock" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  exit 0
fi
echo "venv: installing requirements/tools.txt into .venv" >&2
if [ ! -x "$venv/bin/python" ]; then
  if ! "$python" -m venv "$venv"; then
    echo "venv: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
fi
rm -f "$stamp"
# --no-deps: the lock lists every dependency already, so nothing is resolved at install time.
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
  --only-binary=:all: --no-deps -r "$lock"; then
  echo "venv: pip could not install requirements/tools.txt" >&2
  exit 1
fi
"$venv/bin/python" -m pip check >&2 || { echo "venv: pip check failed" >&2; exit 1; }
echo "$wanted" >"$stamp"
