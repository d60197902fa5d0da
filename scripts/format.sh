#!/usr/bin/env bash
# Formats every C++ file with the repository's .clang-format; with --check, changes nothing and
# exits non-zero (listing the files) when any file is not formatted.
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/data holds other projects' sources as test data, byte for byte: never formatted.
mapfile -t files < <(git ls-files '*.cc' '*.h' ':!tests/data/**')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'format: not clang-formatted (run scripts/format.sh):\n' >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files clang-formatted"
else
  clang-format -i "${files[@]}"
fi
